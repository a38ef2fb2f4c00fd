"""Kubernetes Events (core/v1) for transitions and errors, aggregated on repeats and rate limited per object.

Kubernetes Events for transitions and errors (docs/runtime.md#events); behaviour after
client-go's ``tools/record`` recorder:

- an Event carries ``involvedObject``, ``reason``, ``message``, ``type`` (Normal/Warning),
  ``source.component`` and ``reportingComponent`` (the reporting controller),
  ``reportingInstance``, ``firstTimestamp``/``lastTimestamp`` and ``count``; it lives in the
  involved object's namespace (``default`` for cluster-scoped objects) and is named
  ``<object name>.<hex of Unix nanoseconds>`` as client-go names it;
- a repeat of the same (object, type, reason, message) within :data:`AGGREGATE_WINDOW`
  (client-go's 600 s aggregation interval) bumps ``count`` and ``lastTimestamp`` of the
  existing Event by JSON merge patch instead of creating another; the recorder remembers at
  most :data:`CACHE_SIZE` such series (client-go's LRU of 4096);
- a per-object token bucket (burst :data:`SPAM_BURST` 25, one token per
  :data:`SPAM_REFILL_SECONDS` 300 s: client-go's ``EventSourceObjectSpamFilter``) drops the
  excess; drops are counted in :attr:`EventRecorder.stats`;
- recording never raises into the caller: API failures are logged and counted;
- once :meth:`EventRecorder.run` runs (the manager runs it), :meth:`EventRecorder.emit` only queues:
  :data:`SENDERS` background tasks write, so a reconcile never waits for an Event's request, and at
  most :data:`MAX_QUEUED` wait (client-go's ``maxQueuedEvents``; more are dropped and counted), as
  client-go's broadcaster does. Without ``run`` (tests, tools) ``emit`` writes before returning.

The pure parts (:class:`~shared.kube.ratelimit.TokenBucket`, :func:`event_name`, :func:`format_time`,
:func:`involved_object`, :func:`new_event`, :func:`repeat_patch`) are tested alone.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from opentelemetry import context as otel_context
from opentelemetry import trace

from shared.kube import tracing
from shared.kube.api import KubeApi
from shared.kube.client import EVENTS, Resource
from shared.kube.errors import AlreadyExists, NotFound
from shared.kube.meta import as_json
from shared.kube.ratelimit import TokenBucket

_TRACER = trace.get_tracer("tatara.kube.events")

log = logging.getLogger(__name__)

__all__ = [
    "AGGREGATE_WINDOW",
    "CACHE_SIZE",
    "FLUSH_SECONDS",
    "MAX_QUEUED",
    "SENDERS",
    "SPAM_BURST",
    "SPAM_REFILL_SECONDS",
    "Event",
    "EventRecorder",
    "EventType",
    "RecorderStats",
    "event_name",
    "format_time",
    "involved_object",
    "new_event",
    "repeat_patch",
]

SPAM_BURST: Final = 25
"""Events one object may emit at once (client-go ``defaultSpamBurst``)."""

SPAM_REFILL_SECONDS: Final = 300.0
"""Seconds per new token of an object's bucket (client-go ``defaultSpamQPS`` = 1/300)."""

AGGREGATE_WINDOW: Final = 600.0
"""Seconds within which a repeat is folded into the existing Event (client-go
``defaultAggregateIntervalInSeconds``)."""

MAX_QUEUED: Final = 1000
"""Events waiting for a sender before new ones are dropped (client-go ``maxQueuedEvents``)."""

FLUSH_SECONDS: Final = 5.0
"""Seconds a cancelled :meth:`EventRecorder.run` keeps writing what is still queued (shutdown)."""

SENDERS: Final = 4
"""Background tasks writing queued Events (each series is still written in order: one lock per series)."""

CACHE_SIZE: Final = 4096
"""Event series and spam buckets remembered, least recently used dropped first (client-go
``maxLruCacheEntries``)."""


class EventType(StrEnum):
    """core/v1 ``Event.type``."""

    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class Event:
    """One Event to record about an object: ``type`` Normal or Warning, a CamelCase ``reason``
    (``PhaseRunning``, ``PidRefused``…) and a human sentence. What decisions return; the
    :class:`EventRecorder` turns it into a core/v1 Event."""

    type: EventType
    reason: str
    message: str

    @classmethod
    def normal(cls, reason: str, message: str) -> Event:
        return cls(EventType.NORMAL, reason, message)

    @classmethod
    def warning(cls, reason: str, message: str) -> Event:
        return cls(EventType.WARNING, reason, message)


_Queued = tuple[Resource, Any, Event, otel_context.Context | None]
"""An Event waiting for a sender: what it is about, and the context it was emitted in (tracing on)."""


