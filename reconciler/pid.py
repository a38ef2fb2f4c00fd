"""Race-free PID allocation from the ``ProcessTable`` singleton ``proc`` (docs/behaviour.md#pids).

The bump of ``spec.nextSequence`` is a JSON patch (RFC 6902) that *tests* the table's ``metadata.uid``
and the ``nextSequence`` it read before replacing it with ``seq + 1``. The API server applies a patch
to the object as stored and retries its own write when the object changed underneath, so the test is
a compare-and-swap on the counter: when anybody bumped in between, the test fails (422) and we re-read
and retry after a short jittered wait (:data:`ALLOCATION_BACKOFF`). Exactly one writer wins each
sequence number, so PIDs are unique (an unguarded bump, as the reference writes it, lets two Processes
forking at once share one: docs/divergences.md#pid-allocation). The guard is the counter itself, not
the table's ``resourceVersion``: the status writer (:mod:`reconciler.table_writer`) changes the
resourceVersion every write, and a resourceVersion-guarded bump lost to it every time it ran
between the read and the bump. A 422 that is not a lost race (the table unchanged on re-read, e.g. a
hand-made table without ``spec.nextSequence``) falls back to the resourceVersion-guarded merge patch.

The table is read through a :class:`~reconciler.table_keeper.TableKeeper`: a missing table is recreated past
every sequence number held, and the keeper remembers each number won here.

:class:`SequenceAllocator` is the reconciler's one allocator (one per replica, so one per leader): it
serialises this replica's bumps in-process, so its own workers never race each other, and it
remembers the table as its own last bump left it (the PATCH answers with the stored object), so a
bump needs no GET before it. What it remembers can only be stale by someone else's write (another
replica, a hand edit): the bump also *tests* the table's ``metadata.generation``, which moves with every
``spec`` change and no other, so a bump by someone else or new ``maxDepth`` / ``maxChildren`` fail the
test (422), and only then is the table read again (docs/behaviour.md#pid-allocation). The table status
writer (:mod:`reconciler.table_writer`) writes ``/status`` only (the generation stays), and its claims patch
tests ``status.claims``: the two never collide.

*Blocks* (``block_size`` B > 1, ``--pid-block-size``, docs/architecture.md#one-processtable-many-shards): one
guarded bump moves ``nextSequence`` from ``seq`` to ``seq + B`` (clipped at :data:`MAX_SEQUENCE`) and
reserves the block ``[seq, seq + B)`` for this allocator, which hands its numbers out one per allocation
with no request until it is used up (:func:`reserve_block`, :func:`take_from_block`). Numbers of a block
never handed out (the replica stops, the table is recreated) are a gap, never a duplicate: no other
writer can win them. A block belongs to the table's ``metadata.uid``: a table read with another uid
(recreated) drops it, and the keeper is told the block's last number at reservation, so a recreated
table starts past the whole block. With B = 1 the wire is as before: one number per bump.

``maxDepth`` / ``maxChildren`` are enforced before the bump, so a refused Process consumes no
sequence number (a number from a block is checked at hand-out, against the
table as this allocator last saw it). Both are 0 = unlimited (docs/behaviour.md#pid-limits).

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
from typing import Final

import anyio
import msgspec

from reconciler.table_keeper import JSON_PATCH, TableKeeper, listed_process
from shared.domain.api.process import Process
from shared.domain.api.table import PROCESS_TABLE_NAME, ProcessTable, ProcessTableSpec
from shared.domain.identity import allocate_pid as format_pid
from shared.domain.identity import derive_identity, pid_segments
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.api import KubeApi
from shared.kube.errors import Conflict, Invalid, NotFound
from shared.kube.meta import ObjectMeta
from shared.kube.pager import list_all
from shared.kube.ratelimit import Backoff

log = logging.getLogger(__name__)

__all__ = [
    "ALLOCATION_BACKOFF",
    "JSON_PATCH",
    "MAX_SEQUENCE",
    "Block",
    "PidAllocationError",
    "PidRefused",
    "SequenceAllocator",
    "allocate_pid",
    "bump_patch",
    "check_limits",
    "children_of",
    "identity_name",
    "pid_level",
    "reserve_block",
    "take_from_block",
]

MAX_SEQUENCE: Final = 2**32 - 1
"""``nextSequence`` is a u32; the last usable sequence number."""

ALLOCATION_BACKOFF: Final = Backoff(initial=0.0025, factor=1.5, cap=0.125, jitter=1.0, steps=50)
"""Waits between conflicting bumps, at most 50 bumps: ``min(0.125, 0.0025·1.5^i)·(1 + U[0,1))`` seconds,
i.e. 2.5–5 ms first, at most 250 ms (the jitter spreads contenders apart)."""


class PidRefused(Exception):
    """The ProcessTable's limits forbid a PID for this Process.

    ``reason`` is a sentence for ``status.message`` (e.g.
    ``PID depth 3 exceeds ProcessTable maxDepth 2 (parent seph.1.7)``); ``str(err) == reason``.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PidAllocationError(Exception):
    """The sequence bump kept conflicting for every attempt of the backoff."""


