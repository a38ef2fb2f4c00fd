"""Every Flux object the reconciler renders, judged by real Flux (source-, kustomize-, helm-controller built from
their Go modules), with charts in a local TLS registry and manifests on a local git server
(docs/architecture.md#real-flux)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from shared.domain.resources import GIT_REPOSITORIES, HELM_RELEASES, HELM_REPOSITORIES, KUSTOMIZATIONS, PROCESSES
from shared.kube.client import CONFIG_MAPS, KubeClient, Resource
from tests.e2e.test_rbac import read
from tests.integration.reconciler.conftest import reconciler_running
from tests.support.kube import wait_for
from tools.flux_stack import FluxStack
from tools.up_flux import CHART_TEMPLATE, SECRETS, git_repository, sops_secret

pytestmark = pytest.mark.anyio

WITHIN = 120.0
"""Seconds any one step may take on a loaded 2-core machine (Flux itself answers in 1-2 s)."""

CLASSIFICATION = {"pointType": "Gate", "substrate": "Compute", "horizon": {"kind": "Bounded"}, "calm": "Monotone",
                  "dataClassification": "Internal"}


def process(name: str, intent: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "metadata": {"name": name},
            "spec": {"classification": CLASSIFICATION, "intent": intent}}


def configmap_yaml(name: str, namespace: str, value: str) -> str:
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
            f"data:\n  value: {value}\n")


async def status(kc: KubeClient, ns: str, name: str) -> dict[str, Any]:
    doc = await read(kc, PROCESSES, name, ns)
    return dict((doc or {}).get("status") or {})


def ready_condition(st: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), {})


async def phase(kc: KubeClient, ns: str, name: str, wanted: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        st = await status(kc, ns, name)
        return st if st.get("phase") == wanted else None

    result: dict[str, Any] = await wait_for(probe, timeout=WITHIN, interval=0.5, what=f"{ns}/{name} {wanted}")
    return result


async def gone(kc: KubeClient, resource: Resource, name: str, ns: str) -> None:
    async def probe() -> bool:
        return await read(kc, resource, name, ns) is None

    await wait_for(probe, timeout=WITHIN, interval=0.5, what=f"{resource.kind} {ns}/{name} gone")


async def test_a_flux_intent_applies_real_configmaps_waits_for_its_sops_secret_and_prunes_on_delete(
    fkc: KubeClient, fns: str, flux: FluxStack
) -> None:
    repo = f"infra-{uuid.uuid4().hex[:6]}"
    flux.git.commit(repo, {"apps/web/cm.yaml": configmap_yaml("web-settings", fns, "from-git")})
    await fkc.create(GIT_REPOSITORIES, git_repository(fns, repo, flux.git.url(repo)), fns)
    intent = {"flux": {"gitRepository": repo, "gitRepositoryNamespace": fns, "path": "./apps/web"}}
    async with reconciler_running(fkc, fns, standin=False):
        await fkc.create(PROCESSES, process("web", intent), fns)

        # decryptSops defaults to true and no sops-age Secret exists: kustomize-controller answers
        # Ready=False BuildFailed with observedGeneration -1; the Process says so and keeps Running
        async def says_why() -> dict[str, Any] | None:
            st = await status(fkc, fns, "web")
            return st if "sops-age" in ready_condition(st).get("message", "") else None

        st = await wait_for(says_why, timeout=WITHIN, interval=0.5, what="the missing Secret in the Process")
        assert st["phase"] == "Running"
        assert (ready_condition(st)["status"], ready_condition(st)["reason"]) == ("False", "ChildNotReady")
        assert f"Kustomization {fns}/web not ready" in st["message"]
        kustomization = await read(fkc, KUSTOMIZATIONS, "web", fns)
        assert kustomization is not None
        assert kustomization["status"]["observedGeneration"] == -1

        await fkc.create(SECRETS, sops_secret(fns), fns)
        # kustomize-controller retries a failed build after spec.retryInterval (the rendered 1m interval); a
        # user who just fixed the input asks for it now, as `flux reconcile kustomization web` does
        await fkc.merge_patch(KUSTOMIZATIONS, "web", {"metadata": {"annotations": {
            "reconcile.fluxcd.io/requestedAt": uuid.uuid4().hex}}}, fns)
        st = await phase(fkc, fns, "web", "Attested")
        cm = await read(fkc, CONFIG_MAPS, "web-settings", fns)
        assert cm is not None
        assert cm["data"] == {"value": "from-git"}
        assert cm["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == "web"

        await fkc.delete(PROCESSES, "web", fns)
        await gone(fkc, PROCESSES, "web", fns)
        await gone(fkc, KUSTOMIZATIONS, "web", fns)
        await gone(fkc, CONFIG_MAPS, "web-settings", fns)  # prune: true — Flux removes what it applied


async def test_an_aplicacao_chart_from_the_local_registry_installs_and_is_uninstalled_on_delete(
    fkc: KubeClient, fns: str, flux: FluxStack
) -> None:
    repository = f"charts-{uuid.uuid4().hex[:6]}"
    flux.push_chart(repository, "demo", "1.2.3", {"release.yaml": CHART_TEMPLATE})
    intent = {"aplicacao": {"chartRef": flux.oci_url(f"{repository}/demo"), "version": "1.2.3", "profile": "lite"}}
    async with reconciler_running(fkc, fns, standin=False):
        await fkc.create(PROCESSES, process("demo", intent), fns)
        await phase(fkc, fns, "demo", "Attested")
        release = await read(fkc, HELM_RELEASES, "demo", fns)
        assert release is not None
        released = next(c for c in release["status"]["conditions"] if c["type"] == "Released")
        assert (released["status"], released["reason"]) == ("True", "InstallSucceeded")
        cm = await read(fkc, CONFIG_MAPS, "demo-release", fns)
        assert cm is not None
        # helm-controller stamps a chart from an OCIRepository with the artifact digest: 1.2.3+<digest>
        assert cm["data"]["chart"].startswith("demo-1.2.3+")
        assert cm["data"]["profile"] == "lite"

        await fkc.delete(PROCESSES, "demo", fns)
        await gone(fkc, HELM_RELEASES, "demo", fns)
        await gone(fkc, CONFIG_MAPS, "demo-release", fns)  # helm uninstall


async def test_a_chart_that_fails_to_install_fails_the_process_with_child_stalled(
    fkc: KubeClient, fns: str, flux: FluxStack
) -> None:
    repository = f"charts-{uuid.uuid4().hex[:6]}"
    bad = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_Valid_Name\ndata: {a: b}\n"
    flux.push_chart(repository, "broken", "0.1.0", {"bad.yaml": bad})
    intent = {"aplicacao": {"chartRef": flux.oci_url(f"{repository}/broken"), "version": "0.1.0"}}
    async with reconciler_running(fkc, fns, standin=False):
        await fkc.create(PROCESSES, process("broken", intent), fns)
        st = await phase(fkc, fns, "broken", "Failed")
    assert ready_condition(st)["reason"] == "ChildStalled"
    assert f"HelmRelease {fns}/broken failed" in st["message"]
    assert st["exitCode"] == 1


async def test_a_missing_tag_keeps_the_process_running_with_the_reason_until_the_tag_is_pushed(
    fkc: KubeClient, fns: str, flux: FluxStack
) -> None:
    repository = f"charts-{uuid.uuid4().hex[:6]}"
    intent = {"aplicacao": {"chartRef": flux.oci_url(f"{repository}/late"), "version": "2.0.0"}}
    async with reconciler_running(fkc, fns, standin=False):
        await fkc.create(PROCESSES, process("late", intent), fns)

        # the HelmRelease may say "source not ready" first; the OCIRepository (first in the Process's
        # fluxResources) says why once source-controller has tried the pull
        async def says_why() -> dict[str, Any] | None:
            st = await status(fkc, fns, "late")
            return st if f"OCIRepository {fns}/late not ready" in ready_condition(st).get("message", "") else None

        st = await wait_for(says_why, timeout=WITHIN, interval=0.5, what="the missing tag in the Process")
        assert st["phase"] == "Running"
        assert ready_condition(st)["reason"] == "ChildNotReady"
        assert "OCIArtifactPullFailed" in st["message"]
        assert "2.0.0" in st["message"]

        flux.push_chart(repository, "late", "2.0.0", {"release.yaml": CHART_TEMPLATE})
        await phase(fkc, fns, "late", "Attested")
        assert await read(fkc, CONFIG_MAPS, "late-release", fns) is not None


async def test_real_source_controller_behaves_as_the_standin_says(fkc: KubeClient, fns: str, flux: FluxStack) -> None:
    """The facts tools/standins/flux.py copies, checked on the real controller: no status on an OCI
    HelmRepository; a retried failure is Ready=False + Reconciling, not Stalled, at observedGeneration -1."""
    def helm_repository(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmRepository",
                "metadata": {"name": name}, "spec": {"interval": "5m", **spec}}

    await fkc.create(HELM_REPOSITORIES, helm_repository("oci", {"type": "oci", "url": flux.oci_url("charts")}), fns)
    await fkc.create(HELM_REPOSITORIES, helm_repository("unreachable", {"url": "https://127.0.0.1:1/charts"}), fns)

    async def judged() -> dict[str, Any] | None:
        doc = await read(fkc, HELM_REPOSITORIES, "unreachable", fns)
        return doc if doc and ready_condition(doc.get("status") or {}) else None

    # created after the OCI one, judged by the same controller: by then the OCI one has been seen
    doc = await wait_for(judged, timeout=WITHIN, interval=0.5, what="the unreachable HelmRepository judged")
    conds = {c["type"]: c for c in doc["status"]["conditions"]}
    assert conds["Ready"]["status"] == "False"
    assert conds["Reconciling"]["status"] == "True"
    assert "Stalled" not in conds
    assert doc["status"]["observedGeneration"] == -1
    oci = await read(fkc, HELM_REPOSITORIES, "oci", fns)
    assert oci is not None
    assert "conditions" not in (oci.get("status") or {})
