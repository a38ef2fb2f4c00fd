"""The Process controller: caches → Observed snapshot → pure decision → executor.

One reconcile of one Process reads top to bottom here (:meth:`ProcessReconciler.reconcile`):

1. the Process from the informer cache (gone: nothing to do);
2. :func:`shared.kube.finalizer.finalize`: the finalizer goes on first while the Process
   :func:`~reconciler.phases.holds_finalizer`, and comes off once a decision is ``released``
   (Reaped); a deleting Process without it is not ours to run down;
3. the snapshot (:meth:`ProcessReconciler.observe`): owned children of every rendered kind (by
   controller ownerReference UID), export Jobs (by the same), child Processes (by parent PID),
   dependencies, the Processes by ``<ns>/<name>`` and by PID (for the dependency checks of
   docs/behaviour.md#dependencies), the ``maxConcurrent`` siblings of a Pending Process, and the boundary
   inputs and receipts the caches lack (:class:`~reconciler.prefetch.Prefetcher`);
4. the pure decision (:func:`reconciler.phases.decide`), on the cached Process (or the one the
   finalizer patch just answered): the cache never lags our own last status write here, since a
   pass waits until it shows it (docs/runtime.md#own-writes);
5. the PID, when asked for: allocated from the ProcessTable, then written by the decision
   (:func:`~reconciler.phases.pid_granted`), or the refusal decided instead
   (:func:`~reconciler.phases.pid_refused`);
6. while the decision only passes through Forking or Execing, the next phase is decided at once on
   the Process as that decision leaves it, and the decisions folded into one
   (:mod:`reconciler.fold`, docs/behaviour.md#folded-phases);
7. the :class:`~reconciler.executor.Executor` performs the writes; the status write of a decision
   that holds a new PID is guarded by the resourceVersion it was decided on, so a PID is never
   written over another one: a 409 means "decide again soon", and the sequence number won for it
   stays unused (a gap, never a duplicate: docs/divergences.md#pid-allocation).

Two expectations bridge the lag between our own writes and the caches (as Kubernetes' ReplicaSet
controller does), each a :class:`shared.kube.expectations.Expectations` on the reconciler's injected
monotonic clock, standing for at most :data:`EXPECTATION_SECONDS`: an export Job just applied counts as
running until the Job cache has shown it, and a Process just admitted out of Pending counts as holding
its ``maxConcurrent`` slot until the Process cache shows it past Pending. The caches' indices, predicates
and views are :mod:`reconciler.caches`. Pending decisions of capped Processes run one at a time, so two of them
never take the last slot together (docs/behaviour.md#maxconcurrent).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Final

import anyio

from reconciler.caches import (
    CLAIM_APP,
    CLAIM_KEY,
    CONCURRENCY,
    DEPENDS_ON,
    OWN_PID,
    OWN_SEQUENCE,
    OWNER_UID,
    PARENT_PID,
    STABLE_HOST,
    CacheView,
    ChildObject,
    PidView,
    RouteView,
    RoutingChildObject,
    child_document,
    claim_apps,
    claims_moved,
    claims_of,
    concurrency_group,
    controller_owner_uids,
    dependency_refs,
    leaves_slot,
    own_pid,
    own_sequence,
    parent_pid,
    route_gone,
    stable_hosts,
)
from reconciler.cel import activation
from reconciler.cel_runner import CelRunner, expressions
from reconciler.children import ChildRef, ChildState, child_state
from reconciler.claims import bid_keys, process_ref
from reconciler.concurrency import Sibling, concurrency_key, sibling_of
from reconciler.decision import Decision, Observed
from reconciler.executor import Executor
from reconciler.exports import export_index
from reconciler.fold import MAX_STEPS, chained, continues, passed
from reconciler.phases import TICK, decide, holds_finalizer, pid_granted, pid_refused
from reconciler.pid import PidRefused
from reconciler.prefetch import Prefetcher, conditions_for_phase
from reconciler.refusals import WriteRefused, refusal_decision
from reconciler.routing import ROUTING_KINDS
from shared.domain import finalizers as fin
from shared.domain import labels
from shared.domain.api.codec import decode_process
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.table import PROCESS_TABLE_NAME, ClaimRecord, ProcessTable
from shared.domain.group import GROUP
from shared.domain.manifests.batch import Job, ObservedJob
from shared.domain.resources import PROCESSES
from shared.kube import tracing
from shared.kube.api import KubeApi
from shared.kube.controller import Controller, Request, Result
from shared.kube.errors import Conflict
from shared.kube.expectations import LAG_REQUEUE_SECONDS, Expectations, WriteExpectations
from shared.kube.finalizer import Apply, Cleanup, Outcome, finalize
from shared.kube.informer import Informer, WatchEventType
from shared.kube.logcontext import log_context
from shared.kube.meta import ObjectMeta
from shared.kube.workqueue import Clock

__all__ = ["CONFLICT_REQUEUE", "ChildObject", "PidAllocator", "ProcessReconciler", "RoutingChildObject", "claim_apps",
           "claims_moved", "route_gone", "stable_hosts"]

log = logging.getLogger(__name__)

CONFLICT_REQUEUE: Final = TICK
"""Seconds before deciding again when a guarded status write met a newer object (409)."""

EXPECTATION_SECONDS: Final = 30.0
"""How long an expectation (a Job applied, a Process admitted) stands in for a cache that has not
caught up; after that the cache is believed."""

PidAllocator = Callable[[Process], Awaitable[str]]
"""``await allocate(process) -> pid``, raising :class:`~reconciler.pid.PidRefused` (the ProcessTable in the binary)."""


class ProcessReconciler:
    """The Process controller on ``processes``; :meth:`watch_children` adds the owned child kinds.

    Args:
        client: the shared API client (finalizer writes).
        processes: informer of Processes.
        executor: performs decisions.
        allocate_pid: allocates a PID for a Process.
        heartbeat_seconds: Attested heartbeat / poll interval.
        workers: concurrent reconciles.
        decide: the pure decision (default :func:`reconciler.phases.decide`).
        clock: now (UTC), injectable for tests.
        prefetch: fetches boundary inputs the caches lack (PromQL, referenced Jobs/ConfigMaps/…); None: none.
        jobs: informer of export Jobs (label ``tatara.pleme.io/role=export``); None: no export Jobs seen.
        cel: runs the Cel conditions (default: a :class:`~reconciler.cel_runner.CelRunner` with its limits).
        monotonic: monotonic time of the work queue and of the expectations (default: the process's).
    """

    def __init__(self, client: KubeApi, processes: Informer[Process], executor: Executor,
                 allocate_pid: PidAllocator, *, heartbeat_seconds: float = 30.0, workers: int = 4,
                 decide: Callable[[Observed], Decision] = decide,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 prefetch: Prefetcher | None = None, jobs: Informer[ObservedJob] | None = None,
                 cel: CelRunner | None = None, monotonic: Clock | None = None,
                 every_process: Informer[Process] | None = None) -> None:
        self.client = client
        self.lookups = every_process if every_process is not None else processes  # an empty Informer is falsy
        """Where a Process named by another is read from (``dependsOn``, a ProcessPhase boundary, the parent PID;
        docs/architecture.md#cross-shard-reads): the unselected
        cache of every Process on a sharded instance, else ``processes``."""
        self.cel = cel or CelRunner()
        self.processes = processes
        self.executor = executor
        self.allocate_pid = allocate_pid
        self.heartbeat_seconds = heartbeat_seconds
        self.decide = decide
        self.clock = clock
        self.prefetch = prefetch
        self.children: list[Informer[ChildObject]] = []
        self.routes: list[Informer[ChildObject]] = []
        """The routing informers (Ingress, DNSEndpoint), indexed by :data:`STABLE_HOST`."""
        processes.add_indexer(CLAIM_APP, claim_apps)
        self.claims: Callable[[], Mapping[str, ClaimRecord]] = dict
        """The stored ``ProcessTable.status.claims`` (:meth:`watch_claims`; none until then)."""
        processes.add_indexer(PARENT_PID, parent_pid)
        self.controller: Controller[Process] = Controller("process", processes, self.reconcile, workers=workers,
                                                          clock=monotonic)
        # A child Process's change (e.g. reaching Reaped) requeues its parent, found by PID.
        processes.add_indexer(OWN_PID, own_pid)
        processes.add_indexer(OWN_SEQUENCE, own_sequence)
        if every_process is not None:
            every_process.add_indexer(OWN_PID, own_pid)
        # another shard's Process is read, never queued: the handlers look up our own shard's index only
        self.controller.watches(self.lookups, self._parents_of)
        # A Process's change (e.g. getting its PID) requeues the Processes still waiting for a PID under
        # it: a ParentNotFound stall ends when the parent appears (docs/behaviour.md#dependencies).
        self.controller.watches(self.lookups, self._orphans_of)
        # A Process's change requeues the Processes whose dependsOn names it (no 30 s poll).
        processes.add_indexer(DEPENDS_ON, dependency_refs)
        self.controller.watches(self.lookups, self._dependents_of)
        # A Process leaving its maxConcurrent slot (Reaped, deleted) wakes the Pending ones of its group.
        processes.add_indexer(CONCURRENCY, concurrency_group)
        self.controller.watches(processes, self._waiting_siblings_of, predicates=(leaves_slot,))
        self._gate = anyio.Lock()
        self._own_writes = WriteExpectations(monotonic)
        """Our last status write per Process, until the cache shows it (docs/runtime.md#own-writes)."""
        self._admitted: Expectations[str, None] = Expectations(EXPECTATION_SECONDS, monotonic)
        """``<ns>/<name>`` of the capped Processes this replica wrote Forking out of Pending, until the
        cache shows them past Pending."""
        # An export Job's change (created, finished, deleted) requeues its Process.
        self.jobs = jobs
        self._expected_jobs: Expectations[tuple[str, str], tuple[str, int]] = Expectations(EXPECTATION_SECONDS,
                                                                                            monotonic)
        """``(ns, Job name)`` → (owner uid, export index) of the export Jobs applied, until the Job cache
        has shown them."""
        if jobs is not None:
            jobs.add_indexer(OWNER_UID, controller_owner_uids)
            # before the owner is queued: a Job seen once ends its expectation, even if it is deleted
            # before any pass reads the cache (it is then lost, not still on its way)
            jobs.add_handler(self._job_seen)
            self.controller.owns(jobs, kind="Process", group=GROUP, urgent=True, cached_only=True)

    def watch_children(self, informer: Informer[ChildObject]) -> None:
        """Treat ``informer``'s objects as children: in the snapshot by owner UID, and a change of one
        requeues its Process (its controller ownerReference). Call before the controller runs."""
        informer.add_indexer(OWNER_UID, controller_owner_uids)
        # urgent: a child's Ready must reach its owner's next phase write without queueing behind new
        # Processes (docs/runtime.md#work-queue)
        # cached_only: a sharded instance watches every shard's children; another shard's owner is not its to queue
        self.controller.owns(informer, kind="Process", group=GROUP, urgent=True, cached_only=True)
        self.children.append(informer)
        if (informer.resource.api_version, informer.resource.kind) in ROUTING_KINDS:
            # a stable pair going wakes the other bidders of its app: a new holder's pair waits for it
            informer.add_indexer(STABLE_HOST, stable_hosts)
            self.controller.watches(informer, self._bidders_of_route, predicates=(route_gone,))
            self.routes.append(informer)

    def _bidders_of_route(self, child: ChildObject) -> list[Request]:
        app = child.metadata.labels.get(labels.APP)
        if not stable_hosts(child) or not app:
            return []
        owners = set(controller_owner_uids(child))
        return [Request.of(p) for p in self.processes.by_index(CLAIM_APP, app) if p.metadata.uid not in owners]

    def watch_claims(self, tables: Informer[ProcessTable], fleet_cluster: str,
                     table_name: str = PROCESS_TABLE_NAME) -> None:
        """Read the claims of table ``table_name`` from ``tables`` into every snapshot, and requeue the
        bidders of each key when the claims change (a holder that lost its stable name deletes its
        stable children, the new holder applies its own: docs/behaviour.md#stable-name-claims). Call
        before the controller runs."""
        self.claims = lambda: claims_of(tables.get(table_name))
        self.processes.add_indexer(CLAIM_KEY, lambda p: bid_keys(p, fleet_cluster))

        def bidders(table: ProcessTable) -> list[Request]:
            if table.metadata.name != table_name:
                return []
            return [Request.of(p) for key in claims_of(table) for p in self.processes.by_index(CLAIM_KEY, key)]

        self.controller.watches(tables, bidders, predicates=(claims_moved,))

    def _dependents_of(self, process: Process) -> list[Request]:
        ref = f"{process.metadata.namespace or 'default'}/{process.metadata.name}"
        return [Request.of(p) for p in self.processes.by_index(DEPENDS_ON, ref)]

    def _orphans_of(self, process: Process) -> list[Request]:
        return [Request.of(child) for pid in own_pid(process) for child in self.processes.by_index(PARENT_PID, pid)
                if child.status is None or not child.status.pid]

    def _waiting_siblings_of(self, process: Process) -> list[Request]:
        return [Request.of(p) for key in concurrency_group(process) for p in self.processes.by_index(CONCURRENCY, key)
                if p.phase is ProcessPhase.PENDING and process_ref(p) != process_ref(process)]

    def _parents_of(self, process: Process) -> list[Request]:
        return [Request.of(parent) for pid in parent_pid(process) for parent in self.processes.by_index(OWN_PID, pid)]

    # -- one reconcile ----------------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        key = str(request)
        process = self.processes.get(key)
        if process is None:
            self._own_writes.forget(key)
            return Result.done()  # deleted; the finalizer kept it until Reaped, so nothing is left to do
        if self._own_writes.lagging(key, process.metadata.resource_version):
            # the cache does not show our last status write yet: deciding now would redo it. Urgent: this
            # pass was usually woken by a child, and must not then wait behind new Processes
            return Result(requeue_after=LAG_REQUEUE_SECONDS, urgent=True)
        return await finalize(self.client, PROCESSES, fin.PROCESS, process, self._converge, needed=holds_finalizer,
                              decode=decode_process)

    async def _converge(self, step: Apply[Process] | Cleanup[Process]) -> Outcome:
        """Steps 3–7 of the module docstring for the cached Process ``step.obj`` (live or deleting alike:
        the phase machine handles deletion itself); one at a time for capped Pending Processes."""
        if step.obj.phase is ProcessPhase.PENDING and concurrency_key(step.obj) is not None:
            async with self._gate:
                return await self._converge_once(step)
        return await self._converge_once(step)

    async def _converge_once(self, step: Apply[Process] | Cleanup[Process]) -> Outcome:
        process = step.obj
        observed = await self.observe(process)
        with log_context(phase=process.phase.value):
            decision, allocated = await self._decided(observed)
            if tracing.enabled:
                annotate_decision(process, decision)
            guard = process.metadata.resource_version if allocated else None
            try:
                written = await self.executor.execute(process, decision, guard=guard)
            except Conflict:
                log.debug("the Process changed since the cache showed it; deciding again in %.0f s", CONFLICT_REQUEUE)
                tracing.annotate(tatara_write_conflict=True)
                return Outcome(Result.after(CONFLICT_REQUEUE))
            except WriteRefused as refused:
                await self._surface(dataclasses.replace(observed, process=process), refused)
                raise  # the work queue's backoff retries it (docs/behaviour.md#write-failures)
            self._expect(process, decision)
            if not decision.delete_self:
                self._own_writes.wrote(process_ref(process), written)
            return Outcome(Result(requeue_after=decision.requeue_after), released=decision.released)

    async def _decided(self, observed: Observed) -> tuple[Decision, bool]:
        """The decision for ``observed``, folded through the phases it only passes through (module
        docstring, step 6), and whether it asked for a PID (its write is then guarded)."""
        decision = self.decide(observed)
        allocated = decision.allocate_pid
        decision = step = await self._with_pid(observed, decision)
        for _ in range(MAX_STEPS - 1):
            if not continues(step):
                break
            assert step.status is not None
            observed = dataclasses.replace(observed, process=passed(observed.process, step.status))
            step = self.decide(observed)
            allocated = allocated or step.allocate_pid
            step = await self._with_pid(observed, step)
            decision = chained(decision, step)
        return decision, allocated

    async def _surface(self, observed: Observed, refused: WriteRefused) -> None:
        """Write the refusal on the Process (a stall condition, its message, a Warning Event)."""
        written = await self.executor.execute(observed.process, refusal_decision(observed, refused))
        self._own_writes.wrote(process_ref(observed.process), written)

    def _expect(self, process: Process, decision: Decision) -> None:
        """Remember what ``decision`` wrote that the caches will show only later."""
        for manifest in decision.apply:
            if isinstance(manifest, Job):
                index = export_index(ObservedJob(metadata=manifest.metadata))
                if index is not None:
                    key = (manifest.metadata.namespace or "default", manifest.metadata.name or "")
                    self._expected_jobs.expect(key, (process.metadata.uid or "", index))
        admitted = (ProcessPhase.PENDING, ProcessPhase.FORKING)
        if any((t.source, t.target) == admitted for t in decision.transitions) and concurrency_key(process) is not None:
            self._admitted.expect(process_ref(process), None)

    async def _with_pid(self, observed: Observed, decision: Decision) -> Decision:
        """``decision`` with its PID, or the refusal instead; unchanged when it asks for none."""
        if not decision.allocate_pid:
            return decision
        try:
            pid = await self.allocate_pid(observed.process)
        except PidRefused as refused:
            return pid_refused(observed, decision, refused)
        return pid_granted(decision, observed.process, pid)

    async def observe(self, process: Process) -> Observed:
        """The snapshot of ``process``'s world: the caches, plus the boundary inputs they lack."""
        children: dict[ChildRef, ChildState] = {}
        uid = process.metadata.uid
        if uid:
            for informer in self.children:
                for child in informer.by_index(OWNER_UID, uid):
                    state = child_state(child_document(informer.resource, child))
                    children[state.ref] = state
        pid = process.status.pid if process.status else None
        export_jobs = self._export_jobs(process)
        observed = Observed(
            process=process, now=self.clock(), children=children,
            child_processes=tuple(self.processes.by_index(PARENT_PID, pid)) if pid else (),
            dependencies={ref: self.lookups.get(ref) for ref in dependency_refs(process)},
            processes_by_ref=CacheView(self.lookups), processes_by_pid=PidView(self.lookups),
            claims=self.claims(), routes=RouteView(self.routes), heartbeat_seconds=self.heartbeat_seconds,
            export_jobs=export_jobs,
            siblings=self._siblings(process),
            sequence_holders=tuple(other for seq in own_sequence(process)
                                   for other in self.processes.by_index(OWN_SEQUENCE, seq)
                                   if other.metadata.uid != process.metadata.uid),
        )
        if self.prefetch is not None:
            prometheus, referenced = await self.prefetch.boundary_inputs(process, children.keys())
            receipts = await self.prefetch.release_inputs(process, export_jobs)
            warnings = await self.prefetch.job_warnings(process, export_jobs)
            if prometheus or referenced or receipts or warnings:
                observed = dataclasses.replace(observed, prometheus=prometheus, export_job_warnings=warnings,
                                               children={**receipts, **referenced, **children})
        return await self._with_cel(observed)

    async def _with_cel(self, observed: Observed) -> Observed:
        """``observed`` with the results of its phase's Cel expressions, run by :attr:`cel` in a bounded
        worker over the finished snapshot (docs/behaviour.md#cel-conditions)."""
        sources = expressions(conditions_for_phase(observed.process))
        if not sources:
            return dataclasses.replace(observed, cel={})
        variables = activation(observed.process, observed.children, observed.child_processes, observed.now)
        return dataclasses.replace(observed, cel=await self.cel.evaluate_all(sources, variables))

    def _job_seen(self, _event: WatchEventType, _old: ObservedJob | None, job: ObservedJob) -> None:
        """The Job cache has shown this Job (or its deletion): an expectation of it is met. Without this, a
        Job deleted before any pass saw it cached would count as running until the expectation expires."""
        self._expected_jobs.met((job.metadata.namespace or "default", job.metadata.name or ""))

    def _export_jobs(self, process: Process) -> dict[int, ObservedJob]:
        """This Process's export Jobs by export index: the cached ones, plus those applied by an earlier
        pass the cache does not show yet (as Jobs that have not finished)."""
        uid = process.metadata.uid
        if not uid or self.jobs is None:
            return {}
        out: dict[int, ObservedJob] = {}
        for job in self.jobs.by_index(OWNER_UID, uid):
            index = export_index(job)
            if index is not None:
                out[index] = job
        ns = process.metadata.namespace or "default"
        for key, (owner, index) in self._expected_jobs.pending():
            if self.jobs.get(f"{key[0]}/{key[1]}") is not None:
                self._expected_jobs.met(key)
            elif owner == uid and key[0] == ns:
                out.setdefault(index, ObservedJob(metadata=ObjectMeta(name=key[1], namespace=ns)))
        return out

    def _siblings(self, process: Process) -> tuple[Sibling, ...]:
        """The other Processes of a Pending Process's ``maxConcurrent`` group; one admitted by this
        replica that the cache still shows Pending counts as Forking."""
        key = concurrency_key(process) if process.phase is ProcessPhase.PENDING else None
        if key is None:
            return ()
        me = process_ref(process)
        for ref, _ in self._admitted.pending():
            cached = self.processes.get(ref)
            if cached is None or cached.phase is not ProcessPhase.PENDING:
                self._admitted.met(ref)
        return tuple(
            sibling_of(p, ProcessPhase.FORKING if process_ref(p) in self._admitted else None)
            for p in self.processes.by_index(CONCURRENCY, key) if process_ref(p) != me)


def annotate_decision(process: Process, decision: Decision) -> None:
    """The reconcile span's account of ``decision`` (docs/runtime.md#traces): the phase before and after,
    the phases it passed through, what it writes, and its requeue."""
    after = decision.transition.target.value if decision.transition is not None else process.phase.value
    writes = [f"{len(decision.apply)} apply"] if decision.apply else []
    writes += [f"{len(decision.delete)} delete"] if decision.delete else []
    writes += ["status"] if decision.status is not None else []
    writes += [f"{len(decision.events)} event"] if decision.events else []
    tracing.annotate(tatara_phase_before=process.phase.value, tatara_phase_after=after,
                     tatara_decision=" → ".join(t.target.value for t in decision.transitions) or "no transition",
                     tatara_decision_writes=", ".join(writes) or "none",
                     tatara_decision_requeue_after=decision.requeue_after if decision.requeue_after is not None else -1)
