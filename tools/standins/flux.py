"""A STAND-IN for the Flux controllers, for the fast integration tier (docs/architecture.md#the-flux-stand-in).

Real Flux (source-, kustomize- and helm-controller built from their Go modules) runs in ``make run`` and
the e2e tier (:mod:`tools.flux_stack`); this stand-in only writes the ``status`` those controllers would,
faithful to them where tatara depends on it:

- success: ``Ready=True`` reason ``ReconciliationSucceeded`` and ``status.observedGeneration`` = the
  generation (HelmReleases also ``Released=True``), after an optional delay;
- a failure the test's ``verdict`` names: ``Ready=False`` with that reason and ``Reconciling=True``
  (Flux retries), ``status.observedGeneration`` left at ``-1`` until a first success (a later
  generation's failure keeps the last successful one);
- a terminal failure (:class:`Failure` with ``stalled``): as above plus ``Stalled=True`` with the
  terminal reason (e.g. helm-controller's ``RetriesExceeded``) instead of ``Reconciling``;
- an OCI HelmRepository (``spec.type: oci``): no status at all (source-controller does not reconcile one).

Every condition carries ``observedGeneration`` = the generation judged. Built on our own runtime
(informers + controller), so it also dogfoods it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import msgspec
from prometheus_client import CollectorRegistry

from shared.domain.resources import FLUX_KINDS, HELM_RELEASES, HELM_REPOSITORIES, KUSTOMIZATIONS, OCI_REPOSITORIES
from shared.kube.client import KubeClient, Resource
from shared.kube.controller import Controller, Request, Result
from shared.kube.informer import Informer
from shared.kube.meta import ObjectMeta
from shared.kube.metrics import RuntimeMetrics
from shared.kube.patch import patch_status

# KUSTOMIZATIONS and OCI_REPOSITORIES are re-exported only for the tests that still import the Flux
# kinds from here; their home is shared.domain.resources.
__all__ = ["HELM_RELEASES", "KUSTOMIZATIONS", "OCI_REPOSITORIES", "Failure", "FluxObject", "FluxStandIn",
           "Verdict", "desired_status"]

NEVER_SUCCEEDED = -1
"""``status.observedGeneration`` of a Flux object that has not yet been reconciled successfully."""


@dataclass(frozen=True)
class Failure:
    """A failure to write: ``reason`` on ``Ready=False``; ``stalled``, when set, the terminal reason of a
    ``Stalled=True`` condition (Flux gives up), else Flux keeps retrying (``Reconciling=True``)."""

    reason: str
    stalled: str | None = None


Verdict = Callable[[Resource, dict[str, Any]], "str | Failure | None"]
"""``verdict(resource, object)``: None (succeed), a retried failure's reason (``"BuildFailed"``), or a
:class:`Failure`."""


class FluxObject(msgspec.Struct):
    metadata: ObjectMeta
    spec: dict[str, Any] = {}
    status: dict[str, Any] = {}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(type_: str, status: str, reason: str, message: str, now: str, generation: int) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": now,
            "observedGeneration": generation}


def desired_status(resource: Resource, generation: int, failure: str | Failure | None, now: str,
                   observed_generation: int = NEVER_SUCCEEDED) -> dict[str, Any]:
    """The status Flux would write for an object at ``generation``: success, or ``failure`` (a retried
    reason or a :class:`Failure`); ``observed_generation`` is the object's current
    ``status.observedGeneration`` (kept on failure: Flux moves it only on success)."""
    if failure is None:
        conditions = [_condition("Ready", "True", "ReconciliationSucceeded", "Applied revision: stand-in", now,
                                 generation)]
        if resource == HELM_RELEASES:
            conditions.append(_condition("Released", "True", "InstallSucceeded", "Helm install succeeded", now,
                                         generation))
        return {"observedGeneration": generation, "conditions": conditions}
    fail = failure if isinstance(failure, Failure) else Failure(failure)
    message = f"stand-in failure: {fail.reason}"
    conditions = [_condition("Ready", "False", fail.reason, message, now, generation)]
    if fail.stalled is None:
        conditions.append(_condition("Reconciling", "True", "ProgressingWithRetry", message, now, generation))
    else:
        conditions.append(_condition("Stalled", "True", fail.stalled, f"{message} ({fail.stalled})", now,
                                     generation))
    return {"observedGeneration": observed_generation, "conditions": conditions}


def judged_generation(status: dict[str, Any]) -> int | None:
    """The generation the object's ``Ready`` condition was written for (None before any)."""
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            value = cond.get("observedGeneration")
            return value if isinstance(value, int) else None
    return None


def is_retrying(status: dict[str, Any]) -> bool:
    """True while Flux would retry: ``Reconciling=True`` next to ``Ready=False``."""
    conds = {c.get("type"): c for c in status.get("conditions") or [] if isinstance(c, dict)}
    return (conds.get("Ready") or {}).get("status") == "False" and (conds.get("Reconciling") or {}).get(
        "status") == "True"


def same_verdict(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """True when ``new`` would change nothing but transition times (so a retry writes nothing)."""
    def key(status: dict[str, Any]) -> object:
        return (status.get("observedGeneration"),
                sorted((str(c.get("type")), c.get("status"), c.get("reason"), c.get("observedGeneration"))
                       for c in status.get("conditions") or [] if isinstance(c, dict)))

    return key(old) == key(new)


def is_oci_helm_repository(resource: Resource, spec: dict[str, Any]) -> bool:
    """True for a HelmRepository of ``type: oci``, which real source-controller leaves without status."""
    return resource == HELM_REPOSITORIES and spec.get("type") == "oci"


class FluxStandIn:
    """Run with ``await stand_in.run()`` inside a task group; cancel to stop.

    Args:
        client: API client.
        namespace: watch one namespace (None: all).
        delay: seconds before an object is marked (simulates Flux's work).
        verdict: decides success or failure per object (default: everything succeeds); asked again every
            ``retry`` seconds while it names a retried failure, as Flux retries.
    """

    def __init__(self, client: KubeClient, *, namespace: str | None = None, delay: float = 0.0,
                 verdict: Verdict | None = None, retry: float = 1.0) -> None:
        self.client = client
        self.namespace = namespace
        self.delay = delay
        self.retry = retry
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
            if is_oci_helm_repository(resource, obj.spec):
                return Result.done()
            generation = obj.metadata.generation or 1
            if judged_generation(obj.status) == generation and not is_retrying(obj.status):
                return Result.done()
            if self.delay:
                await anyio.sleep(self.delay)
            raw = msgspec.json.decode(msgspec.json.encode(obj), type=dict[str, Any])
            failure = self.verdict(resource, raw)
            observed = obj.status.get("observedGeneration")
            status = desired_status(resource, generation, failure, _now(),
                                    observed if isinstance(observed, int) else NEVER_SUCCEEDED)
            if not same_verdict(obj.status, status):
                await patch_status(self.client, resource, request.namespace or "", request.name, status)
                self.marked += 1
            return Result.after(self.retry) if is_retrying(status) else Result.done()

        return reconcile
