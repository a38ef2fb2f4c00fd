"""The ProcessTable status writer: a :class:`~shared.kube.controller.Controller` of the one table, under
:func:`~shared.kube.finalizer.finalize`, and the one writer of its status — counts, rows
(:mod:`reconciler.table_rows`) and the stable-name claims (:mod:`reconciler.claims`)
(docs/behaviour.md#processtable-status, docs/architecture.md#the-processtable-writer).

- **What wakes it.** Every event of table ``table_name`` (status-only ones included: a hand edit of the
  claims is arbitrated again) and every Process event queue the one key ``Request(None, table_name)``;
  the work queue de-duplicates it, so a burst of events is one pass.
- **Coalescing.** A pass that comes less than ``interval`` seconds (``--table-status-interval``) after
  the last one began returns ``Result.after(remaining)``: the key waits in the queue, on the queue's
  clock, taking in whatever arrives meanwhile (Process events do not queue it again while it waits).
  So at most one pass, and at most one status write, per interval; a pass whose counts and rows equal
  the last ones stored writes nothing (``lastReconciled`` alone never causes a write). A failed pass is
  retried by the queue's backoff, and still waits out the interval.
- **The finalizer** (:data:`shared.domain.finalizers.TABLE`): ``finalize`` puts it on a live table
  before Apply writes the status; a deleted table's Cleanup writes the status (``Deleting``) while
  :meth:`~reconciler.table_keeper.TableKeeper.in_use`, and once no Process holds a PID reports it
  released: the finalizer goes in one write guarded by the resourceVersion the decision was made on
  (no retry: a 409 means a PID bump meanwhile, and the next pass decides again).
- **Claims.** Each pass arbitrates every claims key from the stored claims and the cached bidders;
  :meth:`TableStatusWriter.release` (the Process executor, a holder leaving Running/Attested) arbitrates
  at once, under the same lock, outside the interval. A claims write that lost a race queues the key
  again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Final

import anyio
import msgspec

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
from reconciler.table_keeper import JSON_PATCH, TableKeeper
from reconciler.table_rows import (
    DEFAULT_MAX_ROWS,
    DEFAULT_MAX_ROWS_BYTES,
    Compared,
    claims_patch,
    stored_compared,
    table_status,
    with_table_conditions,
)
from shared.domain import finalizers
from shared.domain.api.codec import decode_table, wire_decoder
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.table import PROCESS_TABLE_NAME, ProcessTable
from shared.domain.hostnames import DEFAULT_FLEET_CLUSTER
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.api import KubeApi
from shared.kube.controller import Controller, Request, Result
from shared.kube.errors import ApiError, Conflict, Invalid, NotFound
from shared.kube.finalizer import Apply, Cleanup, Outcome, finalize
from shared.kube.informer import Informer, WatchEventType
from shared.kube.metrics import RuntimeMetrics
from shared.kube.patch import patch_status
from shared.kube.ratelimit import Backoff
from shared.kube.workqueue import Clock, MonotonicClock

log = logging.getLogger(__name__)

__all__ = [
    "CONTROLLER_NAME",
    "DEFAULT_INTERVAL",
    "LEAVING_SECONDS",
    "RELEASE_ATTEMPTS",
    "TableStatusWriter",
]

CONTROLLER_NAME: Final = "processtable"
"""The writer's controller name (metric label ``controller``, log field)."""

RELEASE_ATTEMPTS: Final = 5
"""Guarded claims writes a release tries (each on a fresh read) before it gives up with a 409."""

LEAVING_SECONDS: Final = 30.0
"""How long a released holder counts in the phase it is leaving for, while the Process cache still
shows it in Running or Attested (its phase write not seen yet, even at a newer resourceVersion)."""


DEFAULT_INTERVAL: Final = 2.0
"""Seconds between two table status writes, at most one write per interval."""

