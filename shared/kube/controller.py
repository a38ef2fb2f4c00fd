"""A controller: informers feed a work queue of object keys; workers call the reconciler.

Level-triggered, as controller-runtime's: the reconciler receives only a
:class:`Request` (namespace/name), reads the world from the informer caches and
converges it, returning :class:`Result` (done, or requeue after N seconds) or raising
(→ per-key exponential backoff; :class:`TerminalError` → not retried).

- the primary informer enqueues its own keys, filtered by predicates; the default
  :func:`generation_or_metadata_changed` drops events caused only by status writes
  (ours included), so a status patch never retriggers its own reconcile;
- secondary informers map objects to primaries by controller ownerReference
  (:meth:`Controller.owns`) or a custom mapper (:meth:`Controller.watches`); a child's
  status change does trigger its owner;
- never two workers on one key (the work queue's dirty-while-processing);
- metrics with controller-runtime names (docs/runtime.md#metrics), one
  OpenTelemetry span and log context (controller, namespace, name) per reconcile;
- :meth:`Controller.shutdown` stops hand-outs and waits for in-flight reconciles.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
from opentelemetry import trace

from shared.kube import tracing
from shared.kube.errors import ApiError
from shared.kube.informer import Informer, WatchEventType
from shared.kube.logcontext import log_context
from shared.kube.meta import KubeObject
from shared.kube.metrics import RuntimeMetrics, runtime_metrics
from shared.kube.workqueue import Clock, RateLimiter, ShutDown, WorkQueue

log = logging.getLogger(__name__)

T = TypeVar("T", bound=KubeObject)


@dataclass(frozen=True, order=True)
class Request:
    """What to reconcile: one object by namespace (``None`` for cluster-scoped) and name."""

    namespace: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def of(cls, obj: KubeObject) -> Request:
        return cls(obj.metadata.namespace or None, obj.metadata.name or "")


@dataclass(frozen=True)
class Result:
    """A reconcile outcome: ``requeue_after`` seconds (None: done until the next event); ``urgent``: the
    requeue goes ahead of the keys queued without it (:meth:`WorkQueue.add`), for a short retry that
    continues the work of an urgent wake-up (e.g. waiting for the cache to show our own write)."""

    requeue_after: float | None = None
    urgent: bool = False

    @classmethod
    def done(cls) -> Result:
        return cls()

    @classmethod
    def after(cls, seconds: float) -> Result:
        """Reconcile again in ``seconds``: polling is an explicit requeue (docs/runtime.md#controller)."""
        return cls(requeue_after=seconds)


class TerminalError(Exception):
    """A reconcile error that retrying cannot fix (e.g. an invalid spec); logged, counted, not requeued."""


Reconciler = Callable[[Request], Awaitable[Result | None]]
Gate = Callable[[Request], Awaitable[bool]]
"""``await gate(request) -> handled``, run before each reconcile (:meth:`Controller.set_gate`): True means the gate
dealt with the key itself (e.g. handed the object over to another shard: :class:`shared.kube.sharding.DrainGate`)
and the reconcile does not run; raising retries the key with the per-key backoff."""
Predicate = Callable[[WatchEventType, Any, Any], bool]
"""``predicate(event_type, old, new) -> bool``: False drops the event."""


def generation_or_metadata_changed(event: WatchEventType, old: Any, new: Any) -> bool:
    """Keep adds, deletes, and updates that change ``metadata.generation``, labels, annotations,
    finalizers, ownerReferences or ``deletionTimestamp``; drop status-only updates.

    Objects without a generation (e.g. ConfigMaps) count any resourceVersion change as a change
    of generation, since they have no status subresource.
    """
    if event is not WatchEventType.MODIFIED or old is None:
        return True
    o, n = old.metadata, new.metadata
    if getattr(n, "generation", None) is None:
        return bool(o.resource_version != n.resource_version)
    return bool(
        o.generation != n.generation
        or getattr(o, "labels", None) != getattr(n, "labels", None)
        or getattr(o, "annotations", None) != getattr(n, "annotations", None)
        or getattr(o, "finalizers", None) != getattr(n, "finalizers", None)
        or getattr(o, "owner_references", None) != getattr(n, "owner_references", None)
        or getattr(o, "deletion_timestamp", None) != getattr(n, "deletion_timestamp", None)
    )


def controller_owner(obj: Any, kind: str, group: str) -> tuple[str, str] | None:
    """``(kind, name)`` of ``obj``'s controller ownerReference if it is a ``kind`` in API ``group``, else None."""
    for ref in getattr(obj.metadata, "owner_references", None) or ():
        ref_group = ref.api_version.rpartition("/")[0]
        if ref.controller and ref.kind == kind and ref_group == group:
            return ref.kind, ref.name
    return None


class Controller(Generic[T]):
    """Reconciles objects of one primary kind.

    Args:
        name: controller name (metric label ``controller``, log field, span attribute).
        primary: informer of the primary kind (run by the caller, e.g. the manager).
        reconcile: the reconciler.
        workers: concurrent reconciles (controller-runtime's MaxConcurrentReconciles; default 1).
        predicates: filters for primary events (default: drop status-only updates).
        metrics: the metric set (default: the process registry's).
        clock: the work queue's clock (default monotonic), which times requeues, backoff and the
            queue metrics.
        rate_limiter: the work queue's per-key retry limiter (default: client-go's controller rate
            limiter on ``clock``; controller-runtime's ``Options.RateLimiter``).
    """

    def __init__(
        self,
        name: str,
        primary: Informer[T],
        reconcile: Reconciler,
        *,
        workers: int = 1,
        predicates: Iterable[Predicate] = (generation_or_metadata_changed,),
        metrics: RuntimeMetrics | None = None,
        clock: Clock | None = None,
        rate_limiter: RateLimiter[Request] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.name = name
        self.primary = primary
        self.reconcile = reconcile
        self.workers = workers
        self.metrics = metrics or runtime_metrics()
        self.metrics.init_controller(name, max_concurrent_reconciles=workers)
        self.queue: WorkQueue[Request] = WorkQueue(clock=clock, rate_limiter=rate_limiter,
                                                   metrics=self.metrics.workqueue(name))
        self._informers: list[Informer[Any]] = [primary]
        self._gate: Gate | None = None
        self._tracer = trace.get_tracer("tatara.controller")
        if tracing.enabled:
            self.queue.waits = {}
        primary_predicates = tuple(predicates)

        def on_primary(event: WatchEventType, old: T | None, new: T) -> None:
            if all(p(event, old, new) for p in primary_predicates):
                self.queue.add(Request.of(new))

        primary.add_handler(on_primary)

    # -- wiring ---------------------------------------------------------------------------

    def owns(self, informer: Informer[Any], *, kind: str, group: str,
             predicates: Iterable[Predicate] = (), urgent: bool = False, cached_only: bool = False) -> None:
        """Enqueue the controller owner (a ``kind`` in API ``group``) of every changed ``informer`` object
        (``urgent`` and ``cached_only``: see :meth:`watches`)."""
        def mapper(obj: Any) -> list[Request]:
            owner = controller_owner(obj, kind, group)
            return [Request(obj.metadata.namespace or None, owner[1])] if owner else []

        self.watches(informer, mapper, predicates=predicates, urgent=urgent, cached_only=cached_only)

    def watches(self, informer: Informer[Any], mapper: Callable[[Any], Iterable[Request]], *,
                predicates: Iterable[Predicate] = (), urgent: bool = False, cached_only: bool = False) -> None:
        """Enqueue ``mapper(obj)`` for every changed ``informer`` object (old and new state on updates).

        ``urgent``: these keys go ahead of every key queued without it (:meth:`WorkQueue.add`), e.g. a
        child's change that lets its owner finish, so it does not wait behind a burst of new objects.
        ``cached_only``: only keys whose object the primary informer holds. A shard's instance watches every
        shard's children, and a reconcile of a key it does not hold would only find nothing (the primary's
        own events still queue its keys, its deletes included).
        """
        chosen = tuple(predicates)
        primary = self.primary

        def on_event(event: WatchEventType, old: Any, new: Any) -> None:
            if not all(p(event, old, new) for p in chosen):
                return
            keys = set(mapper(new))
            if old is not None:
                keys.update(mapper(old))
            for key in keys:
                if cached_only and primary.get(str(key)) is None:
                    continue
                self.queue.add(key, urgent=urgent)

        informer.add_handler(on_event)
        self._informers.append(informer)

    def set_gate(self, gate: Gate | None) -> None:
        """Run ``await gate(request)`` before each reconcile, in the worker that holds the key (so never beside a
        reconcile of the same key); a True answer skips the reconcile (:data:`Gate`). Call before :meth:`run`."""
        self._gate = gate

    @property
    def has_synced(self) -> bool:
        return all(i.has_synced for i in self._informers)

    # -- running --------------------------------------------------------------------------

    async def run(self) -> None:
        """Wait for every informer to sync, then run the workers until :meth:`shutdown`.

        The informers themselves must be running (see :class:`shared.kube.manager.Manager`).
        """
        for informer in self._informers:
            await informer.wait_synced()
        log.info("controller %s: caches synced, starting %d workers", self.name, self.workers)
        async with anyio.create_task_group() as tg:
            for _ in range(self.workers):
                tg.start_soon(self._worker)

    async def shutdown(self, *, drain: bool = True) -> None:
        """Stop handing out keys; with ``drain``, return once in-flight reconciles finished."""
        await self.queue.shutdown(drain=drain)

    async def _worker(self) -> None:
        while True:
            try:
                request = await self.queue.get()
            except ShutDown:
                return
            exemplar: Mapping[str, str] | None = None
            try:
                if self._gate is None or not await self._gated(request):  # no coroutine per key without a gate
                    exemplar = await self._reconcile_one(request)
            finally:
                self.queue.done(request, exemplar=exemplar)

    async def _gated(self, request: Request) -> bool:
        """Whether the gate handled ``request`` (then no reconcile runs); a failing gate counts as handled and
        the key is retried with the per-key backoff."""
        assert self._gate is not None
        try:
            handled = await self._gate(request)
        except Exception as err:
            log.warning("%s %s: gate failed, retrying: %s", self.name, request, err)
            self.queue.add_rate_limited(request)
            return True
        if handled:
            self.queue.forget(request)
        return handled

    async def _reconcile_one(self, request: Request) -> Mapping[str, str] | None:
        """Reconcile ``request`` once inside its span; the span's trace and span id when it was sampled (the
        exemplar of the work-queue observations: docs/runtime.md#traces), else None."""
        m, name = self.metrics, self.name
        active = m.active_workers.labels(name)
        active.inc()
        started = time.perf_counter()
        attributes = {"k8s.controller": name, "k8s.namespace.name": request.namespace or "",
                      "k8s.object.name": request.name}
        with log_context(controller=name, namespace=request.namespace or "", name=request.name), \
                self._tracer.start_as_current_span(f"reconcile {name}", attributes=attributes) as span:
            exemplar = tracing.log_ids() if self.queue.waits is not None and span.get_span_context(
                ).trace_flags.sampled else None
            if self.queue.waits is not None:
                span.set_attribute("tatara.queue.wait_seconds", self.queue.take_wait(request, exemplar))
                span.set_attribute("tatara.queue.requeues", self.queue.num_requeues(request))
            try:
                result = await self.reconcile(request) or Result.done()
            except TerminalError as err:
                log.error("terminal error, not retrying: %s", err)
                m.terminal_reconcile_errors_total.labels(name).inc()
                m.reconcile_errors_total.labels(name).inc()
                m.reconcile_total.labels(name, "error").inc()
                span.set_status(trace.StatusCode.ERROR, str(err))
                self.queue.forget(request)
                return exemplar
            except Exception as err:
                if not isinstance(err, ApiError):
                    m.reconcile_panics_total.labels(name).inc()
                    log.exception("reconcile raised")
                else:
                    log.warning("reconcile failed: %s", err)
                m.reconcile_errors_total.labels(name).inc()
                m.reconcile_total.labels(name, "error").inc()
                span.set_status(trace.StatusCode.ERROR, str(err))
                retry_after = err.retry_after if isinstance(err, ApiError) else None
                if retry_after:
                    # the API server asked for a pause (429, APF): honour it rather than a 5 ms backoff
                    self.queue.add_after(request, retry_after)
                else:
                    self.queue.add_rate_limited(request)
                return exemplar
            finally:
                elapsed = time.perf_counter() - started
                if exemplar:
                    # the exemplar: this observation's trace (docs/runtime.md#traces)
                    m.reconcile_time_seconds.labels(name).observe_with_exemplar(elapsed, exemplar)
                else:
                    m.reconcile_time_seconds.labels(name).observe(elapsed)
                active.dec()
            self.queue.forget(request)
            if self.queue.waits is not None:
                span.set_attribute("tatara.result", "requeue_after" if result.requeue_after is not None else "success")
                if result.requeue_after is not None:
                    span.set_attribute("tatara.requeue_after_seconds", result.requeue_after)
            if result.requeue_after is not None:
                m.reconcile_total.labels(name, "requeue_after").inc()
                self.queue.add_after(request, result.requeue_after, urgent=result.urgent)
            else:
                m.reconcile_total.labels(name, "success").inc()
        return exemplar
