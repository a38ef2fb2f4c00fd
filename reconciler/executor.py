"""The thin shell: turns a :class:`~reconciler.decision.Decision` into API calls.

Order (see :mod:`reconciler.decision`): finalizer add → PID allocation → child applies and
deletes → signals to child Processes → own-annotation patch → status patch (the phase
write last, so a crash before it repeats the step instead of skipping it) → Events and
metrics → finalizer removal → self-delete. Every write goes through
:mod:`shared.kube.patch`, which skips writes that change nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from reconciler.decision import Decision
from reconciler.metrics import ProcessMetrics
from reconciler.pid import PidRefused
from shared.domain import annotations as ann
from shared.domain import finalizers as fin
from shared.domain.api.codec import decode_process
from shared.domain.api.process import Process
from shared.domain.resources import PROCESSES
from shared.kube.controller import Result
from shared.kube.discovery import RESTMapper
from shared.kube.errors import Conflict, NotFound
from shared.kube.events import EventRecorder, EventType
from shared.kube.finalizer import add_finalizer, remove_finalizer
from shared.kube.meta import ObjectRef
from shared.kube.patch import apply, patch_annotations, patch_status

log = logging.getLogger(__name__)

FIELD_MANAGER = "tatara-reconciler"
"""Field manager of every server-side apply (spec/process-reconciler.md §0.3)."""

PidAllocator = Callable[[Process], Awaitable[str]]


class Executor:
    """Performs decisions for one reconciler process.

    Args:
        client: the shared API client (``shared.kube.client.KubeClient``).
        mapper: kind → resource resolution for children.
        recorder: Event recorder.
        metrics: domain metrics.
        allocate_pid: ``await allocate_pid(process) -> pid`` (ProcessTable-backed in the binary).
    """

    def __init__(self, client: Any, mapper: RESTMapper, recorder: EventRecorder, metrics: ProcessMetrics,
                 allocate_pid: PidAllocator) -> None:
        self.client = client
        self.mapper = mapper
        self.recorder = recorder
        self.metrics = metrics
        self.allocate_pid = allocate_pid

    async def execute(self, process: Process, decision: Decision, now: datetime) -> Result:
        """Carry out ``decision`` for ``process`` (the cached object it was decided on).

        Raises:
            shared.kube.errors.ApiError: a write failed; the controller backs off and retries the
                whole reconcile, which recomputes the decision from fresh state.
        """
        ns, name = process.metadata.namespace or "default", process.metadata.name or ""
        if decision.add_finalizer:
            await add_finalizer(self.client, PROCESSES, ns, name, fin.PROCESS, current=process)

        status = dict(decision.status or {})
        guard_version: str | None = None
        if decision.allocate_pid:
            # The cache may lag our own last write (status-only events do not requeue): read the live
            # object so a PID is never allocated twice, and guard the status write with its version.
            live = decode_process(await self.client.get(PROCESSES, name, ns))
            if live.status is not None and live.status.pid:
                return Result(requeue_after=1.0)
            guard_version = live.metadata.resource_version
            try:
                status["pid"] = await self.allocate_pid(process)
            except PidRefused as refused:
                # maxDepth / maxChildren: say why in status and an Event, then wait for a change.
                await patch_status(self.client, PROCESSES, ns, name, {"message": str(refused)}, current=process)
                await self.recorder.record(PROCESSES, process, EventType.WARNING, "PidRefused", str(refused))
                return Result(requeue_after=decision.requeue_after or 30.0)
            status["parent"] = process.spec.identity.parent if process.spec.identity else None

        for doc in decision.apply:
            resource = await self.mapper.resource_for(doc["apiVersion"], doc["kind"])
            await apply(self.client, resource, doc, field_manager=FIELD_MANAGER)
        for ref in decision.delete:
            resource = await self.mapper.resource_for(ref.api_version, ref.kind)
            with contextlib.suppress(NotFound):
                await self.client.delete(resource, ref.name, ref.namespace if resource.namespaced else None)

        for child_ns, child_name, signal in decision.signal_children:
            with contextlib.suppress(NotFound):
                await patch_annotations(self.client, PROCESSES, ObjectRef(child_ns, child_name),
                                        {ann.SIGNAL: signal.value})

        if decision.suspended is not None:
            # One main-resource write: the one-shot signal is stripped by the write that applies it.
            body: dict[str, Any] = {"spec": {"suspended": decision.suspended}}
            if decision.annotations:
                body["metadata"] = {"annotations": decision.annotations}
            await self.client.merge_patch(PROCESSES, name, body, ns)
        elif decision.annotations:
            await patch_annotations(self.client, PROCESSES, process, decision.annotations)
        if decision.signal is not None:
            self.metrics.signals.labels(*decision.signal).inc()
        if status and guard_version is not None:
            try:
                await self.client.merge_patch(PROCESSES, name, {"metadata": {"resourceVersion": guard_version},
                                                                "status": status}, ns, subresource="status")
            except Conflict:
                return Result(requeue_after=1.0)  # changed since the live read: decide again
        elif status:
            await patch_status(self.client, PROCESSES, ns, name, status, current=process)

        if decision.transition is not None:
            old, new = decision.transition
            since = process.status.phase_since if process.status else None
            self.metrics.transition(old, new, (now - since).total_seconds() if since else None)
            message = (decision.status or {}).get("message") or f"{old.value} → {new.value}"
            await self.recorder.record(PROCESSES, process, EventType.NORMAL, f"Phase{new.value}", str(message))
        for event in decision.events:
            await self.recorder.record(PROCESSES, process, EventType(event.type), event.reason, event.message)

        if decision.remove_finalizer:
            await remove_finalizer(self.client, PROCESSES, ns, name, fin.PROCESS, current=process)
        if decision.delete_self:
            with contextlib.suppress(NotFound):
                await self.client.delete(PROCESSES, name, ns)
            return Result.done()
        return Result(requeue_after=decision.requeue_after)

