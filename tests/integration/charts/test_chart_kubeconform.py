"""kubeconform ``-strict`` (the pinned binary, tests/conftest.py) judges every document both charts render — with
default values, with static sharding, with dynamic sharding, and with every switch that adds a kind — and finds each
valid; a Deployment with a mistyped field is refused (issue 23: "Both charts install a sharded setup").

The schemas of the Kubernetes kinds (Deployment, Service, ServiceAccount, ConfigMap, RBAC, PodDisruptionBudget,
CustomResourceDefinition) are made at test time from the ``api/openapi-spec/swagger.json`` of the Kubernetes release
the project tests (README "Local control plane"), as openapi2jsonschema makes kubeconform's default standalone-strict
set (:mod:`tools.kubeconform_schemas`), and found by kubeconform's own file-name template
``{{ .ResourceKind }}{{ .KindSuffix }}.json`` (kubeconform README, "Overriding schemas location").

Offline: the generated folder is the only ``-schema-location`` (kubeconform downloads from its remote default only
when none is given, README "Overriding schemas location"), the files' ``$schema`` is a draft kubeconform knows
without fetching it, and the run's proxy (README "Proxy support": downloads honour ``HTTPS_PROXY``) is a closed
loopback port, so an attempt to download would be an error, not a request out.

Skipped, by name with ``-skip`` and nothing else (no ``-ignore-missing-schemas``: a kind without a schema is an
error, checked below): the Prometheus Operator's ``monitoring.coreos.com/v1`` ServiceMonitor and PrometheusRule.
Their CRDs are not in the repository (``tools/crds/third_party`` holds Flux's and external-dns's), so there is
nothing to judge them by; ``test_alert_rules.py`` checks the PrometheusRule's rules with promtool instead, and the
ServiceMonitor's fields are read by ``test_sharded_charts.py``.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.charts.test_helm_charts import ALL_ON, CHARTS, ROOT, _run
from tests.integration.charts.test_sharded_charts import SETS as STATIC
from tools.crds import all_crds
from tools.kubeconform_schemas import KUBERNETES_SCHEMA_LOCATION, kubernetes_json_schemas, read_swagger, write_schemas

DYNAMIC = (*STATIC, "--set", "dynamicSharding.enabled=true")

UNJUDGED_GROUP = "monitoring.coreos.com"
SKIP = ("monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule")
"""``-skip`` takes kinds or ``<apiVersion>/<kind>`` (kubeconform README, "Usage examples"): these two, by full name."""

OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "",
           "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9", "no_proxy": ""}

BASE_KINDS = {"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
              "Deployment", "Service"}
SHARDED_KINDS = BASE_KINDS | {"PodDisruptionBudget", "ServiceMonitor"}
EVERY_KIND = SHARDED_KINDS | {"PrometheusRule", "ConfigMap"}  # alerts and the dashboards' ConfigMap


def _everything(chart: str, values: Path) -> tuple[str, ...]:
    """Dynamic sharding plus every optional value test_helm_charts.ALL_ON sets (PrometheusRule, dashboards
    ConfigMap, watchNamespace's RoleBinding and table-events Role, …), more Jobs namespaces, tracing and, in the
    reconciler's chart, the export worker's ServiceAccounts and RoleBindings."""
    extra = ("--set", "exportWorker.namespaces={team-a,team-b}") if chart == "tatara-reconciler" else ()
    return ("-f", str(values), *DYNAMIC, "--set", "rbac.jobNamespaces={jobs-a}",
            "--set", "tracing.otlpEndpoint=http://otel:4318", *extra)


RENDERS = ("defaults", "static", "dynamic", "everything")


def _expected_kinds(chart: str, render: str) -> set[str]:
    if render == "defaults":
        return BASE_KINDS
    if render != "everything":
        return SHARDED_KINDS
    # ALL_ON watches one namespace: the pool reconciler then has nothing cluster-scoped to bind
    return EVERY_KIND - ({"ClusterRoleBinding"} if chart == "tatara-pool-reconciler" else set())


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every kind of the tested Kubernetes release, as kubeconform standalone-strict JSON schemas, in a temp folder."""
    directory = tmp_path_factory.mktemp("kubeconform-kubernetes")
    write_schemas(kubernetes_json_schemas(read_swagger()), directory)
    return directory


@pytest.fixture(scope="module")
def all_on_values(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("values") / "all-on.yaml"
    path.write_text(yaml.safe_dump(ALL_ON))
    return path


def _render(helm: Path, chart: str, render: str, all_on_values: Path) -> str:
    sets = _everything(chart, all_on_values) if render == "everything" else {
        "defaults": (), "static": STATIC, "dynamic": DYNAMIC}[render]
    crds = ("--include-crds",) if any((ROOT / "charts" / chart / "crds").glob("*.yaml")) else ()
    return _run(helm, "template", "rel", str(ROOT / "charts" / chart), "-n", "tatara-system", *crds, *sets).stdout


def _kubeconform(binary: Path, schemas: Path, manifest: str, skip: bool = True,
                 output: str = "json") -> subprocess.CompletedProcess[str]:
    """kubeconform ``-strict -summary`` over ``manifest`` on stdin, our schemas only, offline."""
    args = [str(binary), "-strict", "-summary", "-verbose", "-output", output,
            "-schema-location", str(schemas / KUBERNETES_SCHEMA_LOCATION), *(["-skip", ",".join(SKIP)] if skip else [])]
    return subprocess.run(args, input=manifest, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, **OFFLINE})


def _report(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        report: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError as err:
        raise AssertionError(f"kubeconform printed no JSON ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}") from err
    return report


def _unjudged(doc: dict[str, Any]) -> bool:
    return str(doc["apiVersion"]).partition("/")[0] == UNJUDGED_GROUP


@pytest.mark.parametrize("render", RENDERS)
@pytest.mark.parametrize("chart", CHARTS)
def test_kubeconform_strict_finds_every_rendered_document_valid(helm: Path, kubeconform: Path, schemas: Path,
                                                                all_on_values: Path, chart: str, render: str) -> None:
    manifest = _render(helm, chart, render, all_on_values)
    docs = [d for d in yaml.safe_load_all(manifest) if d]  # PyYAML's count, independent of kubeconform's
    assert {d["kind"] for d in docs} == _expected_kinds(chart, render)
    if render != "defaults":  # one instance per shard plus the one for what no shard claims (docs/architecture.md)
        assert sum(d["kind"] == "Deployment" for d in docs) == 1 + 2
    skipped = sum(map(_unjudged, docs))

    text = _kubeconform(kubeconform, schemas, manifest, output="text")
    summary = text.stdout.strip().splitlines()[-1]
    print(f"{chart} {render}: {summary}")
    assert summary == (f"Summary: {len(docs)} resources found parsing stdin - Valid: {len(docs) - skipped}, "
                       f"Invalid: 0, Errors: 0, Skipped: {skipped}"), text.stdout + text.stderr
    assert text.returncode == 0

    report = _report(_kubeconform(kubeconform, schemas, manifest))
    judged = Counter((r["kind"], r["name"], r["status"]) for r in report["resources"])
    expected = Counter((d["kind"], d["metadata"]["name"], "statusSkipped" if _unjudged(d) else "statusValid")
                       for d in docs)
    assert judged == expected, json.dumps([r for r in report["resources"] if r["status"] != "statusValid"], indent=2)


def _deployment(helm: Path, all_on_values: Path) -> dict[str, Any]:
    """A shard's Deployment as the static render gives it."""
    docs = yaml.safe_load_all(_render(helm, "tatara-reconciler", "static", all_on_values))
    found: list[dict[str, Any]] = [d for d in docs if d and d["kind"] == "Deployment"
                                   and d["metadata"]["name"].endswith("-shard1")]
    (deploy,) = found
    return deploy


Mistake = Callable[[dict[str, Any]], None]


def _typo_replicas(deploy: dict[str, Any]) -> None:
    deploy["spec"]["replica"] = deploy["spec"].pop("replicas")


def _typo_resources(deploy: dict[str, Any]) -> None:
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    container["resource"] = container.pop("resources")


def _string_replicas(deploy: dict[str, Any]) -> None:
    deploy["spec"]["replicas"] = "2"


@pytest.mark.parametrize(("mistake", "error"), [
    (_typo_replicas, {"path": "/spec", "msg": "additional properties 'replica' not allowed"}),
    (_typo_resources, {"path": "/spec/template/spec/containers/0",
                       "msg": "additional properties 'resource' not allowed"}),
    (_string_replicas, {"path": "/spec/replicas", "msg": "got string, want null or integer"}),
], ids=["replica", "container-resource", "replicas-string"])
def test_kubeconform_strict_refuses_a_mistyped_deployment(helm: Path, kubeconform: Path, schemas: Path,
                                                          all_on_values: Path, mistake: Mistake,
                                                          error: dict[str, str]) -> None:
    deploy = _deployment(helm, all_on_values)
    assert _report(_kubeconform(kubeconform, schemas, yaml.safe_dump(deploy)))["summary"]["valid"] == 1
    wrong = copy.deepcopy(deploy)
    mistake(wrong)

    proc = _kubeconform(kubeconform, schemas, yaml.safe_dump(wrong))

    assert proc.returncode == 1
    [result] = _report(proc)["resources"]
    print(result["msg"])
    assert (result["kind"], result["status"]) == ("Deployment", "statusInvalid")
    assert error in result["validationErrors"]


def test_a_kind_without_a_schema_is_an_error_not_skipped(helm: Path, kubeconform: Path, schemas: Path,
                                                         all_on_values: Path) -> None:
    """Without ``-skip`` the ServiceMonitor fails (so nothing else is skipped silently), and the skip is needed:
    no CRD of the monitoring group is among those the repository carries."""
    assert not [c for c in all_crds() if c["spec"]["group"] == UNJUDGED_GROUP]
    proc = _kubeconform(kubeconform, schemas, _render(helm, "tatara-reconciler", "static", all_on_values), skip=False)
    report = _report(proc)
    assert proc.returncode == 1
    [error] = [r for r in report["resources"] if r["status"] != "statusValid"]
    assert (error["kind"], error["status"], error["msg"]) == (
        "ServiceMonitor", "statusError", "could not find schema for ServiceMonitor")