def format_time(unix_seconds: float) -> str:
    """RFC 3339 UTC with whole seconds (``metav1.Time``'s wire form), e.g. ``2024-05-01T12:00:00Z``."""
    return datetime.fromtimestamp(int(unix_seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_name(object_name: str, unix_nanos: int) -> str:
    """``<object name>.<unix nanoseconds in lower-case hex>`` (client-go ``makeEvent``)."""
    return f"{object_name}.{unix_nanos:x}"


def involved_object(resource: Resource, obj: Any) -> dict[str, str]:
    """The ``involvedObject`` reference (apiVersion, kind, namespace, name, uid, resourceVersion) for ``obj``.

    ``obj`` is a Struct with ``metadata`` or a JSON mapping; empty fields are left out.

    Raises:
        ValueError: ``obj`` has no ``metadata.name``.
    """
    data = as_json(obj)
    meta: Mapping[str, Any] = data.get("metadata") or {} if isinstance(data, Mapping) else {}
    if not meta.get("name"):
        raise ValueError("involved object has no metadata.name")
    ref = {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "namespace": meta.get("namespace") if resource.namespaced else None,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {k: str(v) for k, v in ref.items() if v}


def new_event(
    name: str,
    involved: Mapping[str, str],
    event_type: EventType,
    reason: str,
    message: str,
    *,
    reporting_controller: str,
    reporting_instance: str,
    now: float,
) -> dict[str, Any]:
    """The core/v1 Event document to create (``count`` 1, first = last timestamp = ``now``, Unix seconds).

    Its namespace is the involved object's, or ``default`` for a cluster-scoped one (the API
    server's rule for core/v1 Events without ``eventTime``).
    """
    stamp = format_time(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": involved.get("namespace") or "default"},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message,
        "type": event_type.value,
        "source": {"component": reporting_controller},
        "reportingComponent": reporting_controller,
        "reportingInstance": reporting_instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def repeat_patch(count: int, now: float) -> dict[str, Any]:
    """The merge patch that records a repeat: ``{"count": count, "lastTimestamp": <now>}``."""
    return {"count": count, "lastTimestamp": format_time(now)}


@dataclass
class RecorderStats:
    """Counters since the recorder was built."""

    created: int = 0
    """Events created."""
    aggregated: int = 0
    """Repeats folded into an existing Event (count bumped)."""
    dropped: int = 0
    """Records dropped by the per-object spam filter, or because :data:`MAX_QUEUED` were waiting."""
    failed: int = 0
    """Records lost to an API error (logged)."""


@dataclass
class _Series:
    name: str
    namespace: str
    document: dict[str, Any]
    count: int
    last_seen: float


@dataclass
class _Lru:
    capacity: int
    items: OrderedDict[Any, Any] = field(default_factory=OrderedDict)

    def get(self, key: Any) -> Any:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.capacity:
            self.items.popitem(last=False)


class EventRecorder:
    """Writes core/v1 Events for one controller instance.

    Args:
        client: the API client (needs ``create`` and ``patch`` on ``events`` in the objects' namespaces).
        reporting_controller: ``source.component`` and ``reportingComponent``, e.g. ``tatara-reconciler``.
        reporting_instance: ``reportingInstance``, e.g. the pod name (at most 128 characters).
        monotonic: seconds clock for the spam filter and the aggregation window.
        wall: Unix seconds clock for timestamps and names.
    """

    def __init__(
        self,
        client: KubeApi,
        reporting_controller: str,
        reporting_instance: str,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance
        self.stats = RecorderStats()
        self._monotonic = monotonic
        self._wall = wall
        self._series = _Lru(CACHE_SIZE)
        self._buckets = _Lru(CACHE_SIZE)
        self._locks: dict[Any, anyio.Lock] = {}
        self._last_nanos = 0
        self._queue: MemoryObjectSendStream[_Queued] | None = None
        self._pending = 0
        """Events queued by :meth:`emit` and not yet written (or given up)."""

    async def emit(self, resource: Resource, obj: Any, event: Event) -> None:
        """Record ``event`` about ``obj`` (see :meth:`record`): queued for the senders while :meth:`run`
        runs, so this returns at once; written before returning otherwise."""
        if self._queue is None:
            await self.record(resource, obj, event.type, event.reason, event.message)
            return
        try:
            # with tracing on, the Event is written in the trace of the reconcile that emitted it
            self._queue.send_nowait((resource, obj, event, otel_context.get_current() if tracing.enabled else None))
            self._pending += 1
        except anyio.WouldBlock:
            self.stats.dropped += 1
            log.warning("event %s dropped: %d events already wait to be written", event.reason, MAX_QUEUED)

    async def run(self) -> None:
        """Write queued Events with :data:`SENDERS` tasks until cancelled (a manager runnable); when
        cancelled, what is still queued is written for up to :data:`FLUSH_SECONDS` more."""
        send, receive = anyio.create_memory_object_stream[_Queued](MAX_QUEUED)
        self._queue = send
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(SENDERS):
                    tg.start_soon(self._send_queued, receive)
        finally:
            self._queue = None
            send.close()
            with anyio.CancelScope(shield=True), anyio.move_on_after(FLUSH_SECONDS):
                await self._send_queued(receive)  # ends when the queue is empty: the send side is closed
            receive.close()

    async def _send_queued(self, receive: MemoryObjectReceiveStream[_Queued]) -> None:
        async for resource, obj, event, emitted_in in receive:
            # taken off the queue, so finished even when the run is cancelled meanwhile (bounded)
            try:
                with anyio.CancelScope(shield=True), anyio.move_on_after(FLUSH_SECONDS):
                    if emitted_in is None:
                        await self.record(resource, obj, event.type, event.reason, event.message)
                    else:
                        with _TRACER.start_as_current_span(f"event {event.reason}", context=emitted_in,
                                                           attributes={"k8s.event.reason": event.reason,
                                                                       "k8s.event.type": str(event.type)}):
                            await self.record(resource, obj, event.type, event.reason, event.message)
            finally:
                self._pending -= 1

    def idle(self) -> bool:
        """No Event queued or being written (the manager's idle check, :meth:`shared.kube.manager.Manager.idle`)."""
        return self._pending == 0

    async def record(self, resource: Resource, obj: Any, event_type: EventType, reason: str, message: str) -> None:
        """Record that ``reason``/``message`` happened to ``obj`` (a cached object of ``resource``).

        Never raises (cancellation excepted): a bad object, a spam drop or an API failure is
        logged and counted in :attr:`stats`.
        """
        try:
            involved = involved_object(resource, obj)
        except (ValueError, AttributeError, TypeError) as err:
            self.stats.failed += 1
            log.warning("event %s not recorded: %s", reason, err)
            return
        object_key = tuple((k, v) for k, v in sorted(involved.items()) if k != "resourceVersion")
        now = self._monotonic()
        bucket = self._buckets.get(object_key)
        if bucket is None:
            bucket = TokenBucket(1.0 / SPAM_REFILL_SECONDS, SPAM_BURST, now)
            self._buckets.put(object_key, bucket)
        if not bucket.take(now):
            self.stats.dropped += 1
            log.debug("event %s on %s dropped by the spam filter", reason, involved.get("name"))
            return
        key = (object_key, event_type.value, reason, message)
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                await self._write(key, involved, event_type, reason, message)
        except Exception as err:  # recording must never fail the caller's reconcile
            self.stats.failed += 1
            log.warning("event %s on %s/%s not recorded: %s", reason, involved.get("namespace"),
                        involved.get("name"), err)
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0 and self._locks.get(key) is lock:
                del self._locks[key]

    async def _write(
        self, key: Any, involved: Mapping[str, str], event_type: EventType, reason: str, message: str
    ) -> None:
        now, wall = self._monotonic(), self._wall()
        series: _Series | None = self._series.get(key)
        if series is not None and now - series.last_seen <= AGGREGATE_WINDOW:
            count = series.count + 1
            try:
                await self.client.merge_patch(EVENTS, series.name, repeat_patch(count, wall), series.namespace)
            except NotFound:  # expired (event TTL) or deleted: create it again, count kept
                document = {**series.document, "count": count, "lastTimestamp": format_time(wall)}
                await self._create(series.namespace, document)
            series.count, series.last_seen = count, now
            self.stats.aggregated += 1
            return
        name = event_name(involved["name"], self._nanos())
        document = new_event(name, involved, event_type, reason, message, now=wall,
                             reporting_controller=self.reporting_controller, reporting_instance=self.reporting_instance)
        namespace = document["metadata"]["namespace"]
        try:
            await self._create(namespace, document)
        except AlreadyExists:  # a name taken in the same nanosecond by another recorder: one more try
            document["metadata"]["name"] = name = event_name(involved["name"], self._nanos())
            await self._create(namespace, document)
        self._series.put(key, _Series(name, namespace, document, 1, now))
        self.stats.created += 1

    async def _create(self, namespace: str, document: dict[str, Any]) -> None:
        await self.client.create(EVENTS, msgspec.json.encode(document), namespace)

    def _nanos(self) -> int:
        nanos = max(int(self._wall() * 1e9), self._last_nanos + 1)
        self._last_nanos = nanos
        return nanos
