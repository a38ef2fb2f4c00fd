"""An informer: a LIST+WATCH loop that keeps a local cache of one resource and reports changes.

Behaviour (docs/runtime.md#informer, after client-go's reflector):

- the initial state from a **watch-list** (streaming list, KEP-3157; client-go's reflector with the
  ``WatchListClient`` gate, on by default since 1.35): one WATCH with ``sendInitialEvents=true``,
  ``resourceVersionMatch=NotOlderThan``, ``allowWatchBookmarks=true`` and the resourceVersion to sync from
  (``""``: a consistent read), whose ADDED events are the state, ended by a BOOKMARK annotated
  ``k8s.io/initial-events-end: "true"``; the cache is replaced at that bookmark, at once, as a LIST would
  replace it, and the same stream goes on as the watch. The API server never holds the whole collection
  in memory for one response;
- the paginated LIST (``limit`` :data:`~shared.kube.pager.DEFAULT_PAGE_SIZE`) instead, as client-go falls
  back: when the server refuses the watch-list (400/422: an API server without the feature; then for
  good), or when its stream ends before the initial-events-end bookmark (then for this sync only); or
  always with ``watch_list=False``;
- WATCH from the list's (or the bookmark's) resourceVersion with ``allowWatchBookmarks=true`` and a server
  ``timeoutSeconds`` randomized in [min, 2·min) (client-go: 5–10 min);
- resume from the last seen resourceVersion (event or bookmark) when a watch ends;
- a client-side read deadline of the watch's own ``timeoutSeconds`` + :data:`WATCH_DEADLINE_GRACE`:
  the server ends every watch at ``timeoutSeconds``, so a watch that stays silent past that (not even
  the closing of the stream) is stalled → dropped and restarted. An idle resource, on which the API
  server may send no bookmark at all, is not a stall (docs/runtime.md#bug-stalled-watch);
- 410 Gone / expired resourceVersion → resync (watch-list or LIST) from ``""``; the new state is diffed
  against the cache and deletes that happened meanwhile are synthesized, so handlers never miss one;
- errors → exponential backoff with jitter (0.8 s → 30 s, ×2; client-go's reflector),
  reset after a healthy watch; a 401 re-reads credentials (the client does it);
- ``managedFields`` never reach the cache: objects are decoded into Structs that do not
  declare it; the ``transform`` (client-go's ``SetTransform``; default :func:`strip_last_applied`) then
  drops what a Struct does declare but the controllers never read: kubectl's last-applied annotation, a
  copy of the whole object;
- the cache is a :class:`~shared.kube.store.Store` (:attr:`Informer.store`, with its indices and
  handlers); the informer is the watcher and reflector that fill it, as kube-rs splits them. Its read
  methods (``get``, ``objects``, ``by_index``...) are the store's; :attr:`has_synced` is its own.

The informer works without a controller: handlers are plain callables.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

import anyio
import msgspec

from shared.kube.api import KubeApi
from shared.kube.client import Resource, WatchBroken, WatchEvent, WatchStalled
from shared.kube.errors import ApiError, BadRequest, Gone, Invalid, NotFound, status_error
from shared.kube.meta import KubeObject
from shared.kube.pager import DEFAULT_PAGE_SIZE, list_all
from shared.kube.ratelimit import Backoff
from shared.kube.store import Handler, Store, WatchEventType, object_key

__all__ = [
    "BACKOFF_RESET_AFTER",
    "LAST_APPLIED",
    "MIN_WATCH_TIMEOUT",
    "WATCH_BACKOFF",
    "WATCH_DEADLINE_GRACE",
    "Informer",
    "InformerStats",
    "WatchEventType",
    "object_key",
    "strip_last_applied",
]

log = logging.getLogger(__name__)

MIN_WATCH_TIMEOUT = 300
"""Seconds; the server watch timeout is drawn from [MIN, 2·MIN) (client-go reflector)."""

WATCH_DEADLINE_GRACE = 30.0
"""Seconds past the watch's server ``timeoutSeconds`` before a silent watch counts as stalled: the
server closes every watch at its timeout, so only a dead stream stays silent that long. (A fixed
deadline below the timeout would fire on an idle resource: the API server does not send a bookmark on
a resource that has no objects.)"""


T = TypeVar("T", bound=KubeObject)

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""The annotation ``kubectl apply`` keeps the applied object in (a JSON copy of it)."""


