"""``tatara up`` on the local node (its default; docs/architecture.md#tatara-up-on-the-local-node).

The local plane starts as a cluster with a real node (:mod:`tools.node_stack`): the project's image is built
from its ``Containerfile`` and imported, both charts are installed with ``helm install --wait`` (two replicas
each, leader election real), and the export Jobs the reconciler creates are run as pods by the real Job
controller. Pods reach the NATS server and the HTTP receiver on the host's loopback at the node IP, so the
examples' exports are pointed there. What is shown while it runs: the controllers' pods (``kubectl get pods
-n tatara-system``) and the export Jobs' pods.

``--fast`` keeps the earlier mode instead: the reconcilers as local subprocesses and the Job runner stand-in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

import anyio
import msgspec

from shared.domain.labels import ROLE, ROLE_EXPORT
from shared.kube.client import KubeClient, Resource
from tools.controlplane.build import KUBERNETES_VERSION
from tools.controlplane.nodenet import NODE_IP, NODE_NAME
from tools.node_stack import (
    CHARTS,
    POOL_RECONCILER,
    RECONCILER,
    RELEASE_NAMESPACE,
    ChartInstallError,
    NodeStack,
    pool_values,
    reconciler_values,
)
from tools.ops import format_table

PODS: Final = Resource("", "v1", "pods", "Pod")
DEPLOYMENTS: Final = Resource("apps", "v1", "deployments", "Deployment")
HELM_RELEASE_LABEL: Final = "helm.toolkit.fluxcd.io/name"
"""The label helm-controller puts on what a HelmRelease installs."""
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
"""The label the Job controller puts on a Job's pods."""


def node_sink_urls(nats_port: int, receiver_port: int) -> tuple[str, str]:
    """The NATS and HTTP receiver URLs as pods see them: the node IP, where the host's loopback ports are
    forwarded (:mod:`tools.controlplane.netns_proxy`)."""
    return f"nats://{NODE_IP}:{nats_port}", f"http://{NODE_IP}:{receiver_port}"


def node_otlp_endpoint(otlp_http_port: int) -> str:
    """Jaeger's OTLP/HTTP receiver as pods see it: the node IP, where the host's loopback port is forwarded."""
    return f"http://{NODE_IP}:{otlp_http_port}"


def tracing_values(otlp_endpoint: str) -> dict[str, Any]:
    """Both charts' ``tracing`` block for ``tatara up``: every new trace kept (ratio 1), so each example's
    reconciles and export Jobs can be found in Jaeger; parent-based, as the charts' default."""
    return {"tracing": {"otlpEndpoint": otlp_endpoint, "sampler": "parentbased_traceidratio", "samplerRatio": "1"}}


async def install_controllers(stack: NodeStack, export_namespaces: Sequence[str], *,
                              otlp_endpoint: str | None = None) -> list[str]:
    """``helm install --wait`` both charts with the built image (tracing to ``otlp_endpoint`` when given); one
    line per release for ``tatara up`` to print.

    Raises:
        tools.node_stack.ChartInstallError: a release did not roll out.
    """
    tracing = tracing_values(otlp_endpoint) if otlp_endpoint else {}
    releases = ((RECONCILER, {**reconciler_values(stack.image, export_namespaces), **tracing}),
                (POOL_RECONCILER, {**pool_values(stack.image), **tracing}))
    failures: list[ChartInstallError] = []

    async def install(chart: str, values: dict[str, Any]) -> None:
        try:
            await anyio.to_thread.run_sync(partial(stack.install, chart, values))
        except ChartInstallError as err:  # kept, so the caller gets the error itself, not a group of one
            failures.append(err)

    async with anyio.create_task_group() as tg:  # both at once: each waits mostly on its pods' readiness
        for chart, values in releases:
            tg.start_soon(install, chart, values)
    if failures:
        raise failures[0]
    return [f"helm release {chart} installed in {RELEASE_NAMESPACE}: image {stack.image}, "
            f"{values['replicaCount']} replicas (leader election on)" for chart, values in releases]


