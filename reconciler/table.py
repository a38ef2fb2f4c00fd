"""``ProcessTable.status``: counts and rows kept current from the Process cache, written in batches.

The reference never writes ``processCount``, ``readyCount``, ``processes`` or ``lastReconciled``;
tatara maintains them (docs/behaviour.md#processtable-status, docs/divergences.md#processtable-status).

- :func:`table_status` is pure: Processes in, the status merge patch out.
- ``processCount`` and ``readyCount`` are exact, whatever the number of Processes. A Process is
  *ready* when its kstatus ``Ready`` condition is ``True``, or, when it has no ``Ready``
  condition, when its phase is ``Attested`` (the converged phase).
- ``processes`` (the rows) is **capped** so the object stays far below etcd's 1.5 MiB limit:
  at most :data:`DEFAULT_MAX_ROWS` rows and at most :data:`DEFAULT_MAX_ROWS_BYTES` bytes of
  row JSON, whichever is hit first. A row is about 300–500 bytes, so 500 rows are ~250 KiB;
  the byte budget bounds the worst case (253-character names, long PIDs) at 256 KiB.
  Rows are sorted by PID in hierarchy order (numeric segments compare as numbers, so
  ``seph.2`` < ``seph.10``; parents before their children), then namespace/name; Processes
  without a PID yet come last. The rows kept are the first ones in that order: the oldest
  PIDs. The CRD has no "truncated" field (the wire format is the reference's), so a
  truncated table is one where ``len(processes) < processCount``.
- ``lastReconciled`` is the time of the write.

:class:`TableStatusWriter` coalesces: Process events only mark the table dirty; at most one
status write happens per ``interval`` seconds (default 2), and a write whose counts and rows
equal the last ones stored is skipped (``lastReconciled`` alone never causes a write).

:class:`TableKeeper` is the one get-or-create of the table (PID allocation reads through it too) and
keeps it from handing PIDs out twice (docs/behaviour.md#a-missing-or-deleted-table):

- a missing table is recreated with ``nextSequence`` past every sequence number a Process holds
  (a cluster-wide LIST: its own PID, its parent's, and every level above them) and past every number
  this reconciler handed out, with a Warning Event ``ProcessTableRecreated`` when any is held and the
  table had existed (:func:`table_existed`: not on a fresh install);
- the table carries our finalizer (:data:`shared.domain.finalizers.TABLE`), put on at creation or by
  the next status write; a deleted table keeps it (Warning Event ``ProcessTableInUse``) until no
  Process holds a PID, and then loses it with a resourceVersion-guarded write, so an allocation that
  bumped meanwhile makes the removal 409 and wait for the next pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import anyio
import msgspec
from msgspec import UNSET, UnsetType

from reconciler.claims import (
    ELIGIBLE_PHASES,
    ClaimAction,
    arbitrate,
    candidates_by_key,
    claims_changed,
    foreign_holders,
    holder_keys,
    in_phase,
    process_ref,
)
from shared.domain import finalizers
from shared.domain.api.codec import decode_table, to_wire, wire_decoder
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.table import (
    PROCESS_TABLE_NAME,
    ClaimRecord,
    ProcessEntry,
    ProcessTable,
    ProcessTableSpec,
    ProcessTableStatus,
    TableCondition,
)
from shared.domain.api.wire import MergePatch
from shared.domain.identity import pid_segments
from shared.domain.kstatus import Truth, kstatus_conditions
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.api import KubeApi
from shared.kube.errors import ApiError, Conflict, Invalid, NotFound
from shared.kube.events import EventRecorder, EventType
from shared.kube.meta import ObjectMeta, as_json
from shared.kube.pager import list_all
from shared.kube.patch import patch_status

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_MAX_ROWS",
    "DEFAULT_MAX_ROWS_BYTES",
    "TableKeeper",
    "TableStatusPatch",
    "TableStatusWriter",
    "claims_patch",
    "default_table",
    "held_sequence",
    "is_ready",
    "listed_process",
    "pid_sort_key",
    "process_entry",
    "read_table",
    "sequences_of",
    "table_existed",
    "table_status",
    "with_table_conditions",
]

DEFAULT_MAX_ROWS: Final = 500
"""Row cap of ``status.processes``."""

DEFAULT_MAX_ROWS_BYTES: Final = 256 * 1024
"""Byte budget of the rows' JSON (etcd's object limit is 1.5 MiB)."""

RELEASE_ATTEMPTS: Final = 5
"""Guarded claims writes a release tries (each on a fresh read) before it gives up with a 409."""

LEAVING_SECONDS: Final = 30.0
"""How long a released holder counts in the phase it is leaving for, while the Process cache still
shows it in Running or Attested at the resourceVersion it was released at."""

JSON_PATCH: Final = "application/json-patch+json"
"""Content type of the guarded claims write and of the PID bump (:mod:`reconciler.pid`)."""

DEFAULT_FLEET_CLUSTER: Final = "pleme-dev"
"""``--fleet-cluster``'s default (docs/behaviour.md#tatara-reconciler-flags)."""

