"""The Process controller: caches → Observed snapshot → pure decision → executor.

One reconcile of one Process reads top to bottom here (STYLE.md, "we avoid long hops"):
:func:`ProcessReconciler.reconcile` looks the Process up in the informer cache, gathers
its owned children (Flux objects, by controller ownerReference UID), child Processes
(by parent PID) and dependencies into :class:`~reconciler.decision.Observed`, asks
:func:`reconciler.phases.decide` what to do, and hands the decision to the
:class:`~reconciler.executor.Executor`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec

from reconciler.decision import ChildState, Decision, Observed
from reconciler.executor import Executor
from reconciler.phases import decide
from reconciler.prefetch import Prefetcher
from reconciler.render import child_state
from shared.domain.api.process import Process
from shared.domain.group import GROUP
from shared.kube.client import Resource
from shared.kube.controller import Controller, Request, Result
from shared.kube.informer import Informer
from shared.kube.logcontext import log_context
from shared.kube.meta import ObjectMeta

log = logging.getLogger(__name__)

OWNER_UID = "owner-uid"
"""Index of children by their controller ownerReference's UID."""

PARENT_PID = "parent-pid"
"""Index of Processes by ``spec.identity.parent``."""


class ChildObject(msgspec.Struct):
    """A rendered child as cached: identity, metadata and status — what readiness parsing reads.

    ``spec`` is not kept: HelmRelease values can be large, and the desired spec is re-rendered
    from the Process anyway (spec/runtime-anchors.md §3 #17)."""

    apiVersion: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: dict[str, Any] = {}


def controller_owner_uids(obj: Any) -> list[str]:
    """UIDs of ``obj``'s controller ownerReferences (at most one by DESIGN §2.3)."""
    return [ref.uid for ref in obj.metadata.owner_references if ref.controller]


DEPENDS_ON = "depends-on"
"""Index of Processes by the ``<ns>/<name>`` of each Process their ``spec.dependsOn`` names."""


def dependency_refs(process: Process) -> list[str]:
    ns = process.metadata.namespace or "default"
    return [f"{dep.namespace or ns}/{dep.name}" for dep in process.spec.depends_on]


OWN_PID = "pid"
"""Index of Processes by their own ``status.pid``."""


def own_pid(process: Process) -> list[str]:
    pid = process.status.pid if process.status else None
    return [pid] if pid else []


def parent_pid(process: Process) -> list[str]:
    parent = process.spec.identity.parent if process.spec.identity else None
    return [parent] if parent else []


class _CacheView(Mapping[str, Process]):
    """Read-only ``"<ns>/<name>" → Process`` over the informer cache."""

    def __init__(self, informer: Informer[Process]) -> None:
        self._informer = informer

    def __getitem__(self, key: str) -> Process:
        found = self._informer.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._informer.keys())

    def __len__(self) -> int:
        return len(self._informer)


class ProcessReconciler:
    """Builds the Process controller on ``processes`` with ``children`` as owned secondary watches.

    Args:
        processes: informer of Processes.
        children: informers of the kinds the reconciler renders (Kustomization, HelmRelease, …).
        executor: performs decisions.
        heartbeat_seconds: Attested heartbeat / poll interval.
        decide: the pure decision (default :func:`reconciler.phases.decide`).
        clock: now (UTC), injectable for tests.
        prefetch: fetches boundary inputs the caches lack (PromQL, referenced Jobs/ConfigMaps/…); None: none.
    """

    def __init__(self, processes: Informer[Process], children: list[Informer[ChildObject]], executor: Executor,
                 *, heartbeat_seconds: float = 30.0, workers: int = 4,
                 decide: Callable[[Observed], Decision] = decide,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 prefetch: Prefetcher | None = None) -> None:
        self.processes = processes
        self.prefetch = prefetch
        self.children = children
        self.executor = executor
        self.heartbeat_seconds = heartbeat_seconds
        self.clock = clock
        self.decide = decide
        processes.add_indexer(PARENT_PID, parent_pid)
        for informer in children:
            informer.add_indexer(OWNER_UID, controller_owner_uids)
        self.controller: Controller[Process] = Controller("process", processes, self.reconcile, workers=workers)
        for informer in children:
            self.controller.owns(informer, kind="Process", group=GROUP)
        # A child Process's change (e.g. reaching Reaped) requeues its parent, found by PID.
        processes.add_indexer(OWN_PID, own_pid)
        self.controller.watches(processes, self._parents_of)
        # A Process's change requeues the Processes whose dependsOn names it (no 30 s poll).
        processes.add_indexer(DEPENDS_ON, dependency_refs)
        self.controller.watches(processes, self._dependents_of)

    def _dependents_of(self, process: Process) -> list[Request]:
        ref = f"{process.metadata.namespace or 'default'}/{process.metadata.name}"
        return [Request.of(p) for p in self.processes.by_index(DEPENDS_ON, ref)]

    def _parents_of(self, process: Process) -> list[Request]:
        return [Request.of(parent) for pid in parent_pid(process) for parent in self.processes.by_index(OWN_PID, pid)]

    def observe(self, process: Process) -> Observed:
        """The snapshot of ``process``'s world from the caches (no API calls)."""
        children: dict[Any, ChildState] = {}
        uid = process.metadata.uid
        if uid:
            for informer in self.children:
                for child in informer.by_index(OWNER_UID, uid):
                    state = child_state(msgspec.to_builtins(child))
                    children[state.ref] = state
        pid = process.status.pid if process.status else None
        child_processes = tuple(self.processes.by_index(PARENT_PID, pid)) if pid else ()
        dependencies = {ref: self.processes.get(ref) for ref in dependency_refs(process)}
        return Observed(
            process=process, now=self.clock(), children=children, child_processes=child_processes,
            dependencies=dependencies, processes_by_ref=_CacheView(self.processes),
            heartbeat_seconds=self.heartbeat_seconds,
        )

    async def reconcile(self, request: Request) -> Result:
        process = self.processes.get(str(request))
        if process is None:
            return Result.done()  # deleted; the finalizer kept it until Reaped, so nothing is left to do
        observed = self.observe(process)
        if self.prefetch is not None:
            prometheus, referenced = await self.prefetch.boundary_inputs(process, observed.children.keys())
            if prometheus or referenced:
                observed = dataclasses.replace(observed, prometheus=prometheus,
                                               children={**referenced, **observed.children})
        with log_context(phase=process.phase.value):
            decision = self.decide(observed)
            return await self.executor.execute(process, decision, observed.now)


def child_resources() -> list[Resource]:
    """The rendered kinds whose changes requeue their Process (Flux objects; routing objects)."""
    return [
        Resource("kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization"),
        Resource("helm.toolkit.fluxcd.io", "v2", "helmreleases", "HelmRelease"),
        Resource("source.toolkit.fluxcd.io", "v1", "ocirepositories", "OCIRepository"),
    ]
