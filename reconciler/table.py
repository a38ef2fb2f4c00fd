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

:func:`read_table` is the one get-or-create of the table (PID allocation reads it too).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Final

import anyio
import msgspec

from shared.domain.api.codec import decode_table, to_wire
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.table import PROCESS_TABLE_NAME, ProcessEntry, ProcessTable, ProcessTableSpec, ProcessTableStatus
from shared.domain.api.wire import MergePatch
from shared.domain.resources import PROCESS_TABLES
from shared.kube.client import KubeClient
from shared.kube.errors import ApiError
from shared.kube.meta import ObjectMeta
from shared.kube.patch import get_or_create, patch_status

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_MAX_ROWS",
    "DEFAULT_MAX_ROWS_BYTES",
    "TableStatusPatch",
    "TableStatusWriter",
    "default_table",
    "is_ready",
    "pid_sort_key",
    "process_entry",
    "read_table",
    "table_status",
]

DEFAULT_MAX_ROWS: Final = 500
"""Row cap of ``status.processes``."""

DEFAULT_MAX_ROWS_BYTES: Final = 256 * 1024
"""Byte budget of the rows' JSON (etcd's object limit is 1.5 MiB)."""

DEFAULT_INTERVAL: Final = 2.0
"""Seconds between two table status writes, at most one write per interval."""


class TableStatusPatch(MergePatch, frozen=True):
    """The merge patch of ``ProcessTable.status`` the writer sends: counts, rows and the write time.
    ``claims`` is not named, so a merge patch keeps it."""

    process_count: int
    ready_count: int
    processes: list[ProcessEntry]
    last_reconciled: datetime

    @property
    def compared(self) -> tuple[int, int, list[ProcessEntry]]:
        """What decides whether a write is needed: counts and rows, not ``lastReconciled``."""
        return self.process_count, self.ready_count, self.processes


def _stored(status: ProcessTableStatus | None) -> tuple[int, int, list[ProcessEntry]]:
    if status is None:
        return 0, 0, []
    return status.process_count, status.ready_count, status.processes


# ── the table object ─────────────────────────────────────────────────────────


def default_table(name: str = PROCESS_TABLE_NAME) -> ProcessTable:
    """The table the reconciler creates when missing: spec defaults ``nextSequence 1, maxDepth 0,
    maxChildren 0, sigtermTimeoutSeconds 480, zombieTimeoutSeconds 600, orphanReapingEnabled true``,
    no status (docs/wire-format.md#processtable)."""
    return ProcessTable(metadata=ObjectMeta(name=name), spec=ProcessTableSpec())


async def read_table(client: KubeClient, name: str = PROCESS_TABLE_NAME) -> ProcessTable:
    """The table ``name`` as stored, created as :func:`default_table` when missing (a concurrent
    creator's copy wins).

    Raises:
        ApiError: the GET or create failed.
    """
    return decode_table(await get_or_create(client, PROCESS_TABLES, name, default_table(name)))


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


def _utcnow() -> datetime:
    return datetime.now(UTC)


class TableStatusWriter:
    """Keeps table ``table_name``'s status equal to :func:`table_status` of ``processes()``.

    Call :meth:`notify` on every Process event (informer handler); :meth:`run` writes at most
    once per ``interval`` seconds, only when counts or rows changed. The table is created with
    defaults when missing (:func:`read_table`).

    Args:
        client: the API client.
        processes: returns the current Processes (e.g. ``informer.objects``).
        now: injectable clock for ``lastReconciled``.
    """

    def __init__(
        self,
        client: KubeClient,
        processes: Callable[[], Iterable[Process]],
        *,
        table_name: str = PROCESS_TABLE_NAME,
        interval: float = DEFAULT_INTERVAL,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_bytes: int = DEFAULT_MAX_ROWS_BYTES,
        now: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.client = client
        self.processes = processes
        self.table_name = table_name
        self.interval = interval
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.now = now
        self.writes = 0
        """Status writes sent so far."""
        self._dirty = anyio.Event()
        self._stored: tuple[int, int, list[ProcessEntry]] | None = None

    def notify(self, *_: object) -> None:
        """Mark the table out of date (usable directly as an informer handler)."""
        self._dirty.set()

    async def flush(self) -> bool:
        """Compute the status now and write it if it differs from the stored one; True if written.

        Raises:
            ApiError: the GET, create or PATCH failed.
        """
        status = table_status(self.processes(), self.now(), max_rows=self.max_rows, max_bytes=self.max_bytes)
        wanted = status.compared
        if self._stored is None:
            self._stored = _stored((await read_table(self.client, self.table_name)).status)
        if wanted == self._stored:
            return False
        await patch_status(self.client, PROCESS_TABLES, None, self.table_name, status)
        self.writes += 1
        self._stored = wanted
        return True

    async def run(self) -> None:
        """Write whenever notified, at most once per ``interval``; runs until cancelled.

        A failed write is logged and retried after the interval (the stored copy is re-read).
        """
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
