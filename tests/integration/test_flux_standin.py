"""The Flux stand-in marks objects Ready (or stalled) as the Flux controllers would."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from kubernetes_asyncio import client

from shared.domain.resources import HELM_RELEASES, KUSTOMIZATIONS
from shared.kube.client import KubeClient, Resource
from tests.support.kube import install_crds_async, third_party_crds, wait_for
from tools.controlplane import LocalControlPlane
from tools.standins.flux import FluxStandIn

pytestmark = pytest.mark.anyio


def kustomization(name: str) -> dict[str, Any]:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": name},
            "spec": {"interval": "5m", "path": "./", "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": "repo"}}}


def helmrelease(name: str) -> dict[str, Any]:
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": name},
            "spec": {"interval": "5m", "chart": {"spec": {
                "chart": "podinfo", "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}}}}


async def conditions(kc: KubeClient, resource: Resource, ns: str, name: str) -> dict[str, dict[str, Any]]:
    obj = msgspec.json.decode(await kc.get(resource, name, ns))
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions", [])}


async def test_marks_ready_on_success_and_stalled_on_failure(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str
) -> None:
    await install_crds_async(kube, third_party_crds())
    kc = await KubeClient.from_kubeconfig(control_plane.kubeconfig)

    def verdict(resource: Resource, obj: dict[str, Any]) -> str | None:
        return "InstallFailed" if obj["metadata"]["name"] == "broken" else None

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(FluxStandIn(kc, namespace=namespace, verdict=verdict).run)
            await kc.create(KUSTOMIZATIONS, kustomization("apps"), namespace)
            await kc.create(HELM_RELEASES, helmrelease("podinfo"), namespace)
            await kc.create(HELM_RELEASES, helmrelease("broken"), namespace)

            async def all_marked() -> bool:
                apps = await conditions(kc, KUSTOMIZATIONS, namespace, "apps")
                podinfo = await conditions(kc, HELM_RELEASES, namespace, "podinfo")
                broken = await conditions(kc, HELM_RELEASES, namespace, "broken")
                return bool(apps and podinfo and broken)

            await wait_for(all_marked, timeout=30, what="the stand-in to write every status")
            apps = await conditions(kc, KUSTOMIZATIONS, namespace, "apps")
            assert (apps["Ready"]["status"], apps["Ready"]["reason"]) == ("True", "ReconciliationSucceeded")
            podinfo = await conditions(kc, HELM_RELEASES, namespace, "podinfo")
            assert podinfo["Released"]["status"] == "True"
            broken = await conditions(kc, HELM_RELEASES, namespace, "broken")
            assert (broken["Ready"]["status"], broken["Ready"]["reason"]) == ("False", "InstallFailed")
            assert broken["Stalled"]["status"] == "True"
            tg.cancel_scope.cancel()
    finally:
        await kc.close()
