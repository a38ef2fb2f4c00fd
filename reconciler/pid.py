"""Race-free PID allocation from the ``ProcessTable`` singleton ``proc``.

Behaviour: process-reconciler §2.3.2 step 2, §5.2, §5.3; process-crd §8.4, §12.1;
DESIGN §2.5 and §2.8.

The reference reads ``spec.nextSequence`` and writes ``seq+1`` with an unguarded merge
patch, so two Processes forking at once can get the same PID (§5.2 "Observed race"). Here
the bump carries the table's ``metadata.resourceVersion``: the API server answers 409 when
anybody bumped in between, and we re-read and retry after a short jittered wait. Exactly one
writer wins each sequence number, so PIDs are unique.

``maxDepth`` / ``maxChildren`` (ignored by the reference) are enforced before the bump, so a
refused Process consumes no sequence number. Both are 0 = unlimited (process-crd §12.1).

- *Depth* of a PID is its number of process levels: ``seph.1`` → 1, ``seph.1.7`` → 2. It is
  counted as the trailing all-digit segments (the first segment is always the root's identity
  name, which may itself contain dots), see :func:`pid_level`.
- *Children* of a parent are the Processes that already hold a PID directly under it.
  A root Process has no parent Process, so ``maxChildren`` does not limit roots.
  The children count is read before the bump and is not part of the guarded write: two
  children of one parent forking in the same instant may both pass the last free slot.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final

import anyio
import msgspec

from shared.domain.api.codec import decode, decode_table, to_wire
from shared.domain.api.process import Process
from shared.domain.api.table import PROCESS_TABLE_NAME, ProcessTable, ProcessTableSpec
from shared.domain.identity import allocate_pid as format_pid
from shared.domain.identity import derive_identity, pid_segments
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.client import KubeClient
from shared.kube.errors import Conflict, NotFound
from shared.kube.meta import ObjectMeta

log = logging.getLogger(__name__)

__all__ = [
    "MAX_SEQUENCE",
    "AllocationBackoff",
    "PidAllocationError",
    "PidRefused",
    "allocate_pid",
    "check_limits",
    "children_of",
    "default_table",
    "identity_name",
    "pid_level",
]

MAX_SEQUENCE: Final = 2**32 - 1
"""``nextSequence`` is a u32 (process-crd §12.1); the last usable sequence number."""


class PidRefused(Exception):
    """The ProcessTable's limits forbid a PID for this Process.

    ``reason`` is a sentence for ``status.message`` (e.g.
    ``PID depth 3 exceeds ProcessTable maxDepth 2 (parent seph.1.7)``); ``str(err) == reason``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PidAllocationError(Exception):
    """The sequence bump kept conflicting for every attempt of :class:`AllocationBackoff`."""