# ── pure parts ───────────────────────────────────────────────────────────────


def identity_name(process: Process) -> str:
    """``status.identity.name`` when stored, else derived from the spec as Pending does
    (docs/wire-format.md#identity-name)."""
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
    would break ``spec.maxDepth`` or ``spec.maxChildren`` (0 = unlimited).

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


_listed_process = listed_process


async def _count_children(client: KubeApi, parent: str, process: Process) -> int:
    """LIST Processes cluster-wide (every page) and count ``parent``'s children."""
    listing = await list_all(client, PROCESSES, _listed_process)
    return children_of(parent, listing.items, exclude=(process.metadata.namespace, process.metadata.name))


class _Moved(Exception):
    """The table moved on between the read and the bump (another bump, another table, new limits)."""


class Block(msgspec.Struct, frozen=True):
    """Sequence numbers ``[next, end)`` reserved by one bump of the table with ``uid``; ``next`` is the
    first one not yet handed out."""

    uid: str | None
    next: int
    end: int


def reserve_block(seq: int, size: int) -> int:
    """The ``nextSequence`` after a bump reserving ``size`` numbers from ``seq``: ``seq + size`` clipped
    at :data:`MAX_SEQUENCE` (the last usable number is ``MAX_SEQUENCE - 1``; ``seq`` below it).

    ``size`` below 1 counts as 1.
    """
    return min(seq + max(size, 1), MAX_SEQUENCE)


def take_from_block(block: Block | None, uid: str | None) -> tuple[int, Block | None] | None:
    """The next number of ``block`` and the block left after it (None when used up), or None when there
    is no usable block for the table with ``uid`` (none, used up, or reserved on another table)."""
    if block is None or block.uid != uid or block.next >= block.end:
        return None
    rest = Block(block.uid, block.next + 1, block.end)
    return block.next, (rest if rest.next < rest.end else None)


def bump_patch(table: ProcessTable, seq: int, end: int | None = None) -> list[dict[str, object]]:
    """The JSON patch that moves ``nextSequence`` from ``seq`` to ``end`` (default ``seq + 1``) only on this
    table (its
    ``uid``), only if nobody moved it since it read ``seq``, and only if nobody changed its ``spec`` at
    all since (its ``metadata.generation``, when known: the limits a Process was checked against are
    still the stored ones; ``/status`` writes leave the generation alone)."""
    meta = table.metadata
    ops: list[dict[str, object]] = []
    if meta.uid:
        ops.append({"op": "test", "path": "/metadata/uid", "value": meta.uid})
    if meta.generation is not None:
        ops.append({"op": "test", "path": "/metadata/generation", "value": meta.generation})
    return [*ops, {"op": "test", "path": "/spec/nextSequence", "value": seq},
            {"op": "replace", "path": "/spec/nextSequence", "value": seq + 1 if end is None else end}]


def _guard(table: ProcessTable) -> tuple[str | None, int | None, int]:
    return table.metadata.uid, table.metadata.generation, table.spec.next_sequence