def strip_last_applied(obj: T) -> T:
    """``obj`` without the :data:`LAST_APPLIED` annotation (the same object when it has none, or is not a
    Struct whose ``metadata`` is one): the informer's default transform."""
    meta = obj.metadata
    annotations = getattr(meta, "annotations", None)
    if not annotations or LAST_APPLIED not in annotations:
        return obj
    if not isinstance(obj, msgspec.Struct) or not isinstance(meta, msgspec.Struct):
        return obj
    kept = {key: value for key, value in annotations.items() if key != LAST_APPLIED}
    stripped: T = msgspec.structs.replace(obj, metadata=msgspec.structs.replace(meta, annotations=kept))
    return stripped


INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation on the BOOKMARK that ends a watch-list's initial state (value ``"true"``)."""


class _BookmarkMeta(msgspec.Struct):
    resourceVersion: str = ""
    annotations: dict[str, str] = {}


class _Bookmark(msgspec.Struct):
    metadata: _BookmarkMeta


class _HeadMeta(msgspec.Struct):
    name: str = ""
    namespace: str = ""
    resourceVersion: str = ""


class _Head(msgspec.Struct):
    """What a resync reads of an object first: its key and resourceVersion (msgspec skips the rest in C)."""

    metadata: _HeadMeta


WATCH_BACKOFF = Backoff(initial=0.8, factor=2.0, cap=30.0, jitter=1.0)
"""Wait after the n-th consecutive watch failure: client-go's reflector backoff (0.8 s, ×2, cap 30 s),
stretched by a random 1–2× (jitter 1.0)."""

BACKOFF_RESET_AFTER = 120.0
"""Seconds of a healthy watch after which the failure count starts again from zero (client-go reflector)."""


@dataclass
class InformerStats:
    """Counters for tests and metrics: how often the informer listed, watched, stalled, failed."""

    lists: int = 0
    """Paginated LISTs (the initial state or a resync by LIST)."""
    watch_lists: int = 0
    """Watch-lists whose initial state was complete (the cache was replaced at their bookmark)."""
    watch_list_fallbacks: int = 0
    """Watch-lists that gave way to a LIST (refused, or ended before their initial-events-end bookmark)."""
    watches: int = 0
    relists_after_gone: int = 0
    stalls: int = 0
    errors: int = 0
    synthesized_deletes: int = 0
    decode_errors: int = 0
    resync_reused: int = 0
    """Objects of a resync (watch-list or LIST after the first sync) the cache held at the same
    resourceVersion: the cached object was kept and the object not decoded again."""