DEFAULT_INTERVAL: Final = 2.0
"""Seconds between two table status writes, at most one write per interval."""


class TableStatusPatch(MergePatch, frozen=True):
    """The merge patch of ``ProcessTable.status`` the writer sends: counts, rows, the write time, and the
    kstatus conditions with ``observedGeneration`` (:func:`with_table_conditions`). ``claims`` is not
    named, so a merge patch keeps it."""

    process_count: int
    ready_count: int
    processes: list[ProcessEntry]
    last_reconciled: datetime
    conditions: list[TableCondition] | UnsetType = UNSET
    observed_generation: int | UnsetType = UNSET

    @property
    def compared(self) -> Compared:
        """What decides whether a write is needed: counts, rows and the generation, not ``lastReconciled``."""
        seen = self.observed_generation if not isinstance(self.observed_generation, UnsetType) else None
        return self.process_count, self.ready_count, self.processes, seen


Compared = tuple[int, int, list[ProcessEntry], int | None]


def _stored(status: ProcessTableStatus | None) -> Compared:
    if status is None:
        return 0, 0, [], None
    return status.process_count, status.ready_count, status.processes, status.observed_generation


def with_table_conditions(status: TableStatusPatch, table: ProcessTable, now: datetime) -> TableStatusPatch:
    """``status`` with ``observedGeneration`` = the table's generation and kstatus conditions: ``Ready``
    True (reason ``Counted``, the counts as message) for a table the writer keeps, False with
    ``Reconciling`` True for one being deleted while Processes still hold PIDs (reason ``Deleting``);
    ``lastTransitionTime`` kept while a condition's status holds (docs/behaviour.md#processtable-status)."""
    deleting = table.metadata.deletion_timestamp is not None
    reason = "Deleting" if deleting else "Counted"
    message = f"{status.process_count} Process(es), {status.ready_count} ready"
    generation = table.metadata.generation
    conditions = kstatus_conditions(
        Truth(ready=not deleting, reconciling=deleting), table.status.conditions if table.status else [], now,
        lambda type_, value, since: TableCondition(type_=type_, status=value, reason=reason, message=message,
                                                   last_transition_time=since, observed_generation=generation))
    return msgspec.structs.replace(status, conditions=conditions,
                                   observed_generation=generation if generation is not None else UNSET)


# ── the table object ─────────────────────────────────────────────────────────


def default_table(name: str = PROCESS_TABLE_NAME, *, next_sequence: int = 1) -> ProcessTable:
    """The table the reconciler creates when missing: spec defaults ``nextSequence 1, maxDepth 0,
    maxChildren 0, sigtermTimeoutSeconds 480, zombieTimeoutSeconds 600, orphanReapingEnabled true``,
    no status (docs/wire-format.md#processtable), and our finalizer; ``next_sequence`` when numbers
    are held already."""
    return ProcessTable(metadata=ObjectMeta(name=name, finalizers=[finalizers.TABLE]),
                        spec=ProcessTableSpec(next_sequence=next_sequence))