async def _bump(client: KubeApi, keeper: TableKeeper, table: ProcessTable, seq: int, end: int) -> bytes:
    """Win ``[seq, end)`` on ``table`` and return the stored table after the bump, or raise
    :class:`_Moved` / :class:`Conflict` / :class:`NotFound`."""
    try:
        return await client.request("PATCH", PROCESS_TABLES.path(None, keeper.name),
                                    body=msgspec.json.encode(bump_patch(table, seq, end)), content_type=JSON_PATCH)
    except Invalid:
        if _guard(await keeper.read()) != _guard(table):
            raise _Moved from None
    # not a lost race: the resourceVersion-guarded merge patch (a table without spec.nextSequence)
    patch = {"metadata": {"resourceVersion": table.metadata.resource_version}, "spec": {"nextSequence": end}}
    return await client.merge_patch(PROCESS_TABLES, keeper.name, patch)


Children = int | Callable[[str], Awaitable[int]] | None


class SequenceAllocator:
    """Allocates PIDs from table ``keeper.name`` for one reconciler replica (see the module docstring).

    Args:
        client: the API client.
        keeper: reads (and recreates) the table and remembers the numbers won.
        children: how many Processes already hold a PID under a parent (``parent -> count``, e.g. from
            the informer cache); None: LIST Processes when the table sets ``maxChildren``.
        backoff: waits between lost bumps; ``backoff.steps`` bounds the bumps of one allocation.
        rng: uniform [0, 1) numbers for the jitter.
        block_size: sequence numbers reserved per bump (1: one bump per PID; see the module docstring).
        on_lost: called once per lost bump (the ``tatara_pid_bump_races_total`` counter).
    """

    def __init__(self, client: KubeApi, keeper: TableKeeper, *, children: Children = None,
                 backoff: Backoff = ALLOCATION_BACKOFF, rng: Callable[[], float] = random.random,
                 block_size: int = 1, on_lost: Callable[[], None] | None = None) -> None:
        self.client = client
        self.keeper = keeper
        self.children = children
        self.backoff = backoff
        self.rng = rng
        self.reads = 0
        """Table reads (GET, or create when missing) this allocator made."""
        self.lost = 0
        """Bumps lost to another writer of ``spec`` (or to a table recreated meanwhile)."""
        self.block_size = max(block_size, 1)
        self.on_lost = on_lost
        self.bumps = 0
        """Bumps won (each reserved one block)."""
        self._lock = anyio.Lock()
        self._known: ProcessTable | None = None
        self._block: Block | None = None

    async def __call__(self, process: Process) -> str:
        """:meth:`allocate` (the allocator is the controller's ``allocate_pid``)."""
        return await self.allocate(process)

    async def allocate(self, process: Process, *, children: Children = None) -> str:
        """Allocate the PID of ``process`` and return it: ``<spec.identity.parent>.<seq>`` for a child,
        ``<identity name>.<seq>`` for a root (docs/wire-format.md#pid-format). Returns ``status.pid``
        unchanged, with no request, when it is already set. One allocation at a time per allocator.
        Writes nothing to the Process: the caller stores the PID in ``status.pid`` (and ``status.parent``).

        Args:
            children: overrides the allocator's ``children`` for this Process.

        Raises:
            PidRefused: ``maxDepth`` / ``maxChildren`` forbid it, or the sequence is exhausted.
            PidAllocationError: every bump was lost.
            ApiError: any other API failure (typed, from :mod:`shared.kube.errors`); the table is read
                again by the next allocation.
        """
        if process.status is not None and process.status.pid:
            return process.status.pid
        async with self._lock:
            try:
                return await self._allocate(process, children if children is not None else self.children)
            except PidRefused:
                raise  # nothing was written: what we remember still holds
            except BaseException:
                self._known = None  # whatever happened, do not trust what we remember
                raise

    async def _read(self) -> ProcessTable:
        if self._known is None:
            self.reads += 1
            self._known = await self.keeper.read()
        return self._known

    async def _allocate(self, process: Process, children: Children) -> str:
        parent = process.spec.identity.parent or None
        name = identity_name(process)
        counted: int | None = children if isinstance(children, int) else None
        waits = self.backoff.delays(self.rng)
        attempts = 0
        while True:
            attempts += 1
            table = await self._read()
            if parent and table.spec.max_children and counted is None:
                if callable(children):
                    counted = await children(parent)
                else:
                    counted = await _count_children(self.client, parent, process)
            check_limits(table.spec, parent, name, counted or 0)
            taken = take_from_block(self._block, table.metadata.uid)
            if taken is not None:
                seq, self._block = taken
                return format_pid(name, parent, seq)
            self._block = None  # used up, or reserved on a table since recreated
            seq = table.spec.next_sequence
            if seq >= MAX_SEQUENCE:
                raise PidRefused(f"ProcessTable {self.keeper.name} nextSequence {seq} is exhausted")
            end = reserve_block(seq, self.block_size)
            try:
                stored = await _bump(self.client, self.keeper, table, seq, end)
            except (_Moved, Conflict, NotFound):
                self.lost += 1
                if self.on_lost is not None:
                    self.on_lost()
                self._known = None
                log.debug("ProcessTable %s bump %d lost (attempt %d)", self.keeper.name, seq, attempts)
                wait = next(waits, None)
                if wait is None:
                    raise PidAllocationError(
                        f"ProcessTable {self.keeper.name}: nextSequence bump lost {attempts} times") from None
                await anyio.sleep(wait)
                continue
            self.bumps += 1
            self._known = _after_bump(stored, table, end)
            self.keeper.handed_out(end - 1)  # a recreated table starts past the whole block
            if end - seq > 1:
                self._block = Block(table.metadata.uid, seq + 1, end)
            return format_pid(name, parent, seq)


