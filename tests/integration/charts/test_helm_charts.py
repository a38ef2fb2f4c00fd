"""``helm lint`` / ``helm template`` of both controller charts (defaults and every optional feature
on), the values schema refusing a wrong type and an unknown key, and ``helm install`` of both into
the real local API server, in a namespace enforcing PodSecurity ``restricted``."""

from __future__ import annotations

import functools
import json
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from kubernetes_asyncio import client

from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane

ROOT = Path(__file__).resolve().parents[3]
CHARTS = ("tatara-reconciler", "tatara-pool-reconciler")
CRDS = {
    "tatara-reconciler": ("processes.tatara.pleme.io", "processtables.tatara.pleme.io"),
    "tatara-pool-reconciler": ("ephemeralpools.tatara.pleme.io", "ephemeralallocations.tatara.pleme.io"),
}

ALL_ON: dict[str, Any] = {
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
    "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
    "dashboards": {"enabled": True, "namespace": "monitoring", "labels": {"grafana_dashboard": "0", "team": "x"},
                   "annotations": {"grafana_folder": "tatara"}},
    "podAnnotations": {"example.com/a": "1"},
    "podLabels": {"team": "platform"},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]}]}}},
    "topologySpreadConstraints": [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "DoNotSchedule"}],
    "resources": {"limits": {"cpu": 1, "memory": "256Mi", "ephemeral-storage": "1Gi", "example.com/dongle": 1},
                  "requests": {"cpu": "50m", "hugepages-2Mi": "0"}},
    "securityContext": {"readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                        "seccompProfile": {"type": "RuntimeDefault"}},
    "podSecurityContext": {"runAsNonRoot": True, "fsGroup": 65532, "sysctls": [{"name": "net.core.somaxconn",
                                                                                 "value": "1024"}]},
    "priorityClassName": "system-cluster-critical",
    "imagePullSecrets": [{"name": "registry"}],
    "extraArgs": ["--log-level=debug"],
    "extraEnv": [{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel:4318"}],
    "rbac": {"extraRules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]},
    "serviceAccount": {"annotations": {"example.com/role": "controller"}},
    "service": {"annotations": {"example.com/scrape": "true"}},
    "leaderElection": {"namespace": "kube-system"},
    "image": {"digest": "sha256:" + "0" * 64},
    "watchNamespace": "team-a",
}


def _run(helm: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _values_file(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def _render_all(helm: Path, chart: str, *extra: str) -> list[dict[str, Any]]:
    out = _run(helm, "template", "rel", str(ROOT / "charts" / chart), "-n", "tatara-system", *extra).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def _export_worker(doc: dict[str, Any]) -> bool:
    return bool(doc["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "export-worker")


def _render(helm: Path, chart: str, *extra: str) -> dict[str, dict[str, Any]]:
    """The controller's objects by kind (the export worker's RBAC objects left out)."""
    return {d["kind"]: d for d in _render_all(helm, chart, *extra) if not _export_worker(d)}


BASE_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service"}


@pytest.mark.parametrize("chart", CHARTS)
@pytest.mark.parametrize("all_on", [False, True], ids=["defaults", "all-on"])
def test_lint_and_template(helm: Path, chart: str, all_on: bool, tmp_path: Path) -> None:
    extra = ["-f", _values_file(tmp_path, ALL_ON)] if all_on else []
    lint = _run(helm, "lint", "--strict", str(ROOT / "charts" / chart), *extra)
    assert "0 chart(s) failed" in lint.stdout
    objects = _render(helm, chart, *extra)
    optional = {"ServiceMonitor", "PodDisruptionBudget", "ConfigMap", "PrometheusRule"}
    expected = BASE_KINDS | optional if all_on else BASE_KINDS
    if all_on and chart == "tatara-pool-reconciler":
        expected = expected - {"ClusterRoleBinding"}  # watchNamespace, and nothing cluster-scoped to bind
    assert set(objects) == expected
    role = objects["Role"]
    assert role["metadata"]["namespace"] == ("kube-system" if all_on else "tatara-system")
    if all_on:
        dashboards = objects["ConfigMap"]
        assert dashboards["metadata"]["namespace"] == "monitoring"
        assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"  # a user label cannot switch it off
        assert dashboards["metadata"]["labels"]["team"] == "x"
        assert dashboards["metadata"]["annotations"] == {"grafana_folder": "tatara"}
        shipped = sorted((ROOT / "charts" / chart / "dashboards").glob("*.json"))
        assert sorted(dashboards["data"]) == [p.name for p in shipped]
        for p in shipped:
            assert json.loads(dashboards["data"][p.name]) == json.loads(p.read_text())
        pod = objects["Deployment"]["spec"]["template"]["spec"]
        assert [c["topologyKey"] for c in pod["topologySpreadConstraints"]] == [
            "kubernetes.io/hostname", "topology.kubernetes.io/zone"]
        assert pod["containers"][0]["resources"]["limits"] == ALL_ON["resources"]["limits"]


@pytest.mark.parametrize("chart", CHARTS)
def test_default_deployment(helm: Path, chart: str) -> None:
    objects = _render(helm, chart)
    deploy = objects["Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deploy["spec"]["replicas"] == 2
    assert container["image"] == "ghcr.io/pleme-io/tatara:0.1.0"
    assert container["command"] == [chart]
    assert "--leader-elect=true" in container["args"]
    assert f"--leader-election-lease-name={chart}" in container["args"]
    assert "--leader-election-namespace=tatara-system" in container["args"]
    port = 8080 if chart == "tatara-reconciler" else 8081
    assert f"--health-addr=0.0.0.0:{port}" in container["args"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["labelSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    service = objects["Service"]
    assert service["spec"]["ports"][0]["name"] == "metrics"
    assert service["spec"]["selector"] == deploy["spec"]["selector"]["matchLabels"]


def _controller_rbac(helm: Path, chart: str, *sets: str) -> list[dict[str, Any]]:
    """The controller's RBAC objects (not the export worker's) rendered with ``--set`` of each of ``sets``."""
    args = [a for v in sets for a in ("--set", v)]
    return [d for d in _render_all(helm, chart, *args) if not _export_worker(d)
            and d["kind"] in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")]


def _rules_by_binding(docs: list[dict[str, Any]]) -> dict[tuple[str, str | None, str], list[dict[str, Any]]]:
    """``(binding kind, its namespace, role name) → the bound role's rules``, for every binding in ``docs``."""
    roles = {(d["kind"], d["metadata"]["name"]): d.get("rules", []) for d in docs if d["kind"].endswith("Role")}
    return {(b["kind"], b["metadata"].get("namespace"), b["roleRef"]["name"]):
            roles[(b["roleRef"]["kind"], b["roleRef"]["name"])] for b in docs if b["kind"].endswith("Binding")}


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule.get("apiGroups", []) for r in rule.get("resources", [])
            for v in rule["verbs"]}


@pytest.mark.parametrize("chart", CHARTS)
def test_rbac_is_least_privilege(helm: Path, chart: str) -> None:
    docs = _controller_rbac(helm, chart)
    roles = [d for d in docs if d["kind"] in ("ClusterRole", "Role")]
    for rule in (rule for role in roles for rule in role["rules"]):
        assert "*" not in rule["verbs"], rule
        assert "*" not in rule.get("resources", []), rule
        assert "*" not in rule.get("apiGroups", []), rule
        assert not {"escalate", "bind", "impersonate", "update"} & set(rule["verbs"]) or rule.get("resourceNames"), rule
    cluster = {g for role in roles if role["kind"] == "ClusterRole" for g in _grants(role["rules"])}
    assert not {r for _, r, _ in cluster} & {"leases", "secrets"}, "the Lease belongs in the namespaced Role"
    makes_processes = ("tatara.pleme.io", "processes", "create") in cluster
    assert makes_processes is (chart == "tatara-pool-reconciler"), "only the pool reconciler makes Processes"
    (lease,) = [d for d in docs if d["kind"] == "Role"]
    (lease_rule, named_rule) = lease["rules"]
    assert lease_rule["verbs"] == ["create"]
    assert named_rule["resourceNames"] == [chart]
    assert named_rule["verbs"] == ["get", "update"]
    for binding in (d for d in docs if d["kind"].endswith("Binding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": f"rel-{chart}", "namespace": "tatara-system"}]


JOB_RULES = {"tatara-reconciler": {("batch", "jobs", "create"), ("batch", "jobs", "patch"), ("batch", "jobs", "get"),
                                   ("", "configmaps", "get")},
             "tatara-pool-reconciler": {("batch", "jobs", "create"), ("batch", "jobs", "patch")}}
"""What ``<fullname>-jobs`` grants: export Jobs and the reads of JobAttested / receipts; reset Jobs."""


@pytest.mark.parametrize(("sets", "reconciler_namespaces", "pool_namespaces"), [
    ((), [], []),
    (("watchNamespace=team-a",), ["team-a"], ["team-a"]),
    (("exportWorker.namespaces={a,b}", "rbac.jobNamespaces={c,a}"), ["a", "b", "c"], ["a", "c"]),
    (("watchNamespace=w", "exportWorker.namespaces={a}", "rbac.jobNamespaces={c}"), ["c", "w"], ["c", "w"]),
], ids=["defaults", "watch-namespace", "listed-namespaces", "watch-and-listed"])
@pytest.mark.parametrize("chart", CHARTS)
def test_jobs_and_configmaps_are_granted_per_namespace_only(
        helm: Path, chart: str, sets: tuple[str, ...], reconciler_namespaces: list[str],
        pool_namespaces: list[str]) -> None:
    """Jobs ``create``/``patch``/``get`` and ConfigMaps ``get`` are never bound cluster-wide, only by RoleBindings
    in the namespaces that run export or reset Jobs (the pool chart has no exportWorker values)."""
    if chart == "tatara-pool-reconciler":
        sets = tuple(s for s in sets if not s.startswith("exportWorker."))
    bound = _rules_by_binding(_controller_rbac(helm, chart, *sets))
    for (kind, _, role), rules in bound.items():
        if kind == "ClusterRoleBinding":
            assert not _grants(rules) & JOB_RULES["tatara-reconciler"], (role, rules)
    jobs_role = f"rel-{chart}-jobs"
    namespaces = sorted(ns or "" for (kind, ns, role) in bound if role == jobs_role)
    assert namespaces == (reconciler_namespaces if chart == "tatara-reconciler" else pool_namespaces)
    for (_, _, role), rules in bound.items():
        if role == jobs_role:
            assert _grants(rules) == JOB_RULES[chart]


@pytest.mark.parametrize("chart", CHARTS)
def test_watch_namespace_renders_namespaced_bindings_only(helm: Path, chart: str) -> None:
    everywhere = _rules_by_binding(_controller_rbac(helm, chart))
    one = _rules_by_binding(_controller_rbac(helm, chart, "watchNamespace=team-a"))
    cluster_wide = sorted(role for (kind, _, role) in one if kind == "ClusterRoleBinding")
    # Only what is cluster-scoped by nature: the ProcessTable, its claims' holders, discovery.
    assert cluster_wide == ([f"rel-{chart}-cluster"] if chart == "tatara-reconciler" else [])
    if chart == "tatara-reconciler":
        assert _grants(one[("ClusterRoleBinding", None, f"rel-{chart}-cluster")]) == {
            ("tatara.pleme.io", "processtables", v) for v in ("get", "list", "watch", "create", "patch")} | {
            ("tatara.pleme.io", "processtables/status", "patch"), ("tatara.pleme.io", "processes", "get"),
            ("tatara.pleme.io", "processes", "list")}
    # The watched namespace gets what every namespace gets otherwise: the rules the e2e run exercises.
    assert one[("RoleBinding", "team-a", f"rel-{chart}")] == everywhere[("ClusterRoleBinding", None, f"rel-{chart}")]
    assert ("RoleBinding", "team-a", f"rel-{chart}-jobs") in one
    if chart == "tatara-reconciler":
        # the ProcessTable's Events live in "default", as every cluster-scoped object's do
        assert _grants(one[("RoleBinding", "default", f"rel-{chart}-table-events")]) == {
            ("", "events", "create"), ("", "events", "patch")}
        assert not [key for key in everywhere if key[2].endswith("-table-events")], "cluster-wide: not needed"
        watching_default = _rules_by_binding(_controller_rbac(helm, chart, "watchNamespace=default"))
        assert not [key for key in watching_default if key[2].endswith("-table-events")], "covered already"


def test_the_export_worker_gets_exactly_its_calls_bound_in_the_listed_namespaces(helm: Path) -> None:
    docs = [d for d in _render_all(helm, "tatara-reconciler", "--set", "exportWorker.namespaces={previews,pr-7}")
            if _export_worker(d)]
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert role["metadata"]["name"] == "rel-tatara-reconciler-export-worker"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "patch"]},
        {"apiGroups": ["tatara.pleme.io"], "resources": ["processes"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    assert not [d for d in docs if d["kind"] == "ClusterRoleBinding"], "never bound cluster-wide"
    accounts = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "ServiceAccount"}
    bindings = {d["metadata"]["namespace"]: d for d in docs if d["kind"] == "RoleBinding"}
    assert sorted(accounts) == sorted(bindings) == ["pr-7", "previews"]
    for namespace, binding in bindings.items():
        assert accounts[namespace]["metadata"]["name"] == "tatara-export-worker"  # config.exportWorkerServiceAccount
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": "rel-tatara-reconciler-export-worker"}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "tatara-export-worker",
                                        "namespace": namespace}]
    off = _render_all(helm, "tatara-reconciler", "--set", "exportWorker.clusterRole=false",
                      "--set", "exportWorker.namespaces={previews}")
    assert not [d for d in off if _export_worker(d)]


@pytest.mark.parametrize("command", ["lint", "template"])
@pytest.mark.parametrize("chart", CHARTS)
@pytest.mark.parametrize(("setting", "message"), [
    ("replicaCount=two", "at '/replicaCount': got string, want integer"),
    ("replicas=3", "additional properties 'replicas' not allowed"),
    ("serviceMonitor.enabeld=true", "additional properties 'enabeld' not allowed"),
    ("securityContext.readOnlyRootFilesytem=true", "additional properties 'readOnlyRootFilesytem' not allowed"),
    ("podSecurityContext.runAsUsr=1", "additional properties 'runAsUsr' not allowed"),
    ("securityContext.capabilities.drop=ALL", "at '/securityContext/capabilities/drop': got string, want array"),
    ("resources.limits.memroy=1Gi", "invalid propertyName 'memroy'"),
    ("resources.limit.memory=1Gi", "additional properties 'limit' not allowed"),
    ("resources.limits.cpu=true", "at '/resources/limits/cpu'"),
    ("affinity.nodeAfinity.x=1", "additional properties 'nodeAfinity' not allowed"),
    ("tolerations[0].opertor=Exists", "additional properties 'opertor' not allowed"),
    ("topologySpreadConstraints[0].maxSkw=1", "additional properties 'maxSkw' not allowed"),
    ("extraEnv[0].nmae=X", "additional properties 'nmae' not allowed"),
    ("rbac.extraRules[0].verb=get", "additional properties 'verb' not allowed"),
    ("imagePullSecrets[0].nme=registry", "additional properties 'nme' not allowed"),
], ids=["wrong-type", "unknown-top-level-key", "nested-typo", "security-context-typo", "pod-security-context-typo",
        "capabilities-wrong-type", "resource-name-typo", "resources-key-typo", "quantity-wrong-type",
        "affinity-typo", "toleration-typo", "topology-spread-constraint-typo", "env-var-typo", "policy-rule-typo",
        "image-pull-secret-typo"])
def test_schema_rejects(helm: Path, chart: str, command: str, setting: str, message: str) -> None:
    args: Sequence[str] = ("lint", str(ROOT / "charts" / chart)) if command == "lint" else (
        "template", "rel", str(ROOT / "charts" / chart))
    proc = _run(helm, *args, "--set", setting, check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr


# -- install into the real local API server ---------------------------------------------------------


async def install(helm: Path, kubeconfig: str, namespace: str, releases: dict[str, str],
                  *extra: str) -> list[subprocess.CompletedProcess[str]]:
    """``helm install`` of each chart as its release (``{chart: release}``) with ``extra`` arguments."""
    return [await anyio.to_thread.run_sync(functools.partial(
        _run, helm, "install", release, str(ROOT / "charts" / chart), "--kubeconfig", kubeconfig, "-n", namespace,
        *extra, "--timeout", "90s")) for chart, release in releases.items()]


async def uninstall(helm: Path, kubeconfig: str, namespace: str, releases: dict[str, str]) -> None:
    """``helm uninstall`` of every release, not waiting, errors ignored (a test's cleanup)."""
    for release in releases.values():
        await anyio.to_thread.run_sync(functools.partial(
            _run, helm, "uninstall", release, "--kubeconfig", kubeconfig, "-n", namespace, "--wait=false",
            check=False))


@pytest.mark.anyio
async def test_install_both_charts(helm: Path, control_plane: LocalControlPlane, kube: client.ApiClient,
                                   namespace: str) -> None:
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    rbac, ext = client.RbacAuthorizationV1Api(kube), client.ApiextensionsV1Api(kube)
    restricted = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn")}
    await core.patch_namespace(namespace, {"metadata": {"labels": restricted}})
    suffix = uuid.uuid4().hex[:6]
    releases = {chart: f"{chart.removeprefix('tatara-')}-{suffix}" for chart in CHARTS}
    kubeconfig = str(control_plane.kubeconfig)
    try:
        for proc in await install(helm, kubeconfig, namespace, releases, "--set", "podDisruptionBudget.enabled=true"):
            assert "STATUS: deployed" in proc.stdout
            assert "violate PodSecurity" not in proc.stderr, proc.stderr

        for chart, release in releases.items():
            fullname = f"{release}-{chart}"
            for crd in CRDS[chart]:
                async def established(name: str = crd) -> bool:
                    obj = await ext.read_custom_resource_definition(name)
                    return any(c.type == "Established" and c.status == "True" for c in obj.status.conditions or [])
                await wait_for(established, timeout=60, what=f"{crd} Established")
            deploy = await apps.read_namespaced_deployment(fullname, namespace)
            assert deploy.spec.replicas == 2
            await core.read_namespaced_service_account(fullname, namespace)
            await core.read_namespaced_service(f"{fullname}-metrics", namespace)
            await rbac.read_cluster_role(fullname)
            await rbac.read_cluster_role_binding(fullname)
            await rbac.read_namespaced_role(f"{fullname}-leader-election", namespace)
            await rbac.read_namespaced_role_binding(f"{fullname}-leader-election", namespace)
            await client.PolicyV1Api(kube).read_namespaced_pod_disruption_budget(fullname, namespace)

            # The pod template passes PodSecurity `restricted` enforcement for real: a Pod made from it
            # is admitted (it stays Pending: no scheduler or kubelet here).
            template = kube.sanitize_for_serialization(deploy.spec.template)
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{fullname}-probe",
                                                                   "labels": {"probe": "restricted"}},
                   "spec": template["spec"]}
            await core.create_namespaced_pod(namespace, pod)  # type: ignore[arg-type]  # a dict body is sent as is
            await core.delete_namespaced_pod(f"{fullname}-probe", namespace, grace_period_seconds=0)
    finally:
        await uninstall(helm, kubeconfig, namespace, releases)


@pytest.mark.parametrize("chart", CHARTS)
def test_rendered_args_parse(helm: Path, chart: str) -> None:
    """Every flag the chart passes is one the binary accepts, with the intended values."""
    from pool_reconciler.config import parse_config as parse_pool
    from reconciler.config import parse_config as parse_reconciler

    args = _render(helm, chart)["Deployment"]["spec"]["template"]["spec"]["containers"][0]["args"]
    config = (parse_reconciler if chart == "tatara-reconciler" else parse_pool)(args, {})
    assert config.leader_elect is True
    assert config.controller_namespace == "tatara-system"
    assert config.lease_namespace == "tatara-system"