def sequences_of(pid: str | None) -> list[int]:
    """The sequence numbers ``pid`` is made of: its trailing all-digit segments (``seph.1.7`` → 1, 7;
    the first segment is the root's name, even when all digits)."""
    numbers: list[int] = []
    for segment in reversed(pid_segments(pid or "")[1:]):
        if not segment.isdigit():
            break
        numbers.append(int(segment))
    return numbers


def _held(process: Process) -> list[str]:
    """The PIDs ``process`` names: its own ``status.pid`` and ``status.parent``, and its
    ``spec.identity.parent`` (a child still forking names its parent before it holds a PID)."""
    status = process.status
    return [pid for pid in ((status.pid if status else None), (status.parent if status else None),
                            process.spec.identity.parent) if pid]


def held_sequence(processes: Iterable[Process]) -> int:
    """The highest sequence number any of ``processes`` holds or names (0 = none)."""
    return max((n for p in processes for pid in _held(p) for n in sequences_of(pid)), default=0)


def listed_process(raw: msgspec.Raw) -> Process | None:
    """One listed Process as the informers read it, or None when it does not decode (such a Process is
    skipped by the informers too, so it holds no PID we hand out)."""
    try:
        return wire_decoder(Process).decode(raw)
    except (ValueError, RecursionError):
        return None


def _holds_pid(process: Process) -> bool:
    return process.status is not None and bool(process.status.pid)


def table_existed(processes: Iterable[Process], *, seen: bool) -> bool:
    """Whether a table found missing had existed (so its recreation is worth a Warning,
    docs/behaviour.md#a-missing-or-deleted-table): this keeper read, created or bumped one before
    (``seen``), or a Process holds a PID (only a table hands them out). A PID merely named — a child's
    ``spec.identity.parent`` before any parent holds it, as on a fresh install — proves nothing."""
    return seen or any(_holds_pid(p) for p in processes)