class Informer(Generic[T]):
    """Cache and change feed for one resource (optionally one namespace / label selector).

    Args:
        client: the API (the shared :class:`~shared.kube.client.KubeClient`).
        resource: what to list and watch.
        decode_type: msgspec Struct type of one object (declare only the fields you need;
            unknown fields such as ``managedFields`` are dropped).
        namespace: restrict to one namespace (None: all namespaces / cluster-scoped).
        label_selector: optional label selector.
        inactivity_timeout: seconds without a byte before the watch is restarted; None (the
            default): the watch's server timeout + :data:`WATCH_DEADLINE_GRACE`, so an idle watch is
            ended by the server, never by this deadline.
        min_watch_timeout: seconds; see :data:`MIN_WATCH_TIMEOUT`.
        backoff: error backoff policy.
        watch_list: start (and resync) with a watch-list when the server serves one; False: always the
            paginated LIST.
        transform: applied to every decoded object before it is cached (client-go's ``SetTransform``);
            default :func:`strip_last_applied`; None: cache objects as decoded.
        decoder: decodes one object's JSON instead of ``msgspec.json.Decoder(decode_type).decode``
            (e.g. with a domain's own number semantics); raises a ``ValueError`` (msgspec's decode
            errors are ones) or ``RecursionError`` for an object it refuses, which is then skipped.
    """

    def __init__(
        self,
        client: KubeApi,
        resource: Resource,
        decode_type: type[T],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        inactivity_timeout: float | None = None,
        min_watch_timeout: int = MIN_WATCH_TIMEOUT,
        page_size: int = DEFAULT_PAGE_SIZE,
        backoff: Backoff = WATCH_BACKOFF,
        rng: random.Random | None = None,
        decoder: Callable[[bytes], T] | None = None,
        watch_list: bool = True,
        transform: Callable[[T], T] | None = strip_last_applied,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.inactivity_timeout = inactivity_timeout
        self.min_watch_timeout = min_watch_timeout
        self.page_size = page_size
        self.backoff = backoff
        self._failures = 0
        self._rng = rng or random.Random()
        self._decode_object: Callable[[bytes], T] = decoder or msgspec.json.Decoder(decode_type).decode
        self._transform = transform
        self._bookmark_decoder = msgspec.json.Decoder(_Bookmark)
        self._head_decoder = msgspec.json.Decoder(_Head)
        self.store: Store[T] = Store(resource.plural)
        """The cache this informer fills (and its indices and handlers)."""
        self._synced = anyio.Event()
        self.resource_version: str = ""
        """The last resourceVersion seen (list, event or bookmark); the watch resumes from it. ``""``: the
        cache must be synced (watch-list or LIST) first."""
        self.watch_list = watch_list
        """Whether the next sync tries a watch-list (turned off for good when the server refuses one)."""
        self.synced_by: str = ""
        """How the last sync filled the cache: ``"watch-list"`` or ``"list"`` (``""``: not yet)."""
        self._sync_from = ""
        """The resourceVersion a watch-list syncs from: the last one seen after a broken watch (the state may
        not be older), ``""`` (a consistent read) at first and after 410 Gone."""
        self.stats = InformerStats()
        self._deadline = 0.0
        self.on_decode_error: Callable[[bytes, Exception], None] | None = None
        """Called with the raw object and the error when an object does not decode (e.g. to post an Event)."""

    # -- reading the cache --------------------------------------------------------------

    @property
    def has_synced(self) -> bool:
        """True once the first LIST has been stored (and handlers told about it)."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def get(self, key: str) -> T | None:
        """The cached object for ``<namespace>/<name>`` (or ``<name>``), or None."""
        return self.store.get(key)

    def objects(self) -> list[T]:
        """Every cached object (a snapshot list)."""
        return self.store.objects()

    def keys(self) -> list[str]:
        return self.store.keys()

    def __len__(self) -> int:
        return len(self.store)

    def add_indexer(self, name: str, index: Callable[[T], Iterable[str]]) -> None:
        """:meth:`Store.add_indexer <shared.kube.store.Store.add_indexer>` on the cache.

        Raises:
            ValueError: an indexer of that name exists already.
        """
        self.store.add_indexer(name, index)

    def by_index(self, name: str, value: str) -> list[T]:
        """Cached objects that index ``name`` files under ``value``.

        Raises:
            KeyError: no indexer called ``name``.
        """
        return self.store.by_index(name, value)

    def index_values(self, name: str) -> list[str]:
        """Every value index ``name`` files at least one cached object under, unordered.

        Raises:
            KeyError: no indexer called ``name``.
        """
        return self.store.index_values(name)

    def add_handler(self, handler: Handler[T]) -> None:
        """Call ``handler(type, old, new)`` on every change (including those a relist synthesizes)."""
        self.store.add_handler(handler)

    # -- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        """List and watch until cancelled. Never returns normally; errors are retried with backoff."""
        while True:
            try:
                if not self.resource_version and not await self._sync():
                    continue
                await self._watch_once()
            except Gone:
                log.info("%s: resourceVersion %s expired, relisting", self.resource.plural, self.resource_version)
                self.stats.relists_after_gone += 1
                self.resource_version = self._sync_from = ""
            except WatchStalled:
                log.warning("%s: watch stalled for %.0f s, restarting", self.resource.plural,
                            self._deadline)
                self.stats.stalls += 1
            except WatchBroken as err:
                # the stream may have lost an event mid-way: relist rather than resume
                self.stats.errors += 1
                self._resync()
                await self._back_off(err)
            except NotFound as err:
                # the resource is not served (yet): its honest cache is empty; keep retrying
                if not self.has_synced:
                    self.stats.synthesized_deletes += self.store.replace(())
                    self._synced.set()
                self.stats.errors += 1
                await self._back_off(err)
            except ApiError as err:
                self.stats.errors += 1
                await self._back_off(err)
            except Exception as err:  # a bug or an unexpected payload must not take the binary down
                log.exception("%s: informer error", self.resource.plural)
                self.stats.errors += 1
                self._resync()
                await self._back_off(err)

    async def _back_off(self, err: Exception) -> None:
        delay = self.backoff.delay(self._failures, self._rng.random)
        self._failures += 1
        log.warning("%s: %s; retrying in %.1f s", self.resource.plural, err, delay)
        await anyio.sleep(delay)

    def _resync(self) -> None:
        """Sync again before the next watch, from a state no older than the last one seen."""
        if self.resource_version:
            self._sync_from = self.resource_version
        self.resource_version = ""

    async def _sync(self) -> bool:
        """Fill the cache: a watch-list (then True: it went on as the watch and ended normally, resume from
        its resourceVersion) or the paginated LIST (False: the watch is still to start)."""
        if self.watch_list:
            try:
                if await self._watch_list():
                    return False
            except (BadRequest, Invalid) as err:
                # an API server without the feature refuses the parameters; it will not start serving them
                log.info("%s: the API server refuses watch-lists (%s); listing instead", self.resource.plural, err)
                self.watch_list = False
            self.stats.watch_list_fallbacks += 1
        await self._relist()
        return True

    async def _relist(self) -> None:
        listing = await list_all(self.client, self.resource, self._decode_resynced, self.namespace,
                                 label_selector=self.label_selector, page_size=self.page_size)
        self.stats.lists += 1
        self._replace(listing.items, listing.resource_version, "list")

    def _replace(self, items: Iterable[T], resource_version: str, path: str) -> None:
        self.stats.synthesized_deletes += self.store.replace(items)
        self.resource_version = resource_version
        self.synced_by = path
        self._synced.set()

    async def _watch_list(self) -> bool:
        """One watch-list: the initial state into a scratch map, the cache replaced at the initial-events-end
        bookmark, then the stream goes on as a watch. True once the stream has ended normally after the
        bookmark; False when it ended before (the caller lists instead). Raises as :meth:`_watch_once`."""
        timeout = self.min_watch_timeout + int(self._rng.random() * self.min_watch_timeout)
        self._deadline = self.read_deadline(timeout)
        healthy_since = anyio.current_time()
        initial: dict[str, T] | None = {}
        async for event in self.client.watch(
            self.resource, self.namespace, resource_version=self._sync_from, timeout_seconds=timeout,
            inactivity_timeout=self._deadline, label_selector=self.label_selector, send_initial_events=True,
        ):
            if initial is None:  # past the initial state: an ordinary watch
                self._on_event(event)
                if anyio.current_time() - healthy_since > BACKOFF_RESET_AFTER:
                    self._failures = 0
                continue
            if event.type == "ERROR":
                raise status_error(bytes(event.object))
            if event.type == "BOOKMARK":
                meta = self._bookmark_decoder.decode(event.object).metadata
                if meta.annotations.get(INITIAL_EVENTS_END) == "true":
                    self.stats.watch_lists += 1
                    self.stats.watches += 1
                    self._replace(initial.values(), meta.resourceVersion, "watch-list")
                    initial = None
                continue
            obj = self._decode_resynced(event.object)
            if obj is None:
                continue
            if event.type == "DELETED":
                initial.pop(object_key(obj), None)
            else:
                initial[object_key(obj)] = obj
        if initial is not None:
            log.warning("%s: the watch-list ended before its initial state did; listing instead",
                        self.resource.plural)
            return False
        if anyio.current_time() - healthy_since > 1.0:
            self._failures = 0
        return True

    async def _watch_once(self) -> None:
        timeout = self.min_watch_timeout + int(self._rng.random() * self.min_watch_timeout)
        self._deadline = self.read_deadline(timeout)
        self.stats.watches += 1
        healthy_since = anyio.current_time()
        async for event in self.client.watch(
            self.resource, self.namespace, resource_version=self.resource_version,
            timeout_seconds=timeout, inactivity_timeout=self._deadline,
            label_selector=self.label_selector,
        ):
            self._on_event(event)
            if anyio.current_time() - healthy_since > BACKOFF_RESET_AFTER:
                self._failures = 0
        if anyio.current_time() - healthy_since > 1.0:
            self._failures = 0

    def read_deadline(self, timeout_seconds: int) -> float:
        """Seconds a watch with server timeout ``timeout_seconds`` may stay silent before it is stalled."""
        if self.inactivity_timeout is not None:
            return self.inactivity_timeout
        return timeout_seconds + WATCH_DEADLINE_GRACE

    def _on_event(self, event: WatchEvent) -> None:
        if event.type == "ERROR":
            raise status_error(bytes(event.object))
        if event.type == "BOOKMARK":
            version = self._bookmark_decoder.decode(event.object).metadata.resourceVersion
            if version:
                self.resource_version = version
            return
        obj = self._decode(event.object)
        if obj is None:
            return
        if event.type == "DELETED":
            self.store.apply(WatchEventType.DELETED, obj)
        elif event.type in ("ADDED", "MODIFIED"):
            self.store.upsert(obj)
        if obj.metadata.resource_version:
            self.resource_version = obj.metadata.resource_version

    def _decode_resynced(self, raw: msgspec.Raw) -> T | None:
        """:meth:`_decode` for one object of a sync's initial state, deciding from its metadata first: an
        object the cache already holds at the same resourceVersion (most of them, on a resync after a broken
        watch or a 410) is the cached object, which :meth:`Store.replace` would keep anyway, so the rest of it
        (for a Process: the domain decoder's number and nesting passes, a few tens of microseconds) is not
        decoded again. On the first sync the cache is empty and this is :meth:`_decode`."""
        if len(self.store):
            try:
                meta = self._head_decoder.decode(raw).metadata
            except msgspec.DecodeError:  # ValidationError is one: the full decode reports it
                return self._decode(raw)
            if meta.resourceVersion:
                cached = self.store.get(f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name)
                if cached is not None and cached.metadata.resource_version == meta.resourceVersion:
                    self.stats.resync_reused += 1
                    return cached
        return self._decode(raw)

    def _decode(self, raw: msgspec.Raw) -> T | None:
        """One object, or None when it does not decode: one bad object must not stop the informer (it is
        logged, counted, and reported to ``on_decode_error``). A decoder reports a bad object with a
        ``ValueError`` (msgspec's errors are ones); a ``RecursionError`` (a document nested deeper than
        the interpreter's stack, which the API server accepts) counts as one too."""
        try:
            obj = self._decode_object(raw)
        except (ValueError, RecursionError) as err:
            self.stats.decode_errors += 1
            log.warning("%s: skipping an object that does not decode: %s", self.resource.plural, err)
            if self.on_decode_error is not None:
                self.on_decode_error(bytes(raw), err)
            return None
        return self._transform(obj) if self._transform is not None else obj
