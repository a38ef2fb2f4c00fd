"""Expectations: what a controller wrote that its informer caches show only later.

After a controller writes an object, its informer shows the write only once the watch delivers it.
A reconcile that starts in between (woken by a child's event, say) decides on the world as it was
before the write and does the same work again: a second phase write, a second Event, a second apply.
An expectation bridges that lag, as Kubernetes' ReplicaSet controller's ``ControllerExpectations``
do (docs/runtime.md#own-writes):

- :class:`Expectations` is the one type: per key, a value remembered when the write was made, until
  the caller sees the cache show it (:meth:`Expectations.met`) or ``window`` seconds pass on the
  injected monotonic :class:`~shared.kube.workqueue.Clock` (a lost watch event or a relist must not
  hold a reconcile back for ever). What "the cache shows it" means is the caller's: a Job now cached,
  a Process cached past Pending;
- :class:`WriteExpectations` is one use of it: the ``metadata.resourceVersion`` each status write
  returned, until the cache holds that version (:data:`EXPECTATION_SECONDS` at most);
  :meth:`WriteExpectations.lagging` then says the controller should wait a moment instead of deciding.

resourceVersions are compared as integers, as client-go's ``MutationCache`` does for etcd-backed
servers; one that is not an integer never counts as lagging (the API leaves them opaque).

:class:`ChildWriteExpectations` does the same for the objects a controller writes *besides* its primary
(the children it applies), where the cached child alone cannot tell: a child we just created is simply
missing from the cache, as it is after a hand delete. It compares instead how far the child's informer
has come: once the informer has delivered an event at or past the resourceVersion our write returned,
the cache shows that write and everything before it (a delete after it included).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Final, Generic, TypeVar

from shared.kube.workqueue import Clock, MonotonicClock

__all__ = ["EXPECTATION_SECONDS", "LAG_REQUEUE_SECONDS", "ChildWriteExpectations", "Expectations",
           "WriteExpectations"]

EXPECTATION_SECONDS: Final = 5.0
"""How long a write is waited for before the cache is trusted anyway (a lost watch event, a relist)."""

LAG_REQUEUE_SECONDS: Final = 0.05
"""When a reconcile finds the cache behind our own write, how soon it tries again."""

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Expectations(Generic[K, V]):
    """Per key ``K``, a value ``V`` expected to show in a cache, for at most ``window`` seconds.

    Args:
        window: seconds an expectation stands in for a cache that has not caught up; after that it is
            dropped and the cache believed.
        clock: monotonic time (default :class:`~shared.kube.workqueue.MonotonicClock`; tests inject a
            fake one, e.g. the work queue's).
    """

    def __init__(self, window: float, clock: Clock | None = None) -> None:
        self.window = window
        self._clock: Clock = clock or MonotonicClock()
        self._expected: dict[K, tuple[V, float]] = {}

    def expect(self, key: K, value: V) -> None:
        """Expect ``value`` for ``key`` from now on (replacing an earlier expectation of it)."""
        self._expected[key] = (value, self._clock.now())

    def met(self, key: K) -> None:
        """The cache shows what was expected for ``key`` (or the object is gone): drop it."""
        self._expected.pop(key, None)

    def get(self, key: K) -> V | None:
        """The value expected for ``key``; None when none is, or it expired (then dropped)."""
        entry = self._live(key)
        return entry[0] if entry is not None else None

    def pending(self) -> list[tuple[K, V]]:
        """Every expectation still standing (the expired ones are dropped), in the order made."""
        return [(key, entry[0]) for key in list(self._expected) if (entry := self._live(key)) is not None]

    def __contains__(self, key: object) -> bool:
        """Whether an expectation of ``key`` still stands (an expired one is dropped)."""
        return key in self._expected and self._live(key) is not None

    def __len__(self) -> int:
        return len(self._expected)

    def _live(self, key: K) -> tuple[V, float] | None:
        entry = self._expected.get(key)
        if entry is None:
            return None
        if self._clock.now() - entry[1] > self.window:
            del self._expected[key]
            return None
        return entry


def _version(resource_version: str | None) -> int | None:
    try:
        return int(resource_version) if resource_version else None
    except ValueError:
        return None


class WriteExpectations:
    """Per object key, the resourceVersion of our last write until the cache shows it
    (:class:`Expectations` with a window of :data:`EXPECTATION_SECONDS`).

    Args:
        clock: monotonic time (default :class:`~shared.kube.workqueue.MonotonicClock`).
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._written: Expectations[str, int] = Expectations(EXPECTATION_SECONDS, clock)

    def wrote(self, key: str, resource_version: str | None) -> None:
        """Our write of ``key`` returned ``resource_version`` (ignored when not an integer)."""
        version = _version(resource_version)
        if version is not None:
            self._written.expect(key, version)

    def lagging(self, key: str, cached_resource_version: str | None) -> bool:
        """Whether the cached object of ``key`` is older than our last write of it (within the window);
        the expectation is dropped once met or expired."""
        version = self._written.get(key)
        if version is None:
            return False
        cached = _version(cached_resource_version)
        if cached is None or cached >= version:
            self._written.met(key)
            return False
        return True

    def forget(self, key: str) -> None:
        """Drop what is remembered for ``key`` (the object is gone)."""
        self._written.met(key)

    def __len__(self) -> int:
        return len(self._written)


R = TypeVar("R")
"""A watched resource (hashable; e.g. :class:`shared.kube.client.Resource`)."""

class ChildWriteExpectations(Generic[R]):
    """Per owner key, per child resource, the newest resourceVersion our writes of its children returned,
    until that resource's informer has come as far (docs/runtime.md#own-writes).

    Args:
        clock: the monotonic clock (default :class:`~shared.kube.workqueue.MonotonicClock`; a test's fake).
    """

    def __init__(self, clock: Clock | None = None) -> None:
        self._clock: Clock = clock or MonotonicClock()
        self._written: dict[str, dict[R, tuple[int, float]]] = {}

    def wrote(self, owner: str, resource: R, resource_version: str | None) -> None:
        """Our write of a child of ``owner`` (a ``resource`` object) returned ``resource_version`` (ignored
        when not an integer)."""
        version = _version(resource_version)
        if version is None:
            return
        now = self._clock.now()
        for key, entries in list(self._written.items()):  # an owner gone before its caches caught up
            if all(now - since > EXPECTATION_SECONDS for _, since in entries.values()):
                del self._written[key]
        mine = self._written.setdefault(owner, {})
        before = mine.get(resource)
        mine[resource] = (max(version, before[0]) if before else version, now)

    def lagging(self, owner: str, seen: Callable[[R], str | None]) -> bool:
        """Whether a child cache has not yet come as far as our last write of one of ``owner``'s children of
        its resource (within :data:`EXPECTATION_SECONDS`); expectations met or expired are dropped.

        Args:
            seen: ``seen(resource)``, the resourceVersion ``resource``'s informer has come to (its last
                event, bookmark or LIST); None when nothing caches ``resource``. A cache at an opaque or
                unknown version is trusted.
        """
        mine = self._written.get(owner)
        if not mine:
            return False
        now = self._clock.now()
        for resource, (version, since) in list(mine.items()):
            cached = _version(seen(resource))
            if cached is None or cached >= version or now - since > EXPECTATION_SECONDS:
                del mine[resource]
        if not mine:
            del self._written[owner]
            return False
        return True

    def forget(self, owner: str) -> None:
        """Drop what is remembered for ``owner`` (it is gone)."""
        self._written.pop(owner, None)

    def __len__(self) -> int:
        return len(self._written)