class TableKeeper:
    """Reads table ``name`` for one reconciler, recreating it past every held PID when it is missing,
    and keeps our finalizer on it while any Process holds a PID (see the module docstring).

    Args:
        client: the API client (GET, create and patch on processtables; LIST on processes).
        name: the table.
        recorder: writes the Warning Events; None records none (they are logged either way).
    """

    def __init__(self, client: KubeApi, name: str = PROCESS_TABLE_NAME, *,
                 recorder: EventRecorder | None = None) -> None:
        self.client = client
        self.name = name
        self.recorder = recorder
        self.highest = 0
        """The highest sequence number this reconciler handed out (:meth:`handed_out`)."""
        self.recreated = 0
        """Tables recreated (created after one existed) while sequence numbers were held."""
        self.seen = False
        """This keeper has read or created the table before (so a missing one was deleted)."""

    def handed_out(self, sequence: int) -> None:
        """Record that ``sequence`` was won by a bump (a recreated table starts past it even before the
        Process that holds it has stored it)."""
        self.highest = max(self.highest, sequence)

    async def processes(self) -> list[Process]:
        """Every Process of the cluster, from a LIST (every page)."""
        listing = await list_all(self.client, PROCESSES, listed_process)
        return list(listing.items)

    async def read(self) -> ProcessTable:
        """The table as stored, recreated when missing (a concurrent creator's copy wins).

        Raises:
            ApiError: the GET, LIST or create failed.
        """
        return (await self.read_document())[0]

    async def read_document(self) -> tuple[ProcessTable, bytes]:
        """:meth:`read`, with the table's JSON as the API server sent it (a JSON patch ``test`` op must
        compare against the stored bytes, not against our re-encoding of them).

        Raises:
            ApiError: the GET, LIST or create failed.
        """
        try:
            raw = await self.client.get(PROCESS_TABLES, self.name)
            self.seen = True
            return decode_table(raw), raw
        except NotFound:
            pass
        processes = await self.processes()
        next_sequence = max(held_sequence(processes), self.highest) + 1
        existed = table_existed(processes, seen=self.seen or self.highest > 0)
        try:
            fresh = default_table(self.name, next_sequence=next_sequence)
            raw = await self.client.create(PROCESS_TABLES, as_json(fresh))
        except Conflict:
            raw = await self.client.get(PROCESS_TABLES, self.name)
            self.seen = True
            return decode_table(raw), raw
        self.seen = True
        table = decode_table(raw)
        if existed and next_sequence > 1:
            self.recreated += 1
            message = (f"ProcessTable {self.name} was missing: recreated with nextSequence {next_sequence}, "
                       f"past the highest sequence number held ({next_sequence - 1})")
            log.warning("%s", message)
            if self.recorder is not None:
                await self.recorder.record(PROCESS_TABLES, table, EventType.WARNING, "ProcessTableRecreated", message)
        return table, raw

    async def guard(self, table: ProcessTable, cached: Iterable[Process] = ()) -> None:
        """Put our finalizer on a live ``table`` that lacks it; on a deleted one, remove it once no
        Process holds a PID (``cached`` first, then a LIST to be sure). Both writes carry the table's
        resourceVersion; a lost race (409) or a vanished table is left to the next call.

        Raises:
            ApiError: any other failure of the LIST or the patch.
        """
        present = list(table.metadata.finalizers)
        mine = finalizers.TABLE in present
        if table.metadata.deletion_timestamp is None:
            if not mine:
                await self._finalizers(table, [*present, finalizers.TABLE])
            return
        if not mine:
            return
        holders = sum(1 for p in cached if _holds_pid(p))
        if not holders:
            holders = sum(1 for p in await self.processes() if _holds_pid(p))
        if holders:
            message = (f"ProcessTable {self.name} is being deleted; it stays until no Process holds a PID "
                       f"({holders} do), so no PID is handed out twice")
            log.info("%s", message)
            if self.recorder is not None:
                await self.recorder.record(PROCESS_TABLES, table, EventType.WARNING, "ProcessTableInUse", message)
            return
        await self._finalizers(table, [f for f in present if f != finalizers.TABLE])

    async def _finalizers(self, table: ProcessTable, wanted: list[str]) -> None:
        patch = {"metadata": {"resourceVersion": table.metadata.resource_version, "finalizers": wanted}}
        try:
            await self.client.merge_patch(PROCESS_TABLES, self.name, patch)
        except (Conflict, NotFound):
            log.debug("ProcessTable %s moved on before its finalizers were written; next pass", self.name)


async def read_table(client: KubeApi, name: str = PROCESS_TABLE_NAME) -> ProcessTable:
    """The table ``name`` as stored, recreated past every held PID when missing
    (:meth:`TableKeeper.read`, with no Event recorder).

    Raises:
        ApiError: the GET, LIST or create failed.
    """
    return await TableKeeper(client, name).read()


# ── status (pure) ────────────────────────────────────────────────────────────


def is_ready(process: Process) -> bool:
    """``Ready`` condition ``True``; without a ``Ready`` condition, phase ``Attested``."""
    status = process.status
    if status is None:
        return False
    for condition in status.conditions:
        if condition.type_ == "Ready":
            return condition.status == "True"
    return status.phase is ProcessPhase.ATTESTED


def pid_sort_key(pid: str) -> tuple[tuple[int, int, str], ...]:
    """Hierarchy order of PIDs: segment by segment, numbers numerically and before names."""
    return tuple((0, int(s), "") if s.isdigit() else (1, 0, s) for s in pid.split("."))


def _row_order(process: Process) -> tuple[bool, tuple[tuple[int, int, str], ...], str, str]:
    pid = process.status.pid if process.status is not None else None
    return (pid is None or pid == "", pid_sort_key(pid or ""), process.metadata.namespace or "",
            process.metadata.name or "")


