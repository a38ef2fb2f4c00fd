"""Read-your-own-writes for a controller whose informer cache lags its writes.

After a controller writes an object, its informer shows the write only once the watch delivers it.
A reconcile that starts in between (woken by a child's event, say) decides on the object as it was
before the write and does the same work again: a second phase write, a second Event, a second apply.
:class:`WriteExpectations` remembers the ``metadata.resourceVersion`` each write returned; until the
cache holds that version (or :data:`EXPECTATION_SECONDS` pass), :meth:`WriteExpectations.lagging`
says so and the controller waits a moment instead of deciding (docs/runtime.md#own-writes).

resourceVersions are compared as integers, as client-go's ``MutationCache`` does for etcd-backed
servers; one that is not an integer never counts as lagging (the API leaves them opaque).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

__all__ = ["EXPECTATION_SECONDS", "LAG_REQUEUE_SECONDS", "WriteExpectations"]

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
