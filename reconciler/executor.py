"""The thin shell: performs a :class:`~reconciler.decision.Decision`'s writes, and decides nothing.

One order, always (the phase write comes late, so a crash before it repeats the step instead of
skipping it):

1. server-side apply of ``apply``, in order (field manager ``tatara-reconciler``, ``force``); the
   resourceVersion each returned is told to ``child_writes``;
2. deletes of ``delete`` (an object already gone is fine);
2a. the claims release (``release_claims``): the stable-name claims naming the Process are given up,
   after its stable children are deleted and before anything that moves it on
   (docs/behaviour.md#handing-a-stable-name-over);
3. signals to child Processes (their signal annotation);
4. the Process's own merge patch: ``annotations`` and ``spec.suspended`` in one write;
5. the ``/status`` merge patch, guarded by ``guard`` (a resourceVersion) when the decision carries a new
   PID (a 409 then propagates as :class:`~shared.kube.errors.Conflict`);
6. metrics: the signal taken, each phase transition (a folded decision records the phases it passed
   through too) and the time spent in the phase left;
7. ``events``, in order;
8. self-delete (``delete_self``).

What comes before is the controller's (:mod:`reconciler.controller`): the finalizer is added before
step 1 and removed after step 8 (:func:`shared.kube.finalizer.finalize`), and a PID is allocated
before the decision reaches the executor. Annotation and status writes go through
:mod:`shared.kube.patch`, which skips those that change nothing; applies, deletes and the combined
annotations + ``spec.suspended`` patch are always sent (docs/runtime.md#writes).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator

import msgspec

from reconciler.children import ChildRef
from reconciler.decision import Decision
from reconciler.exports import tracing_env_of, with_traceparent
from reconciler.metrics import ProcessMetrics
from reconciler.refusals import KIND_NOT_SERVED, WRITE_REFUSED, WriteRefused
from reconciler.render import FIELD_MANAGER, manifest_ref
from shared.domain import annotations as ann
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.manifests.batch import Job
from shared.domain.resources import PROCESSES
from shared.kube import tracing
from shared.kube.api import KubeApi
from shared.kube.client import Resource
from shared.kube.discovery import RESTMapper, UnknownKind
from shared.kube.errors import BadRequest, Forbidden, Invalid, NotFound
from shared.kube.events import EventRecorder
from shared.kube.expectations import ChildWriteExpectations
from shared.kube.meta import ObjectMeta, ObjectRef
from shared.kube.patch import annotations_patch, apply, patch_annotations, patch_status

__all__ = ["Executor", "ReleaseClaims"]

ReleaseClaims = Callable[[Process, ProcessPhase], Awaitable[object]]
"""``await release(process, phase)``: give up the claims naming ``process`` before its status write puts it
in ``phase`` (:meth:`reconciler.table_writer.TableStatusWriter.release`)."""

log = logging.getLogger(__name__)


class _Stored(msgspec.Struct):
    """The part of a written Process the executor reads back: its metadata (resourceVersion)."""

    metadata: ObjectMeta = ObjectMeta()


_STORED = msgspec.json.Decoder(_Stored)


_REFUSED = (BadRequest, Forbidden, NotFound, Invalid)
"""Answers to a child write that retrying alone does not fix (a 404 on apply: no such namespace, or a
resource gone from the server since discovery)."""


@contextlib.contextmanager
def _refusals(verb: str, ref: ChildRef) -> Iterator[None]:
    """Re-raise a refused write of ``ref`` (:data:`_REFUSED`, :class:`UnknownKind`) as :class:`WriteRefused`."""
    try:
        yield
    except UnknownKind as err:
        raise WriteRefused(verb, ref, str(err), status=404, why=KIND_NOT_SERVED) from err
    except _REFUSED as err:
        raise WriteRefused(verb, ref, f"{err.status} {err.reason}: {err.message}", status=err.status,
                           why=WRITE_REFUSED) from err


async def apply_traced_job(client: KubeApi, resource: Resource, job: Job) -> bytes:
    """Apply ``job`` with this reconcile's ``TRACEPARENT`` and the reconciler's own ``OTEL_*`` settings
    (:func:`reconciler.exports.with_traceparent`); the stored Job.

    A Job's pod template is immutable: when the Job exists already (the cache had not shown it, so the
    decision started it again) the apply is refused 422, and is then made again with the values the
    stored Job holds (none, for a Job created with tracing off), the same manifest as at its creation
    (docs/runtime.md#traces).

    Raises:
        shared.kube.errors.ApiError: the apply failed otherwise.
    """
    try:
        return await apply(client, resource, with_traceparent(job, tracing.current_traceparent(),
                                                              tracing.forwarded_env()),
                           field_manager=FIELD_MANAGER)
    except Invalid:
        try:
            stored = await client.get(resource, job.metadata.name or "", job.metadata.namespace)
        except NotFound:
            raise  # the 422 was about something else
        return await apply(client, resource, with_traceparent(job, *tracing_env_of(stored)),
                           field_manager=FIELD_MANAGER)


class Executor:
    """Performs decisions for one reconciler process.

    Args:
        client: the shared API client.
        mapper: kind → resource resolution (API discovery) for children.
        recorder: Event recorder.
        metrics: domain metrics.
        release_claims: gives claims up (step 2a); None: a decision's ``release_claims`` is not performed
            (no table writer: the claims are never granted either).
        child_writes: told the resourceVersion each child apply returned, keyed by the Process's
            ``<ns>/<name>`` (docs/runtime.md#own-writes); None: not told.
    """

    def __init__(self, client: KubeApi, mapper: RESTMapper, recorder: EventRecorder,
                 metrics: ProcessMetrics, *, release_claims: ReleaseClaims | None = None,
                 child_writes: ChildWriteExpectations[Resource] | None = None) -> None:
        self.release_claims = release_claims
        self.child_writes = child_writes
        self.client = client
        self.mapper = mapper
        self.recorder = recorder
        self.metrics = metrics

    async def execute(self, process: Process, decision: Decision, *, guard: str | None = None) -> str | None:
        """Carry out ``decision`` for ``process`` (the object it was decided on), in the module's order.

        Args:
            guard: the ``metadata.resourceVersion`` the status write must still find (None: unguarded).

        Returns:
            The resourceVersion the status write left the Process at (None: no status write), so the
            controller can tell when its cache shows this write (docs/runtime.md#own-writes).

        Raises:
            shared.kube.errors.Conflict: ``guard`` is stale (nothing after the status write was done), or the
                claims release kept losing its race (nothing after it was done).
            reconciler.refusals.WriteRefused: a child's apply or delete was answered 400/403/404/422, or its
                kind is not served (nothing after it was done; docs/behaviour.md#write-failures).
            shared.kube.errors.ApiError: another write failed; the controller backs off and retries the
                whole reconcile, which decides again from fresh state.
        """
        ns, name = process.metadata.namespace or "default", process.metadata.name or ""
        for manifest in decision.apply:
            with _refusals("apply", manifest_ref(manifest)):
                resource = await self.mapper.resource_for(manifest.api_version, manifest.kind)
                if tracing.enabled and isinstance(manifest, Job):
                    applied = await apply_traced_job(self.client, resource, manifest)
                else:
                    applied = await apply(self.client, resource, manifest, field_manager=FIELD_MANAGER)
            if self.child_writes is not None:
                self.child_writes.wrote(f"{ns}/{name}", resource, _STORED.decode(applied).metadata.resource_version)
        for ref in decision.delete:
            with _refusals("delete", ref):
                resource = await self.mapper.resource_for(ref.api_version, ref.kind)
                with contextlib.suppress(NotFound):
                    await self.client.delete(resource, ref.name, ref.namespace if resource.namespaced else None)
        if decision.release_claims is not None and self.release_claims is not None:
            await self.release_claims(process, decision.release_claims)
        for child in decision.signal_children:
            with contextlib.suppress(NotFound):
                await patch_annotations(self.client, PROCESSES, ObjectRef(child.namespace, child.name),
                                        {ann.SIGNAL: child.signal.value})

        if decision.suspended is not None:
            # One main-resource write: the one-shot signal is stripped by the write that applies it.
            body: dict[str, object] = annotations_patch(decision.annotations) if decision.annotations else {}
            body["spec"] = {"suspended": decision.suspended}
            await self.client.merge_patch(PROCESSES, name, body, ns)
        elif decision.annotations:
            await patch_annotations(self.client, PROCESSES, process, decision.annotations)
        written: str | None = None
        if decision.status is not None:
            stored = await patch_status(self.client, PROCESSES, ns, name, decision.status, current=process,
                                        resource_version=guard)
            if stored is not None:
                written = _STORED.decode(stored).metadata.resource_version

        if decision.signal is not None:
            self.metrics.signals.labels(decision.signal.signal, decision.signal.outcome).inc()
        for t in decision.transitions:
            self.metrics.transition(t.source, t.target, t.seconds_in_source)
        for event in decision.events:
            await self.recorder.emit(PROCESSES, process, event)

        if decision.delete_self:
            with contextlib.suppress(NotFound):
                await self.client.delete(PROCESSES, name, ns)
        return written