def process_entry(process: Process) -> ProcessEntry:
    """The ``status.processes`` row of ``process``.

    ``pid`` is ``""`` before Forking; ``lastUpdated`` is ``status.phaseSince``.
    """
    status = process.status
    attestation = status.attestation if status is not None else None
    return ProcessEntry(
        name=process.metadata.name or "",
        namespace=process.metadata.namespace or "default",
        pid=(status.pid if status is not None else None) or "",
        parent_pid=status.parent if status is not None else None,
        phase=status.phase if status is not None else ProcessPhase.PENDING,
        point_type=str(process.spec.classification.point_type),
        substrate=str(process.spec.classification.substrate),
        content_hash=status.identity.content_hash if status is not None and status.identity is not None else None,
        attestation_root=attestation.composed_root if attestation is not None else None,
        last_updated=status.phase_since if status is not None else None,
    )


def table_status(
    processes: Iterable[Process],
    now: datetime,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    max_bytes: int = DEFAULT_MAX_ROWS_BYTES,
) -> TableStatusPatch:
    """The ``ProcessTable.status`` merge patch for ``processes`` at ``now``: counts exact, rows capped
    by ``max_rows`` and ``max_bytes`` of row JSON (see the module docstring)."""
    everything = list(processes)
    ready = sum(1 for p in everything if is_ready(p))
    rows: list[ProcessEntry] = []
    size = 0
    for process in sorted(everything, key=_row_order):
        if len(rows) >= max_rows:
            break
        row = process_entry(process)
        size += len(msgspec.json.encode(to_wire(row))) + 1
        if size > max_bytes:
            break
        rows.append(row)
    return TableStatusPatch(process_count=len(everything), ready_count=ready, processes=rows, last_reconciled=now)


