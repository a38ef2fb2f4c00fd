"""A faithful stand-in for the Flux controllers, which cannot run here (docs/architecture.md#the-tooling).

It watches Kustomizations, HelmReleases, OCIRepositories (and GitRepositories /
HelmRepositories) and, as kustomize-, helm- and source-controller do, writes their
``status``: ``observedGeneration`` and the ``Ready`` condition — True with reason
``ReconciliationSucceeded`` after an optional delay, or, when the test's ``verdict``
callback names a failure for an object, ``Ready=False`` plus ``Stalled=True`` with that
reason (Flux's terminal-failure shape). HelmReleases also get a ``Released=True``
condition on success, as helm-controller sets it.

Built on our own runtime (informers + controller), so it also dogfoods it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import anyio
import msgspec
from prometheus_client import CollectorRegistry

from shared.domain.resources import FLUX_KINDS, HELM_RELEASES, KUSTOMIZATIONS, OCI_REPOSITORIES
from shared.kube.client import KubeClient, Resource
from shared.kube.controller import Controller, Request, Result
from shared.kube.informer import Informer
from shared.kube.meta import ObjectMeta
from shared.kube.metrics import RuntimeMetrics
from shared.kube.patch import patch_status

# KUSTOMIZATIONS and OCI_REPOSITORIES are re-exported only for the tests that still import the Flux
# kinds from here; their home is shared.domain.resources.
__all__ = ["HELM_RELEASES", "KUSTOMIZATIONS", "OCI_REPOSITORIES", "FluxObject", "FluxStandIn", "Verdict",
           "desired_status"]

Verdict = Callable[[Resource, dict[str, Any]], str | None]
"""``verdict(resource, object) -> None`` (succeed) or a failure reason, e.g. ``"InstallFailed"``."""


class FluxObject(msgspec.Struct):
    metadata: ObjectMeta
    status: dict[str, Any] = {}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def desired_status(resource: Resource, generation: int, failure: str | None, now: str) -> dict[str, Any]:
    """The status Flux would write for an object at ``generation`` (success, or terminal ``failure``)."""
    if failure is None:
        conditions = [{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded",
                       "message": "Applied revision: stand-in", "lastTransitionTime": now,
                       "observedGeneration": generation}]
        if resource == HELM_RELEASES:
            conditions.append({"type": "Released", "status": "True", "reason": "InstallSucceeded",
                               "message": "Helm install succeeded", "lastTransitionTime": now,
                               "observedGeneration": generation})
    else:
        conditions = [
            {"type": "Ready", "status": "False", "reason": failure, "message": f"stand-in failure: {failure}",
             "lastTransitionTime": now, "observedGeneration": generation},
            {"type": "Stalled", "status": "True", "reason": failure, "message": f"stand-in failure: {failure}",
             "lastTransitionTime": now, "observedGeneration": generation},
        ]
    return {"observedGeneration": generation, "conditions": conditions}


class FluxStandIn:
    """Run with ``await stand_in.run()`` inside a task group; cancel to stop.

    Args:
        client: API client.
        namespace: watch one namespace (None: all).
        delay: seconds before an object is marked (simulates Flux's work).
        verdict: decides success or failure per object (default: everything succeeds).
    """

    def __init__(self, client: KubeClient, *, namespace: str | None = None, delay: float = 0.0,
                 verdict: Verdict | None = None) -> None:
        self.client = client
        self.namespace = namespace
        self.delay = delay
        self.verdict: Verdict = verdict or (lambda resource, obj: None)
        self.marked = 0

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            for resource in FLUX_KINDS:
                informer: Informer[FluxObject] = Informer(self.client, resource, FluxObject,
                                                          namespace=self.namespace)
                controller = Controller(f"flux-standin-{resource.plural}", informer,
                                        self._reconciler(resource, informer),
                                        metrics=RuntimeMetrics(CollectorRegistry()))
                tg.start_soon(informer.run)
                tg.start_soon(controller.run)

    def _reconciler(self, resource: Resource, informer: Informer[FluxObject]) -> Any:
        async def reconcile(request: Request) -> Result:
            obj = informer.get(str(request))
            if obj is None or obj.metadata.deletion_timestamp is not None:
                return Result.done()
            generation = obj.metadata.generation or 1
            if obj.status.get("observedGeneration") == generation:
                return Result.done()
            if self.delay:
                await anyio.sleep(self.delay)
            raw = msgspec.json.decode(msgspec.json.encode(obj), type=dict[str, Any])
            failure = self.verdict(resource, raw)
            await patch_status(self.client, resource, request.namespace or "", request.name,
                               desired_status(resource, generation, failure, _now()))
            self.marked += 1
            return Result.done()

        return reconcile

