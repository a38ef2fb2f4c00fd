"""The one get-or-create of the ProcessTable, which keeps it from handing PIDs out twice
(docs/behaviour.md#a-missing-or-deleted-table).

PID allocation (:mod:`reconciler.pid`) and the status writer (:mod:`reconciler.table_writer`) read the
table through one :class:`TableKeeper` per replica:

- a missing table is recreated with ``nextSequence`` past every sequence number a Process holds
  (a cluster-wide LIST: its own PID, its parent's, and every level above them) and past every number
  this reconciler handed out, with a Warning Event ``ProcessTableRecreated`` when any is held and the
  table had existed (:func:`table_existed`: not on a fresh install);
- the table carries our finalizer (:data:`shared.domain.finalizers.TABLE`), put on at creation or by
  the status writer's :func:`~shared.kube.finalizer.finalize`; a deleted table keeps it while
  :meth:`TableKeeper.in_use` (Warning Event ``ProcessTableInUse``), that is until no Process holds a
  PID, and then loses it with a resourceVersion-guarded write, so an allocation that bumped meanwhile
  makes the removal 409 and wait for the next pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

import msgspec

from reconciler.reasons import Reason
from shared.domain import finalizers
from shared.domain.api.codec import decode_table, wire_decoder
from shared.domain.api.process import Process
from shared.domain.api.table import PROCESS_TABLE_NAME, ProcessTable, ProcessTableSpec
from shared.domain.identity import pid_segments
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.api import KubeApi
from shared.kube.errors import Conflict, NotFound
from shared.kube.events import EventRecorder, EventType
from shared.kube.meta import ObjectMeta, as_json
from shared.kube.pager import list_all

log = logging.getLogger(__name__)

__all__ = [
    "JSON_PATCH",
    "TableKeeper",
    "default_table",
    "held_sequence",
    "holds_pid",
    "listed_process",
    "sequences_of",
    "table_existed",
]

JSON_PATCH: Final = "application/json-patch+json"
"""Content type of the guarded claims write (:mod:`reconciler.table_writer`) and of the PID bump
(:mod:`reconciler.pid`)."""


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


def holds_pid(process: Process) -> bool:
    """Whether ``process`` holds a PID (``status.pid`` set): the table must then outlive a deletion."""
    return process.status is not None and bool(process.status.pid)


def table_existed(processes: Iterable[Process], *, seen: bool) -> bool:
    """Whether a table found missing had existed (so its recreation is worth a Warning,
    docs/behaviour.md#a-missing-or-deleted-table): this keeper read, created or bumped one before
    (``seen``), or a Process holds a PID (only a table hands them out). A PID merely named — a child's
    ``spec.identity.parent`` before any parent holds it, as on a fresh install — proves nothing."""
    return seen or any(holds_pid(p) for p in processes)


class TableKeeper:
    """Reads table ``name`` for one reconciler, recreating it past every held PID when it is missing,
    and says whether a deleted one is still :meth:`in_use` (see the module docstring).

    Args:
        client: the API client (GET and create on processtables; LIST on processes).
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
                await self.recorder.record(PROCESS_TABLES, table, EventType.WARNING, Reason.PROCESS_TABLE_RECREATED,
                                           message)
        return table, raw

    async def in_use(self, table: ProcessTable, cached: Iterable[Process] = ()) -> bool:
        """Whether any Process holds a PID (``cached`` first, then a LIST to be sure), so that a deleted
        ``table`` must keep our finalizer; when one does, says so with a Warning Event
        ``ProcessTableInUse`` on ``table``.

        Raises:
            ApiError: the LIST failed.
        """
        holders = sum(1 for p in cached if holds_pid(p))
        if not holders:
            holders = sum(1 for p in await self.processes() if holds_pid(p))
        if not holders:
            return False
        message = (f"ProcessTable {self.name} is being deleted; it stays until no Process holds a PID "
                   f"({holders} do), so no PID is handed out twice")
        log.info("%s", message)
        if self.recorder is not None:
            await self.recorder.record(PROCESS_TABLES, table, EventType.WARNING, Reason.PROCESS_TABLE_IN_USE, message)
        return True