SINGLE_TRY: Final = Backoff(initial=0.0, steps=1)
"""The finalizer's removal is tried once: it is guarded by the version the release was decided on."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TableStatusWriter:
    """Keeps table ``table_name``'s status equal to :func:`~reconciler.table_rows.table_status` of
    ``processes()`` and its claims arbitrated (see the module docstring).

    :meth:`watch` builds the :attr:`controller` (give it to the manager); :meth:`reconcile` is its pass.
    :meth:`flush` is one write of counts, rows and claims, without the interval or the finalizer. Each
    flush reads the table through ``keeper`` (recreated when missing).

    Args:
        client: the API client.
        processes: returns the current Processes (e.g. ``informer.objects``).
        keeper: the table keeper shared with PID allocation (default: one of its own, without Events).
        now: injectable clock for ``lastReconciled`` and a claim's ``grantedAt``.
        clock: monotonic seconds for the interval, a released holder's :data:`LEAVING_SECONDS` and the
            controller's work queue (default: :class:`~shared.kube.workqueue.MonotonicClock`).
        fleet_cluster: ``--fleet-cluster``, the cluster of a claims key whose hostname names none.
        namespace: the namespace ``processes()`` covers (None: all); holders of claims outside it are
            read with a GET before arbitrating (:func:`reconciler.claims.foreign_holders`).
        interval: ``--table-status-interval``, seconds.
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
        clock: Clock | None = None,
        keeper: TableKeeper | None = None,
        fleet_cluster: str = DEFAULT_FLEET_CLUSTER,
        namespace: str | None = None,
    ) -> None:
        self.client = client
        self.fleet_cluster = fleet_cluster
        self.namespace = namespace
        self.claim_writes = 0
        """Claims writes that landed."""
        self.keeper = keeper or TableKeeper(client, table_name)
        self.processes = processes
        self.table_name = table_name
        self.request = Request(None, table_name)
        """The one key of :attr:`controller`."""
        self.interval = interval
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.now = now
        self.clock: Clock = clock or MonotonicClock()
        self.writes = 0
        """Status writes sent so far."""
        self.controller: Controller[ProcessTable] | None = None
        """The writer's controller, once :meth:`watch` built it."""
        self._tables: Informer[ProcessTable] | None = None
        self._due = -float("inf")
        """When the next pass may run (:attr:`clock` seconds)."""
        self._parked = False
        """The key waits in the queue for :attr:`_due`: that pass will read every Process event before it."""
        self._stored: Compared | None = None
        self._uid: str | None = None
        self._lock = anyio.Lock()
        """One claims decision at a time: a pass and a :meth:`release` never interleave."""
        self._leaving: dict[str, tuple[ProcessPhase, float]] = {}
        """``<ns>/<name>`` → (the phase it leaves for, when released), until the cache shows it out of
        Running and Attested (:meth:`bidders`)."""

    # -- the controller ---------------------------------------------------------------------

    def watch(self, tables: Informer[ProcessTable], processes: Informer[Any], *,
              metrics: RuntimeMetrics | None = None) -> Controller[ProcessTable]:
        """Build :attr:`controller`: primary ``tables`` (every event of :attr:`table_name`), and every
        ``processes`` event mapped to the one key. Its run waits until both caches have synced: a
        Process cache still listing would count too few Processes and vacate the claims of those it has
        not seen yet."""
        name = self.table_name

        def this_table(_event: WatchEventType, _old: Any, new: Any) -> bool:
            return bool(new.metadata.name == name)

        self._tables = tables
        self.controller = Controller(CONTROLLER_NAME, tables, self.reconcile, predicates=(this_table,),
                                     metrics=metrics, clock=self.clock)
        self.controller.watches(processes, self._woken)
        return self.controller

    def _woken(self, _process: object) -> tuple[Request, ...]:
        """The key for a Process event; none while the key is parked until the interval has passed (the
        parked pass reads the cache as it is then, so queueing it again would only make a pass that
        parks it again)."""
        return () if self._parked else (self.request,)

    def notify(self, *_: object) -> None:
        """Queue the table's key (usable as an informer handler); nothing before :meth:`watch`."""
        if self.controller is not None:
            self.controller.queue.add(self.request)

    async def reconcile(self, request: Request) -> Result:
        """One pass of the table: ``Result.after(remaining)`` while the interval since the last pass has
        not passed, else :func:`shared.kube.finalizer.finalize` of the cached table (read, and recreated,
        when the cache has none) over Apply or Cleanup (module docstring).

        Raises:
            ApiError: a read or write failed (the stored copy is read afresh on the retry).
        """
        if request != self.request:
            return Result.done()
        now = self.clock.now()
        if now < self._due:
            self._parked = True
            return Result.after(self._due - now)
        self._due, self._parked = now + self.interval, False
        cached = self._tables.get(self.table_name) if self._tables is not None else None
        try:
            table = cached if cached is not None else await self.keeper.read()
            return await finalize(self.client, PROCESS_TABLES, finalizers.TABLE, table, self._converge,
                                  remove_retry=SINGLE_TRY)
        except Conflict:
            # the finalizer write met a newer table (a PID bump): decided again on the next pass
            log.debug("ProcessTable %s moved on before its finalizer was written; next pass", self.table_name)
            return Result.after(self.interval)
        except ApiError:
            self._stored = None
            raise

    async def _converge(self, step: Apply[ProcessTable] | Cleanup[ProcessTable]) -> Outcome:
        if isinstance(step, Cleanup) and not await self.keeper.in_use(step.obj, self.processes()):
            return Outcome(Result.done(), released=True)
        await self.flush()
        return Outcome(Result.done())

    # -- the writes ---------------------------------------------------------------------------

    async def flush(self) -> bool:
        """Compute the status now and write what differs from the stored one: the counts and rows
        (merge patch), then the claims (:meth:`arbitrate`); True if anything was written.

        Raises:
            ApiError: the GET, create or a PATCH failed (a claims write that lost a race is not an error:
                its key is queued again, and the pass waits out the interval).
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
        if self._stored is None or table.metadata.uid != self._uid:
            self._stored, self._uid = stored_compared(table.status), table.metadata.uid
        written = False
        if wanted != self._stored:
            raw = await patch_status(self.client, PROCESS_TABLES, None, self.table_name, status) or raw
            self.writes += 1
            self._stored = wanted
            written = True
        return await self.arbitrate(self.bidders(), raw, now) or written

    def bidders(self) -> list[Process]:
        """``processes()``, each Process released by :meth:`release` counted in the phase it left for while
        the cache still shows it eligible (for at most :data:`LEAVING_SECONDS`): a pass between the release
        and the cache showing the phase write must not hand the claim back to it. The executor writes the
        Process's annotations (a signal taken, ``released-from``) between the release and the phase write,
        so a newer resourceVersion still in Running or Attested is not yet the phase write."""
        now, out = self.clock.now(), []
        for process in self.processes():
            ref = process_ref(process)
            leaving = self._leaving.get(ref)
            if leaving is not None:
                phase, since = leaving
                if process.phase in ELIGIBLE_PHASES and now - since <= LEAVING_SECONDS:
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
            # counted as leaving until the cache shows it out of Running/Attested (its phase write)
            self._leaving[ref] = (phase, self.clock.now())
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
                raised: the table's key is queued again and False returned — ``strict`` returns False
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
            self.notify()
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
