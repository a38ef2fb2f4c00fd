"""Read-your-own-writes for a controller whose informer cache lags its writes.

After a controller writes an object, its informer shows the write only once the watch delivers it.
A reconcile that starts in between (woken by a child's event, say) decides on the object as it was
before the write and does the same work again: a second phase write, a second Event, a second apply.
:class:`WriteExpectations` remembers the ``metadata.resourceVersion`` each write returned; until the
cache holds that version (or :data:`EXPECTATION_SECONDS` pass), :meth:`WriteExpectations.lagging`
says so and the controller waits a moment instead of deciding (docs/runtime.md#own-writes).

resourceVersions are compared as integers, as client-go's ``MutationCache`` does for etcd-backed
servers; one that is not an integer never counts as lagging (the API leaves them opaque).

:class:`ChildWriteExpectations` does the same for the objects a controller writes *besides* its primary
(the children it applies), where the cached child alone cannot tell: a child we just created is simply
missing from the cache, as it is after a hand delete. It compares instead how far the child's informer
has come: once the informer has delivered an event at or past the resourceVersion our write returned,
the cache shows that write and everything before it (a delete after it included).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final, Generic, TypeVar

__all__ = ["EXPECTATION_SECONDS", "LAG_REQUEUE_SECONDS", "ChildWriteExpectations", "WriteExpectations"]

EXPECTATION_SECONDS: Final = 5.0
"""How long a write is waited for before the cache is trusted anyway (a lost watch event, a relist)."""

LAG_REQUEUE_SECONDS: Final = 0.05
"""When a reconcile finds the cache behind our own write, how soon it tries again."""


def _version(resource_version: str | None) -> int | None:
    try:
        return int(resource_version) if resource_version else None
    except ValueError:
        return None


class WriteExpectations:
    """Per object key, the resourceVersion of our last write until the cache shows it.

    Args:
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._written: dict[str, tuple[int, float]] = {}

    def wrote(self, key: str, resource_version: str | None) -> None:
        """Our write of ``key`` returned ``resource_version`` (ignored when not an integer)."""
        version = _version(resource_version)
        if version is not None:
            self._written[key] = (version, self._clock())

    def lagging(self, key: str, cached_resource_version: str | None) -> bool:
        """Whether the cached object of ``key`` is older than our last write of it (within the window);
        the expectation is dropped once met or expired."""
        entry = self._written.get(key)
        if entry is None:
            return False
        version, since = entry
        cached = _version(cached_resource_version)
        if cached is None or cached >= version or self._clock() - since > EXPECTATION_SECONDS:
            del self._written[key]
            return False
        return True

    def forget(self, key: str) -> None:
        """Drop what is remembered for ``key`` (the object is gone)."""
        self._written.pop(key, None)

    def __len__(self) -> int:
        return len(self._written)


R = TypeVar("R")
"""A watched resource (hashable; e.g. :class:`shared.kube.client.Resource`)."""

class ChildWriteExpectations(Generic[R]):
    """Per owner key, per child resource, the newest resourceVersion our writes of its children returned,
    until that resource's informer has come as far (docs/runtime.md#own-writes).

    Args:
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._written: dict[str, dict[R, tuple[int, float]]] = {}

    def wrote(self, owner: str, resource: R, resource_version: str | None) -> None:
        """Our write of a child of ``owner`` (a ``resource`` object) returned ``resource_version`` (ignored
        when not an integer)."""
        version = _version(resource_version)
        if version is None:
            return
        now = self._clock()
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
        now = self._clock()
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