class _TableHead(msgspec.Struct):
    """What a bump's answer is read for: the table's metadata and spec (its status, up to hundreds of
    rows, is skipped unread)."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ProcessTableSpec = msgspec.field(default_factory=ProcessTableSpec)


_TABLE_HEAD = msgspec.json.Decoder(_TableHead)


def _after_bump(stored: bytes, table: ProcessTable, end: int) -> ProcessTable | None:
    """The table as the bump's answer shows it (metadata and spec; no status: only the bump reads it);
    None (read it again next time) when the answer is not ``table`` (same uid) at ``end``."""
    try:
        head = _TABLE_HEAD.decode(stored)
    except (msgspec.DecodeError, RecursionError):
        return None
    if head.metadata.uid != table.metadata.uid or head.spec.next_sequence != end:
        return None
    return ProcessTable(metadata=head.metadata, spec=head.spec)


async def allocate_pid(
    client: KubeApi,
    process: Process,
    *,
    table_name: str = PROCESS_TABLE_NAME,
    children: Children = None,
    backoff: Backoff = ALLOCATION_BACKOFF,
    rng: Callable[[], float] = random.random,
    keeper: TableKeeper | None = None,
) -> str:
    """Allocate the PID of ``process`` from table ``table_name`` with a one-off :class:`SequenceAllocator`
    (so the table is read first: nothing is remembered between calls).

    ``<spec.identity.parent>.<seq>`` for a child, ``<identity name>.<seq>`` for a root
    (docs/wire-format.md#pid-format). The table is recreated past every held PID when missing
    (``keeper``). The bump ``nextSequence → seq+1`` is the compare-and-swap JSON patch
    (:func:`bump_patch`); a lost race (or a table gone meanwhile) re-reads and retries after
    ``backoff``'s next wait. Returns ``status.pid`` unchanged, with no request, when it is already set.

    Args:
        children: how many Processes already hold a PID under the parent, or an async callable
            ``parent -> count`` (e.g. from an informer cache). None: LIST Processes when the
            table sets ``maxChildren`` and the Process has a parent.
        backoff: waits between conflicting bumps; ``backoff.steps`` bounds the bumps.
        rng: uniform [0, 1) numbers for the jitter.
        keeper: reads (and recreates) the table and remembers the numbers won; default: one of its
            own for ``table_name``, without Events.

    Raises:
        PidRefused: ``maxDepth`` / ``maxChildren`` forbid it, or the sequence is exhausted.
        PidAllocationError: every bump conflicted.
        ApiError: any other API failure (typed, from :mod:`shared.kube.errors`).
    """
    allocator = SequenceAllocator(client, keeper or TableKeeper(client, table_name), children=children,
                                  backoff=backoff, rng=rng)
    return await allocator.allocate(process)
