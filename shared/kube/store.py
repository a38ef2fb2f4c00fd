"""The cache an informer fills: objects by key, indices over them, and the handlers told of each change.

kube-rs splits an informer into a *watcher* (the LIST/WATCH stream), a *reflector* (applies the stream to a
store) and the *Store* (reads). This module is the Store and its writer; :class:`shared.kube.informer.Informer`
is the watcher and reflector on top (docs/runtime.md#informer). A Store works alone, so a test seeds one with
:meth:`Store.apply` or :meth:`Store.replace` exactly as the informer would fill it, handlers and indices
included.

- keys are ``<namespace>/<name>``, or ``<name>`` for cluster-scoped objects (:func:`object_key`);
- an index is a name and a function from an object to the values it is filed under (client-go's Indexers);
- handlers get ``(event type, old, new)`` for every change, in the order the store applies them; a failing
  handler is logged and does not stop the others or the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Generic, TypeVar

from shared.kube.meta import KubeObject

log = logging.getLogger(__name__)

T = TypeVar("T", bound=KubeObject)


class WatchEventType(Enum):
    """What happened to a cached object."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


Handler = Callable[[WatchEventType, T | None, T], None]
"""``handler(event type, old, new)``: ``old`` is the cached object before the change (None on an add);
``new`` is the object as it arrived (the last state, for a delete)."""


def object_key(obj: KubeObject) -> str:
    """The cache key: ``<namespace>/<name>``, or ``<name>`` for cluster-scoped objects."""
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else str(meta.name)


class Store(Generic[T]):
    """Objects of one resource by key, with indices; every change is told to the handlers.

    Args:
        name: what the store holds, for log lines (e.g. the resource's plural).
    """

    def __init__(self, name: str = "store") -> None:
        self.name = name
        self._objects: dict[str, T] = {}
        self._indexers: dict[str, Callable[[T], Iterable[str]]] = {}
        self._indices: dict[str, dict[str, set[str]]] = {}
        self._handlers: list[Handler[T]] = []

    # -- reading --------------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        """The object stored under ``<namespace>/<name>`` (or ``<name>``), or None."""
        return self._objects.get(key)

    def objects(self) -> list[T]:
        """Every stored object (a snapshot list)."""
        return list(self._objects.values())

    def keys(self) -> list[str]:
        return list(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __len__(self) -> int:
        return len(self._objects)

    def by_index(self, name: str, value: str) -> list[T]:
        """Stored objects that index ``name`` files under ``value``, by key.

        Raises:
            KeyError: no indexer called ``name``.
        """
        return [self._objects[k] for k in sorted(self._indices[name].get(value, ()))]

    def index_values(self, name: str) -> list[str]:
        """Every value index ``name`` files at least one stored object under, unordered.

        Raises:
            KeyError: no indexer called ``name``.
        """
        return list(self._indices[name])

    # -- wiring ---------------------------------------------------------------------------

    def add_indexer(self, name: str, index: Callable[[T], Iterable[str]]) -> None:
        """Register an index ``name``; ``index(obj)`` returns the values ``obj`` is filed under. Objects
        already stored are indexed at once.

        Raises:
            ValueError: an indexer of that name exists already.
        """
        if name in self._indexers:
            raise ValueError(f"indexer {name!r} already registered")
        self._indexers[name] = index
        self._indices[name] = {}
        for key, obj in self._objects.items():
            self._index(name, key, obj)

    def add_handler(self, handler: Handler[T]) -> None:
        """Call ``handler(type, old, new)`` on every change from now on (those :meth:`replace` synthesizes too)."""
        self._handlers.append(handler)

    # -- writing (the reflector's side) -----------------------------------------------------

    def apply(self, kind: WatchEventType, obj: T) -> None:
        """Store (ADDED / MODIFIED) or drop (DELETED) ``obj`` under its key, re-index it, tell the handlers."""
        key = object_key(obj)
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        if kind is WatchEventType.DELETED:
            self._objects.pop(key, None)
        else:
            self._objects[key] = obj
            for name in self._indexers:
                self._index(name, key, obj)
        for handler in self._handlers:
            try:
                handler(kind, old, obj)
            except Exception:
                log.exception("%s: event handler failed for %s", self.name, key)

    def upsert(self, obj: T) -> None:
        """:meth:`apply` as MODIFIED when the key is stored, else as ADDED (how a watch event is applied)."""
        self.apply(WatchEventType.MODIFIED if object_key(obj) in self._objects else WatchEventType.ADDED, obj)

    def replace(self, fresh: Iterable[T]) -> int:
        """Make the store hold exactly ``fresh`` (a full LIST): deletes are synthesized for vanished keys,
        adds for new ones, and updates for objects whose resourceVersion changed.

        Returns:
            The number of deletes synthesized.
        """
        listed: Mapping[str, T] = {object_key(obj): obj for obj in fresh}
        vanished = [obj for key, obj in self._objects.items() if key not in listed]
        for obj in vanished:
            self.apply(WatchEventType.DELETED, obj)
        for key, obj in listed.items():
            previous = self._objects.get(key)
            if previous is None:
                self.apply(WatchEventType.ADDED, obj)
            elif previous.metadata.resource_version != obj.metadata.resource_version:
                self.apply(WatchEventType.MODIFIED, obj)
        return len(vanished)

    def _index(self, name: str, key: str, obj: T) -> None:
        for value in self._indexers[name](obj):
            self._indices[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: T) -> None:
        for name, index in self._indexers.items():
            for value in index(obj):
                keys = self._indices[name].get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._indices[name][value]