@dataclass(frozen=True)
class AllocationBackoff:
    """Waits between conflicting bumps: ``min(cap, base·factor^i)`` scaled by a random factor in
    ``[0.5, 1.0)`` (jitter spreads contenders apart), for at most ``attempts`` bumps."""

    attempts: int = 50
    base: float = 0.005
    factor: float = 1.5
    cap: float = 0.25

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed bump number ``attempt`` (0-based)."""
        return min(self.cap, self.base * self.factor**attempt) * (0.5 + 0.5 * rng())


DEFAULT_BACKOFF: Final = AllocationBackoff()


# ── pure parts ───────────────────────────────────────────────────────────────


def default_table(name: str = PROCESS_TABLE_NAME) -> ProcessTable:
    """The table the reconciler creates when missing (process-reconciler §5.3): spec defaults
    ``nextSequence 1, maxDepth 0, maxChildren 0, sigtermTimeoutSeconds 480,
    zombieTimeoutSeconds 600, orphanReapingEnabled true``, no status."""
    return ProcessTable(metadata=ObjectMeta(name=name), spec=ProcessTableSpec())


def identity_name(process: Process) -> str:
    """``status.identity.name`` when stored, else derived from the spec as Pending does
    (process-reconciler §2.3.2 step 2a, process-crd §8.2)."""
    if process.status is not None and process.status.identity is not None:
        return process.status.identity.name
    return derive_identity(process.spec).name


def pid_level(pid: str) -> int:
    """Process levels in ``pid``: the trailing all-digit segments, at most all but the first.

    ``seph.1`` → 1, ``seph.1.7.3`` → 3, ``a.b.4`` → 1 (a dotted root name), ``seph`` → 0,
    ``""`` → 0.
    """
    segments = pid_segments(pid)
    level = 0
    for segment in reversed(segments[1:]):
        if not segment.isdigit():
            break
        level += 1
    return level


def children_of(
    parent: str, processes: Iterable[Process], *, exclude: tuple[str | None, str | None] | None = None
) -> int:
    """How many ``processes`` already hold a PID and name ``parent`` in ``spec.identity.parent``.

    ``exclude`` is the ``(namespace, name)`` of the Process being forked (it is not its own
    sibling).
    """
    count = 0
    for proc in processes:
        if proc.spec.identity.parent != parent or proc.status is None or not proc.status.pid:
            continue
        if exclude is not None and (proc.metadata.namespace, proc.metadata.name) == exclude:
            continue
        count += 1
    return count


def check_limits(spec: ProcessTableSpec, parent: str | None, name: str, children: int) -> None:
    """Raise :class:`PidRefused` when a new PID under ``parent`` (None/"" = root named ``name``)
    would break ``spec.maxDepth`` or ``spec.maxChildren`` (0 = unlimited; DESIGN §2.8).

    ``children``: Processes already holding a PID under ``parent``.
    """
    level = pid_level(parent) + 1 if parent else 1
    if spec.max_depth and level > spec.max_depth:
        where = f"parent {parent}" if parent else f"root {name}"
        raise PidRefused(f"PID depth {level} exceeds ProcessTable maxDepth {spec.max_depth} ({where})")
    if parent and spec.max_children and children >= spec.max_children:
        raise PidRefused(
            f"parent {parent} already has {children} children; ProcessTable maxChildren is {spec.max_children}")


# ── the guarded bump ─────────────────────────────────────────────────────────


async def _read_or_create(client: KubeClient, name: str) -> ProcessTable:
    """GET the table; on 404 POST the default one; a concurrent create (409) → GET again."""
    try:
        return decode_table(await client.get(PROCESS_TABLES, name))
    except NotFound:
        pass
    try:
        return decode_table(await client.create(PROCESS_TABLES, to_wire(default_table(name))))
    except Conflict:
        return decode_table(await client.get(PROCESS_TABLES, name))


class _ListMeta(msgspec.Struct, frozen=True):
    continue_: str | None = msgspec.field(default=None, name="continue")


class _ProcessList(msgspec.Struct):
    metadata: _ListMeta = _ListMeta()
    items: list[Process] = []


async def _count_children(client: KubeClient, parent: str, process: Process) -> int:
    """LIST Processes cluster-wide (all pages) and count ``parent``'s children."""
    count, token = 0, None
    while True:
        raw = await client.list(PROCESSES, limit=500, continue_=token)
        page = decode(raw, _ProcessList)
        count += children_of(parent, page.items, exclude=(process.metadata.namespace, process.metadata.name))
        token = page.metadata.continue_ or None
        if token is None:
            return count


async def allocate_pid(
    client: KubeClient,
    process: Process,
    *,
    table_name: str = PROCESS_TABLE_NAME,
    children: int | Callable[[str], Awaitable[int]] | None = None,
    backoff: AllocationBackoff = DEFAULT_BACKOFF,
    rng: Callable[[], float] = random.random,
) -> str:
    """Allocate the PID of ``process`` from table ``table_name`` and return it.

    ``<spec.identity.parent>.<seq>`` for a child, ``<identity name>.<seq>`` for a root
    (process-crd §8.4). The table is created with defaults when missing (§5.3). The bump
    ``nextSequence → seq+1`` is a merge patch carrying the read ``resourceVersion``; a 409
    re-reads and retries after :class:`AllocationBackoff` (DESIGN §2.5). Writes nothing to the
    Process: the caller stores the PID in ``status.pid`` (and ``status.parent``).
    Returns ``status.pid`` unchanged, with no request, when it is already set.

    Args:
        children: how many Processes already hold a PID under the parent, or an async callable
            ``parent -> count`` (e.g. from an informer cache). None: LIST Processes when the
            table sets ``maxChildren`` and the Process has a parent.

    Raises:
        PidRefused: ``maxDepth`` / ``maxChildren`` forbid it, or the sequence is exhausted.
        PidAllocationError: every bump attempt conflicted.
        ApiError: any other API failure (typed, from :mod:`shared.kube.errors`).
    """
    if process.status is not None and process.status.pid:
        return process.status.pid
    parent = process.spec.identity.parent or None
    name = identity_name(process)
    counted: int | None = children if isinstance(children, int) else None
    for attempt in range(backoff.attempts):
        table = await _read_or_create(client, table_name)
        if parent and table.spec.max_children and counted is None:
            if callable(children):
                counted = await children(parent)
            else:
                counted = await _count_children(client, parent, process)
        check_limits(table.spec, parent, name, counted or 0)
        seq = table.spec.next_sequence
        if seq >= MAX_SEQUENCE:
            raise PidRefused(f"ProcessTable {table_name} nextSequence {seq} is exhausted")
        patch = {"metadata": {"resourceVersion": table.metadata.resource_version},
                 "spec": {"nextSequence": seq + 1}}
        try:
            await client.merge_patch(PROCESS_TABLES, table_name, patch)
        except Conflict:
            log.debug("ProcessTable %s bump %d conflicted (attempt %d)", table_name, seq, attempt + 1)
            await anyio.sleep(backoff.delay(attempt, rng))
            continue
        return format_pid(name, parent, seq)
    raise PidAllocationError(
        f"ProcessTable {table_name}: nextSequence bump conflicted {backoff.attempts} times")
