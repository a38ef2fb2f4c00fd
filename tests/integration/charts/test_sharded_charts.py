"""Both charts with ``shards:`` (docs/architecture.md#sharding): one Deployment per shard plus the unsharded one,
each passing the binary the selector, Lease and (reconciler) table Lease Flux's convention asks for — read back
through the binary's own flag parser —, one PodDisruptionBudget per instance selecting its pods alone, a Role
covering every Lease; ``helm lint --strict`` passes, and ``helm install`` into the real API server creates them
all (server-side validation of every object, PDB selectors included)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from pool_reconciler.config import parse_config as parse_pool
from reconciler.config import parse_config as parse_reconciler
from shared.domain.sharding import SHARD_KEY, parse_selector
from tests.integration.charts.test_helm_charts import CHARTS, ROOT, _render_all, _run, install, uninstall
from tools.controlplane import LocalControlPlane

SHARDS = ("shard1", "shard2")
SETS = ("--set", "shards={shard1,shard2}", "--set", "podDisruptionBudget.enabled=true",
        "--set", "topologySpread.enabled=true", "--set", "serviceMonitor.enabled=true")
SHARD_LABEL = "tatara.pleme.io/shard"


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector object (matchLabels, matchExpressions Exists/DoesNotExist/In/NotIn) against ``labels``."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        held = {"Exists": key in labels, "DoesNotExist": key not in labels,
                "In": labels.get(key) in values, "NotIn": key not in labels or labels[key] not in values}[op]
        if not held:
            return False
    return True


def _args(deploy: dict[str, Any]) -> list[str]:
    args: list[str] = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def _linted_render(helm: Path, chart: str, *sets: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """``helm lint --strict`` passes with ``sets``; then every document ``helm template`` renders, and its
    Deployments by name."""
    lint = _run(helm, "lint", "--strict", str(ROOT / "charts" / chart), *sets)
    assert "0 chart(s) failed" in lint.stdout
    docs = _render_all(helm, chart, *sets)
    return docs, {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}


@pytest.mark.parametrize("chart", CHARTS)
def test_one_instance_per_shard_plus_the_unsharded_one(helm: Path, chart: str) -> None:
    docs, deploys = _linted_render(helm, chart, *SETS)
    base = f"rel-{chart}"
    assert set(deploys) == {base, f"{base}-shard1", f"{base}-shard2"}

    parse = parse_reconciler if chart == "tatara-reconciler" else parse_pool
    configs = {name: parse(_args(d), {}) for name, d in deploys.items()}
    # Flux's flags: a shard's key, and !key for the instance taking what no shard claims
    assert {n: c.watch_label_selector for n, c in configs.items()} == {
        base: "!sharding.fluxcd.io/key", f"{base}-shard1": "sharding.fluxcd.io/key=shard1",
        f"{base}-shard2": "sharding.fluxcd.io/key=shard2"}
    leases = {n: c.leader_election_lease_name for n, c in configs.items()}
    assert leases == {base: chart, f"{base}-shard1": f"{chart}-shard1", f"{base}-shard2": f"{chart}-shard2"}
    # every labelled object is some instance's, and exactly one's
    selectors = [parse_selector(c.watch_label_selector) for c in configs.values()]
    for labels in ({SHARD_KEY: "shard1"}, {SHARD_KEY: "shard2"}, {}):
        assert sum(s.matches(labels) for s in selectors) == 1, labels
    if chart == "tatara-reconciler":
        tables = {parse_reconciler(_args(d), {}).table_lease_name for d in deploys.values()}
        assert tables == {"tatara-reconciler-processtable"}  # one writer's Lease, the same for every shard
        leases["table"] = tables.pop()

    # one PDB per instance, and each pod is under exactly its own (the eviction API refuses a pod under two)
    pdbs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PodDisruptionBudget"}
    assert set(pdbs) == set(deploys)
    for name, deploy in deploys.items():
        pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
        assert _selects(deploy["spec"]["selector"], pod_labels)
        assert pod_labels.get(SHARD_LABEL) == (None if name == base else name.rsplit("-", 1)[1])
        assert [p for p, pdb in pdbs.items() if _selects(pdb["spec"]["selector"], pod_labels)] == [name]
        spread = deploy["spec"]["template"]["spec"]["topologySpreadConstraints"][0]["labelSelector"]
        spread_over = [n for n, d in deploys.items() if _selects(spread, d["spec"]["template"]["metadata"]["labels"])]
        assert spread_over == [name]
        # a shard's Deployment selects no other instance's pods
        if name != base:
            others = [n for n, d in deploys.items() if n != name
                      and _selects(deploy["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])]
            assert others == []

    # the leader-election Role may get and update every Lease an instance campaigns for
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-leader-election")]
    (named,) = [r for r in role["rules"] if r.get("resourceNames")]
    assert set(named["resourceNames"]) == set(leases.values())
    # the ServiceMonitor copies each pod's shard label into the target label `shard` (the dashboards' variable)
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert monitor["spec"]["endpoints"][0]["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_label_tatara_pleme_io_shard"], "targetLabel": "shard"}]


@pytest.mark.parametrize("chart", CHARTS)
def test_without_shards_one_instance_watches_everything(helm: Path, chart: str) -> None:
    (deploy,) = [d for d in _render_all(helm, chart) if d["kind"] == "Deployment"]
    parse = parse_reconciler if chart == "tatara-reconciler" else parse_pool
    config = parse(_args(deploy), {})
    assert (config.watch_label_selector, config.leader_election_lease_name) == ("", chart)
    assert SHARD_LABEL not in deploy["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("setting", ["shards={Shard1}", "shards={a_b}", "shards={a,a}"])
def test_schema_refuses_a_shard_name_that_is_no_dns_label(helm: Path, setting: str) -> None:
    proc = _run(helm, "template", "rel", str(ROOT / "charts" / "tatara-reconciler"), "--set", setting, check=False)
    assert proc.returncode != 0
    assert "shards" in proc.stdout + proc.stderr


@pytest.mark.anyio
async def test_install_both_charts_sharded(helm: Path, control_plane: LocalControlPlane, kube: client.ApiClient,
                                           namespace: str) -> None:
    apps, policy = client.AppsV1Api(kube), client.PolicyV1Api(kube)
    suffix = uuid.uuid4().hex[:6]
    releases = {chart: f"s{chart.removeprefix('tatara-')}-{suffix}" for chart in CHARTS}
    kubeconfig = str(control_plane.kubeconfig)
    try:
        for proc in await install(helm, kubeconfig, namespace, releases, "--set", "shards={shard1,shard2}",
                                  "--set", "podDisruptionBudget.enabled=true", "--skip-crds"):
            assert "STATUS: deployed" in proc.stdout
        for chart, release in releases.items():
            fullname = f"{release}-{chart}"
            for name in (fullname, f"{fullname}-shard1", f"{fullname}-shard2"):
                deploy = await apps.read_namespaced_deployment(name, namespace)
                assert deploy.spec.replicas == 2
                await policy.read_namespaced_pod_disruption_budget(name, namespace)
    finally:
        await uninstall(helm, kubeconfig, namespace, releases)


DYNAMIC = ("--set", "dynamicSharding.enabled=true", "--set", "shards={shard1}")


def _pod_args(deploy: dict[str, Any], pod: str) -> list[str]:
    """The container's args as the kubelet passes them to a pod named ``pod`` (``$(POD_NAME)`` expanded from the
    env var the Deployment sets from the downward API)."""
    env = {e["name"]: e for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    return [a.replace("$(POD_NAME)", pod) for a in _args(deploy)]


@pytest.mark.parametrize("chart", CHARTS)
def test_dynamic_sharding_makes_every_pod_a_member_of_its_deployments_ring(helm: Path, chart: str) -> None:
    docs, deploys = _linted_render(helm, chart, *DYNAMIC)
    base = f"rel-{chart}"
    parse = parse_reconciler if chart == "tatara-reconciler" else parse_pool
    configs = {name: parse(_pod_args(d, f"{name}-7d9c8-x2k4p"), {}) for name, d in deploys.items()}
    # each pod is a member named after itself, in the ring of its Deployment (named after its Lease)
    assert {n: (c.dynamic, c.member, c.ring.name) for n, c in configs.items()} == {
        base: (True, f"{base}-7d9c8-x2k4p", chart),
        f"{base}-shard1": (True, f"{base}-shard1-7d9c8-x2k4p", f"{chart}-shard1")}
    # ... watching the static shard's objects the sharder assigned to it, under its own membership Lease
    assert configs[f"{base}-shard1"].owned_selector == (
        f"sharding.fluxcd.io/key=shard1,shard.tatara.pleme.io/{chart}-shard1={base}-shard1-7d9c8-x2k4p")
    lease = configs[base].lease
    assert lease is not None
    assert (lease.name, dict(lease.labels)) == (f"{base}-7d9c8-x2k4p", {"tatara.pleme.io/ring": chart})
    # member Leases are named after pods: the Role grants the Lease verbs of membership and of the sharder's watch
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-leader-election")]
    unnamed = {verb for r in role["rules"] if not r.get("resourceNames") for verb in r["verbs"]}
    assert {"create", "get", "list", "watch", "update"} <= unnamed


@pytest.mark.anyio
async def test_install_both_charts_with_dynamic_sharding(helm: Path, control_plane: LocalControlPlane,
                                                         kube: client.ApiClient, namespace: str) -> None:
    apps = client.AppsV1Api(kube)
    suffix = uuid.uuid4().hex[:6]
    releases = {chart: f"d{chart.removeprefix('tatara-')}-{suffix}" for chart in CHARTS}
    kubeconfig = str(control_plane.kubeconfig)
    try:
        for proc in await install(helm, kubeconfig, namespace, releases, *DYNAMIC, "--skip-crds"):
            assert "STATUS: deployed" in proc.stdout
        for chart, release in releases.items():
            deploy = await apps.read_namespaced_deployment(f"{release}-{chart}-shard1", namespace)
            assert "--sharding=dynamic" in deploy.spec.template.spec.containers[0].args
    finally:
        await uninstall(helm, kubeconfig, namespace, releases)
