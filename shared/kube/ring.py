"""Dynamic sharding's pure part (docs/architecture.md#dynamic-sharding): which member owns a key (rendezvous
hashing, :func:`pick`), what the sharder does to one object (:func:`decide_move`), and a ring's keys
(:class:`Ring`). No I/O and nothing heavy to import, so a binary's flags can name a ring without loading the
runtime; :mod:`shared.kube.sharding` executes these answers.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = ["DRAINING", "NOTHING", "Move", "MoveKind", "Ring", "decide_move", "pick", "score"]

DRAINING: Final = "true"
"""The value of the drain label while a move waits for the current member's hand-over."""


def score(member: str, key: str) -> int:
    """Rendezvous weight of ``member`` for hash key ``key``: the first 8 bytes of BLAKE2b-64 over
    ``<member> NUL <key>`` (UTF-8), read big-endian, an integer in [0, 2**64)."""
    digest = hashlib.blake2b(f"{member}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def pick(key: str, members: Collection[str]) -> str | None:
    """The member that owns ``key``: the one of highest :func:`score` (ties, which need a 64-bit collision, go
    to the smaller name); None when there are no members."""
    best: tuple[int, str] | None = None
    for member in members:
        candidate = (score(member, key), member)
        if best is None or candidate[0] > best[0] or (candidate[0] == best[0] and member < best[1]):
            best = candidate
    return best[1] if best is not None else None


class MoveKind(enum.Enum):
    """What the sharder does to one object."""

    NONE = "none"
    """Nothing: it is where it belongs, or its hand-over is awaited, or no member is alive."""
    ASSIGN = "assign"
    """Label it for its member: it has none, or its member is gone."""
    DRAIN = "drain"
    """Ask its (alive) member to hand it over: another member owns it now."""
    CANCEL_DRAIN = "cancel-drain"
    """Its member owns it again (the ring changed back before the hand-over): take the drain request back."""


@dataclass(frozen=True)
class Move:
    """One sharder decision: ``labels`` to set (a ``str``) or remove (None), and ``reason``, the metric label:
    ``new`` (first assignment), ``orphaned`` (its member is gone), ``rebalance`` (a drain asked),
    ``cancelled`` (a drain taken back)."""

    kind: MoveKind
    labels: Mapping[str, str | None] = field(default_factory=dict)
    reason: str = ""


NOTHING: Final = Move(MoveKind.NONE)


def decide_move(labels: Mapping[str, str], *, shard_label: str, drain_label: str, desired: str | None,
                alive: Collection[str]) -> Move:
    """The sharder's decision for one object with ``labels``, whose hash picks ``desired`` among ``alive``.

    ==========================  =============  ==========  =====================================
    current member              drain label    desired     move
    ==========================  =============  ==========  =====================================
    any                         any            None        NONE (no member alive: wait)
    none, or not alive          any            d           ASSIGN: shard=d, no drain label
    = desired                   absent         d           NONE
    = desired                   present        d           CANCEL_DRAIN: remove the drain label
    alive, ≠ desired            absent         d           DRAIN: drain label set
    alive, ≠ desired            present        d           NONE (its member hands it over)
    ==========================  =============  ==========  =====================================
    """
    if desired is None:
        return NOTHING
    current = labels.get(shard_label) or None
    draining = drain_label in labels
    if current is None or current not in alive:
        return Move(MoveKind.ASSIGN, {shard_label: desired, drain_label: None} if draining else {shard_label: desired},
                    "new" if current is None else "orphaned")
    if current == desired:
        return Move(MoveKind.CANCEL_DRAIN, {drain_label: None}, "cancelled") if draining else NOTHING
    return NOTHING if draining else Move(MoveKind.DRAIN, {drain_label: DRAINING}, "rebalance")


@dataclass(frozen=True)
class Ring:
    """One ring's keys: ``name`` (the Lease label's value), ``lease_label`` (the label key every member Lease
    carries with value ``name``), ``shard_label`` and ``drain_label`` (the object label keys)."""

    name: str
    lease_label: str
    shard_label: str
    drain_label: str

    @property
    def lease_selector(self) -> str:
        """The label selector of the ring's member Leases."""
        return f"{self.lease_label}={self.name}"

    def member_selector(self, member: str) -> str:
        """The label selector of the objects assigned to ``member``."""
        return f"{self.shard_label}={member}"
