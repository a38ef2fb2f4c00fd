"""The Flux stand-in writes the status real Flux writes where tatara depends on it
(docs/architecture.md#the-flux-stand-in): observedGeneration -1 until a first success, Stalled only for terminal
failures, nothing on an OCI HelmRepository."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from kubernetes_asyncio import client

from shared.domain.resources import HELM_RELEASES, HELM_REPOSITORIES, KUSTOMIZATIONS
from shared.kube.client import KubeClient, Resource
from tests.support.kube import install_crds_async, third_party_crds, wait_for
from tools.controlplane import LocalControlPlane
from tools.standins.flux import Failure, FluxStandIn

pytestmark = pytest.mark.anyio


def kustomization(name: str) -> dict[str, Any]:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": {"name": name},
            "spec": {"interval": "5m", "path": "./", "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": "repo"}}}


def helmrelease(name: str) -> dict[str, Any]:
    return {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": {"name": name},
            "spec": {"interval": "5m", "chart": {"spec": {
                "chart": "podinfo", "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}}}}


def helmrepository(name: str, type_: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"interval": "5m", "url": f"oci://127.0.0.1:5000/{name}" if type_ else "https://x.invalid"}
    if type_:
        spec["type"] = type_
    return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository", "metadata": {"name": name},
            "spec": spec}


async def status(kc: KubeClient, resource: Resource, ns: str, name: str) -> dict[str, Any]:
    obj = msgspec.json.decode(await kc.get(resource, name, ns))
    return dict(obj.get("status") or {})


async def conditions(kc: KubeClient, resource: Resource, ns: str, name: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (await status(kc, resource, ns, name)).get("conditions", [])}


async def test_marks_ready_on_success_and_stalled_on_failure(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str
) -> None:
    await install_crds_async(kube, third_party_crds())
    kc = await KubeClient.from_kubeconfig(control_plane.kubeconfig)

    def verdict(resource: Resource, obj: dict[str, Any]) -> Failure | None:
        return Failure("InstallFailed", stalled="RetriesExceeded") if obj["metadata"]["name"] == "broken" else None

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
            assert (broken["Stalled"]["status"], broken["Stalled"]["reason"]) == ("True", "RetriesExceeded")
            # Flux moves observedGeneration on success only: -1 for the one that never succeeded
            assert (await status(kc, HELM_RELEASES, namespace, "broken"))["observedGeneration"] == -1
            assert (await status(kc, KUSTOMIZATIONS, namespace, "apps"))["observedGeneration"] == 1
            tg.cancel_scope.cancel()
    finally:
        await kc.close()


async def test_a_retried_failure_is_not_stalled_and_keeps_observed_generation_until_it_succeeds(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str
) -> None:
    await install_crds_async(kube, third_party_crds())
    kc = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    secret_exists = False

    def verdict(resource: Resource, obj: dict[str, Any]) -> str | None:
        # kustomize-controller without the decryption Secret: Ready=False BuildFailed, retried
        return None if secret_exists else "BuildFailed"

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(FluxStandIn(kc, namespace=namespace, verdict=verdict, retry=0.2).run)
            await kc.create(KUSTOMIZATIONS, kustomization("apps"), namespace)

            async def failing() -> dict[str, dict[str, Any]] | None:
                conds = await conditions(kc, KUSTOMIZATIONS, namespace, "apps")
                return conds if conds.get("Ready", {}).get("status") == "False" else None

            conds = await wait_for(failing, timeout=30, what="Ready=False on the Kustomization")
            assert conds["Ready"]["reason"] == "BuildFailed"
            assert conds["Ready"]["observedGeneration"] == 1
            assert "Stalled" not in conds
            assert conds["Reconciling"]["status"] == "True"
            assert (await status(kc, KUSTOMIZATIONS, namespace, "apps"))["observedGeneration"] == -1

            secret_exists = True

            async def succeeded() -> dict[str, Any] | None:
                st = await status(kc, KUSTOMIZATIONS, namespace, "apps")
                return st if st.get("observedGeneration") == 1 else None

            st = await wait_for(succeeded, timeout=30, what="the retry to succeed")
            ready = {c["type"]: c for c in st["conditions"]}["Ready"]
            assert (ready["status"], ready["reason"]) == ("True", "ReconciliationSucceeded")
            tg.cancel_scope.cancel()
    finally:
        await kc.close()


async def test_an_oci_helmrepository_gets_no_status(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str
) -> None:
    await install_crds_async(kube, third_party_crds())
    kc = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(FluxStandIn(kc, namespace=namespace).run)
            await kc.create(HELM_REPOSITORIES, helmrepository("charts", "oci"), namespace)
            await kc.create(HELM_REPOSITORIES, helmrepository("classic", None), namespace)

            async def classic_ready() -> bool:
                return "Ready" in await conditions(kc, HELM_REPOSITORIES, namespace, "classic")

            # the classic one, created after it, is judged: the stand-in has seen both
            await wait_for(classic_ready, timeout=30, what="the default-type HelmRepository to be marked")
            # only what the CRD defaults (observedGeneration -1): no condition, as source-controller
            assert await status(kc, HELM_REPOSITORIES, namespace, "charts") == {"observedGeneration": -1}
            tg.cancel_scope.cancel()
    finally:
        await kc.close()