def claims_patch(document: Mapping[str, Any], new: Mapping[str, ClaimRecord]) -> list[dict[str, object]]:
    """The JSON patch (RFC 6902) that replaces the stored ``status.claims`` of the table ``document``
    (its JSON as stored) with ``new`` — only if nobody changed them since ``document`` was read.

    The guard is a ``test`` of the table's ``uid`` and of the stored claims themselves, so the counts
    and rows the writer merges in, and PID bumps on ``spec``, never make it fail; when no claims are
    stored yet (a ``test`` cannot check for absence) it tests the ``resourceVersion`` instead. An empty
    ``new`` removes the key (``claims`` is left out when empty, docs/wire-format.md#claims). A failed
    ``test`` is answered 422.
    """
    meta = document.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    status = document.get("status")
    value = {key: to_wire(record) for key, record in sorted(new.items())}
    ops: list[dict[str, object]] = []
    if meta.get("uid"):
        ops.append({"op": "test", "path": "/metadata/uid", "value": meta["uid"]})
    if isinstance(status, Mapping) and "claims" in status:
        ops.append({"op": "test", "path": "/status/claims", "value": status["claims"]})
        if value:
            return [*ops, {"op": "replace", "path": "/status/claims", "value": value}]
        return [*ops, {"op": "remove", "path": "/status/claims"}]
    ops.append({"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")})
    if isinstance(status, Mapping):
        return [*ops, {"op": "add", "path": "/status/claims", "value": value}]
    return [*ops, {"op": "add", "path": "/status", "value": {"claims": value}}]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TableStatusWriter:
    """Keeps table ``table_name``'s status equal to :func:`table_status` of ``processes()``.

    Call :meth:`notify` on every Process event (informer handler) and table event; :meth:`run` writes at
    most once per ``interval`` seconds, only when counts or rows changed. Each flush reads the table
    through ``keeper`` (recreated when missing) and lets it guard the table's finalizer
    (:meth:`TableKeeper.guard`).

    Args:
        client: the API client.
        processes: returns the current Processes (e.g. ``informer.objects``).
        keeper: the table keeper shared with PID allocation (default: one of its own, without Events).
        now: injectable clock for ``lastReconciled`` and a claim's ``grantedAt``.
        fleet_cluster: ``--fleet-cluster``, the cluster of a claims key whose hostname names none.
        namespace: the namespace ``processes()`` covers (None: all); holders of claims outside it are
            read with a GET before arbitrating (:func:`reconciler.claims.foreign_holders`).
        synced: awaited by :meth:`run` before its first write (e.g. the Process informer's
            ``wait_synced``): a cache still listing would count too few Processes and vacate the
            claims of those it has not seen yet.
    """

    def __init__(
        self,
        client: KubeApi,
        processes: Callable[[], Iterable[Process]],
        *,
        table_name: str = PROCESS_TABLE_NAME,
        interval: float = DEFAULT_INTERVAL,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_bytes: int = DEFAULT_MAX_ROWS_BYTES,
        now: Callable[[], datetime] = _utcnow,
        keeper: TableKeeper | None = None,
        fleet_cluster: str = DEFAULT_FLEET_CLUSTER,
        namespace: str | None = None,
        synced: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.synced = synced
        self.fleet_cluster = fleet_cluster
        self.namespace = namespace
        self.claim_writes = 0
        """Claims writes that landed."""
        self.keeper = keeper or TableKeeper(client, table_name)
        self.processes = processes
        self.table_name = table_name
        self.interval = interval
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.now = now
        self.writes = 0
        """Status writes sent so far."""
        self._dirty = anyio.Event()
        self._stored: Compared | None = None
        self._uid: str | None = None
        self._lock = anyio.Lock()
        """One claims decision at a time: a pass and a :meth:`release` never interleave."""
        self._leaving: dict[str, tuple[str | None, ProcessPhase, float]] = {}
        """``<ns>/<name>`` → (resourceVersion it was released at, the phase it leaves for, when), until the
        cache shows it moved on (:meth:`bidders`)."""

    def notify(self, *_: object) -> None:
        """Mark the table out of date (usable directly as an informer handler)."""
        self._dirty.set()

    async def flush(self) -> bool:
        """Compute the status now and write what differs from the stored one: the counts and rows
        (merge patch), then the claims (:meth:`arbitrate`); True if anything was written.

        Raises:
            ApiError: the GET, create or a PATCH failed (a claims write that lost a race is not an error:
                the table is marked out of date and arbitrated again after the interval).
        """
        async with self._lock:
            return await self._flush()

    async def _flush(self) -> bool:
        processes = list(self.processes())
        now = self.now()
        table, raw = await self.keeper.read_document()
        status = with_table_conditions(
            table_status(processes, now, max_rows=self.max_rows, max_bytes=self.max_bytes), table, now)
        wanted = status.compared
        await self.keeper.guard(table, processes)
        if self._stored is None or table.metadata.uid != self._uid:
            self._stored, self._uid = _stored(table.status), table.metadata.uid
        written = False
        if wanted != self._stored:
            raw = await patch_status(self.client, PROCESS_TABLES, None, self.table_name, status) or raw
            self.writes += 1
            self._stored = wanted
            written = True
        return await self.arbitrate(self.bidders(), raw, now) or written

    def bidders(self) -> list[Process]:
        """``processes()``, each Process released by :meth:`release` counted in the phase it left for while
        the cache still shows it eligible at the resourceVersion it was released at (for at most
        :data:`LEAVING_SECONDS`): a pass between the release and the cache showing the phase write must
        not hand the claim back to it."""
        now, out = time.monotonic(), []
        for process in self.processes():
            ref = process_ref(process)
            leaving = self._leaving.get(ref)
            if leaving is not None:
                version, phase, since = leaving
                if (process.phase in ELIGIBLE_PHASES and process.metadata.resource_version == version
                        and now - since <= LEAVING_SECONDS):
                    process = in_phase(process, phase)
                else:
                    del self._leaving[ref]
            out.append(process)
        return out

    async def release(self, process: Process, phase: ProcessPhase) -> bool:
        """Give up the claims naming ``process`` before its status write puts it in ``phase`` (not Running
        or Attested): the keys are arbitrated at once among the other bidders, as a pass would once the
        cache shows the write, so a key passes straight to its next holder or is vacated
        (docs/behaviour.md#handing-a-stable-name-over). True if written; nothing is written when the
        stored claims no longer name it.

        Raises:
            Conflict: the guarded write lost :data:`RELEASE_ATTEMPTS` races in a row (the caller decides
                again later; its status write must not go first).
            ApiError: the GET, a foreign holder's GET or the PATCH failed otherwise.
        """
        ref = process_ref(process)
        async with self._lock:
            # the version the cache shows now (it may have moved past the one decided on): kept leaving
            # until the cache shows a later one, its phase write
            cached = next((p for p in self.processes() if process_ref(p) == ref), process)
            self._leaving[ref] = (cached.metadata.resource_version, phase, time.monotonic())
            for _ in range(RELEASE_ATTEMPTS):
                table, raw = await self.keeper.read_document()
                if not holder_keys(table.status.claims if table.status is not None else {}, ref):
                    return False
                bidders = [in_phase(p, phase) if process_ref(p) == ref else p for p in self.bidders()]
                if await self.arbitrate(bidders, raw, self.now(), strict=True):
                    return True
        raise Conflict(409, "Conflict", f"ProcessTable {self.table_name}: claims release of {ref} lost "
                                        f"{RELEASE_ATTEMPTS} races")

    async def arbitrate(self, processes: Iterable[Process], raw: bytes, now: datetime, *, strict: bool = False) -> bool:
        """Decide every claims key (:func:`reconciler.claims.arbitrate`) from the claims stored in the
        table ``raw`` (its JSON as read: the holders survive a restart) and the bids of ``processes``
        plus the holders outside :attr:`namespace`; write them when :func:`~reconciler.claims.claims_changed`
        with :func:`claims_patch`. True if written.

        Raises:
            ApiError: a GET of a foreign holder or the PATCH failed (a lost ``test``, 422/409/404, is not
                raised: the table is marked out of date and False returned — ``strict`` returns False
                only for that, and True when nothing needed writing, for :meth:`release`).
        """
        document = msgspec.json.decode(raw)
        table = decode_table(raw)
        current = table.status.claims if table.status is not None else {}
        bidders = [*processes, *[p for ref in foreign_holders(current, self.namespace)
                                 if (p := await self._process(ref)) is not None]]
        new, decisions = arbitrate(current, candidates_by_key(bidders, self.fleet_cluster, now), now)
        if not claims_changed(current, new):
            return strict
        try:
            await self.client.request("PATCH", PROCESS_TABLES.path(None, self.table_name, "status"),
                                      body=msgspec.json.encode(claims_patch(document, new)), content_type=JSON_PATCH)
        except (Invalid, Conflict, NotFound):
            log.info("ProcessTable %s claims changed since they were read; arbitrating again", self.table_name)
            self._dirty.set()
            return False
        self.claim_writes += 1
        for key, decision in decisions.items():
            if decision.action is ClaimAction.TRANSFER and decision.record is not None:
                log.info("claim transferred", extra={"key": key, "holder": decision.record.holder,
                                                     "priority": decision.record.priority})
            elif decision.action is ClaimAction.VACATE and key in current:
                log.info("claim vacated (no live candidates)", extra={"key": key})
        return True

    async def _process(self, ref: str) -> Process | None:
        """The Process ``<namespace>/<name>`` as stored, None when gone or undecodable."""
        namespace, _, name = ref.partition("/")
        try:
            return wire_decoder(Process).decode(await self.client.get(PROCESSES, name, namespace))
        except NotFound:
            return None
        except (ValueError, RecursionError):
            return None

    async def run(self) -> None:
        """Write whenever notified, at most once per ``interval``; runs until cancelled.

        A failed write is logged and retried after the interval (the stored copy is re-read).
        """
        if self.synced is not None:
            await self.synced()
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            try:
                await self.flush()
            except ApiError as err:
                log.warning("ProcessTable %s status write failed; will retry: %s", self.table_name, err)
                self._stored = None
                self._dirty.set()
            await anyio.sleep(self.interval)