async def flux_workloads(client: KubeClient, namespaces: Sequence[str]) -> list[str]:
    """``<namespace>/<name> <ready>/<replicas>`` of every Deployment helm-controller installed in
    ``namespaces``, sorted: the examples' charts as real workloads on the node."""
    found = []
    for namespace in namespaces:
        page = msgspec.json.decode(await client.list(DEPLOYMENTS, namespace, label_selector=HELM_RELEASE_LABEL))
        for item in page.get("items") or []:
            status = item.get("status") or {}
            found.append(f"{namespace}/{item['metadata']['name']} "
                         f"{status.get('readyReplicas', 0)}/{(item.get('spec') or {}).get('replicas', 1)}")
    return sorted(found)


@dataclass
class PodRow:
    """One pod on screen, as ``kubectl get pods`` shows it."""

    namespace: str
    name: str
    ready: str
    status: str
    restarts: int
    node: str

    @classmethod
    def of(cls, pod: dict[str, Any]) -> PodRow:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        containers = status.get("containerStatuses") or []
        ready = sum(1 for c in containers if c.get("ready"))
        waiting = [c["state"]["waiting"].get("reason", "") for c in containers
                   if (c.get("state") or {}).get("waiting")]
        shown = ("Terminating" if meta.get("deletionTimestamp")
                 else waiting[0] if waiting else str(status.get("phase", "-")))
        return cls(meta.get("namespace", ""), meta["name"], f"{ready}/{len(spec.get('containers') or [])}", shown,
                   sum(int(c.get("restartCount", 0)) for c in containers), spec.get("nodeName") or "-")


@dataclass
class PodsView:
    """The controllers' pods and the export Jobs' pods (rows of Jobs' pods stay once seen: an ephemeral
    Process's Jobs are deleted with it)."""

    export_namespaces: list[str]
    controllers: list[PodRow] = field(default_factory=list)
    jobs: dict[str, PodRow] = field(default_factory=dict)

    async def refresh(self, client: KubeClient) -> None:
        pods = msgspec.json.decode(await client.list(PODS, RELEASE_NAMESPACE))["items"]
        self.controllers = sorted((PodRow.of(p) for p in pods), key=lambda r: r.name)
        for ns in self.export_namespaces:
            found = msgspec.json.decode(await client.list(PODS, ns, label_selector=f"{ROLE}={ROLE_EXPORT}"))["items"]
            for pod in found:
                row = PodRow.of(pod)
                self.jobs[f"{ns}/{row.name}"] = row

    def render(self) -> str:
        rows = [(r.namespace, r.name, r.ready, r.status, str(r.restarts), r.node)
                for r in [*self.controllers, *sorted(self.jobs.values(), key=lambda r: (r.namespace, r.name))]]
        if not rows:
            return ""
        return format_table(("NAMESPACE", "POD", "READY", "STATUS", "RESTARTS", "NODE"), rows)

    def summary(self) -> list[dict[str, Any]]:
        return [{"namespace": r.namespace, "name": r.name, "ready": r.ready, "status": r.status,
                 "restarts": r.restarts, "node": r.node} for r in [*self.controllers, *self.jobs.values()]]


def hints(namespaces: Iterable[str], kubectl: str) -> list[str]:
    """Commands that show what runs on the node; ``kubectl`` is the binary built with the plane (the host may
    have none)."""
    out = [f"kubectl is {kubectl} ({KUBERNETES_VERSION}, built with the plane)",
           f"kubectl get pods -n {RELEASE_NAMESPACE} -o wide      # the controllers ({', '.join(CHARTS)})",
           f"kubectl logs -n {RELEASE_NAMESPACE} deploy/{RECONCILER}",
           f"kubectl get --raw /api/v1/namespaces/{RELEASE_NAMESPACE}/services/{RECONCILER}-metrics:8080/proxy/metrics",
           f"kubectl get nodes -o wide                               # {NODE_NAME}: kubelet + containerd in a sandbox"]
    out += [f"kubectl get pods -n {ns} -l {ROLE}={ROLE_EXPORT}   # the export Jobs' pods" for ns in namespaces]
    return out
