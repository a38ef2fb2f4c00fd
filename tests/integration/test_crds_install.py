"""The generated CRDs on a real kube-apiserver: installed, Established, accepting the upstream
examples without pruning a field, and rejecting bad objects with a message naming the field.

The CRDs are read from the chart files that ship (charts/*/crds), not regenerated here; the
unit drift test ties those files to the models.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from shared.domain.api.codec import (
    DecodeError,
    InvalidSpecError,
    decode_allocation,
    decode_pool,
    decode_process,
    decode_table,
)
from shared.domain.group import GROUP, VERSION
from tests.support.kube import api_client, install_crds_async, load_yaml_docs
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
CRD_FILES = sorted(ROOT.glob("charts/*/crds/*.yaml"))
EXAMPLES = sorted((ROOT / "tests" / "fixtures" / "upstream-tatara" / "examples").glob("*.yaml"))


@pytest.fixture(scope="module")
async def tatara_crds(control_plane: LocalControlPlane) -> list[dict[str, Any]]:
    """Install the chart CRDs; :func:`tools.crds.install_crds` waits until each is Established *and*
    its storage serves a LIST."""
    docs = [doc for path in CRD_FILES for doc in load_yaml_docs(path)]
    api = await api_client(control_plane.kubeconfig)
    try:
        await install_crds_async(api, docs)
    finally:
        await api.close()
    return docs


def _objects(kube: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube)


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            yield from _leaves(sub, f"{path}.{key}")
    elif isinstance(value, list) and value:
        for i, sub in enumerate(value):
            yield from _leaves(sub, f"{path}[{i}]")
    else:
        yield path, value


def _lookup(value: Any, path: str) -> Any:
    """Follow a ``_leaves`` path; a missing step gives the sentinel ``...``."""
    for step in path.replace("[", ".[").split(".")[1:]:
        if step.startswith("["):
            index = int(step[1:-1])
            if not isinstance(value, list) or index >= len(value):
                return ...
            value = value[index]
        else:
            if not isinstance(value, dict) or step not in value:
                return ...
            value = value[step]
    return value


def _assert_nothing_pruned(sent: dict[str, Any], stored: dict[str, Any]) -> None:
    """Every leaf we sent is stored unchanged (a field missing from the schema would be pruned)."""
    lost = {path: value for path, value in _leaves(sent) if _lookup(stored, path) != value}
    assert not lost, f"pruned or changed by the API server: {lost}"


# ----------------------------------------------------------------------------- installation


async def test_the_crds_are_established_with_the_spec_names(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]]
) -> None:
    ext = client.ApiextensionsV1Api(kube)
    for doc in tatara_crds:
        crd = await ext.read_custom_resource_definition(doc["metadata"]["name"])
        conditions = {c.type: c.status for c in crd.status.conditions}
        assert conditions["Established"] == "True"
        assert conditions["NamesAccepted"] == "True"
        assert crd.status.accepted_names.short_names == doc["spec"]["names"]["shortNames"]


async def test_creating_the_crds_draws_no_warnings(kube: client.ApiClient, tatara_crds: list[dict[str, Any]]) -> None:
    """A server-side dry-run create (under a throwaway group, so the names are free) returns
    no ``Warning`` headers — e.g. none of ``unrecognized format "uint32"``."""
    for doc in tatara_crds:
        probe = copy.deepcopy(doc)
        group = f"warn-{uuid.uuid4().hex[:8]}.example.test"
        probe["spec"]["group"] = group
        probe["metadata"]["name"] = f"{doc['spec']['names']['plural']}.{group}"
        response = await kube.call_api(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "POST",
            query_params=[("dryRun", "All")],
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body=probe,
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        assert response.status == 201
        assert response.headers.getall("Warning", []) == [], doc["metadata"]["name"]
        response.release()


async def _table(kube: client.ApiClient, path: str) -> dict[str, Any]:
    """What ``kubectl get`` reads: the API server's Table rendering of a list."""
    response = await kube.call_api(
        path,
        "GET",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    table: dict[str, Any] = json.loads(await response.read())
    return table


async def test_kubectl_get_shows_the_spec_printer_columns_and_the_ready_condition(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str
) -> None:
    objects = _objects(kube)
    await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "processes", _process("stuck"))
    condition = {"status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "IntentNotSupported",
                 "message": "intent nix is not supported"}
    await objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "processes", "stuck",
        {"status": {"phase": "Execing", "conditions": [{"type": "Stalled", **condition, "status": "True"},
                                                       {"type": "Ready", **condition}]}},
        _content_type="application/merge-patch+json",
    )
    table = await _table(kube, f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/processes")
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns == [("Name", 0), ("PID", 0), ("Phase", 0), ("Type", 0), ("Substrate", 0), ("Gen", 0),
                       ("Ready", 0), ("Reason", 1), ("Message", 1), ("Age", 0)]
    (row,) = table["rows"]
    cells = dict(zip([c["name"] for c in table["columnDefinitions"]], row["cells"], strict=True))
    assert (cells["Phase"], cells["Ready"], cells["Reason"], cells["Message"]) == (
        "Execing", "False", "IntentNotSupported", "intent nix is not supported")


async def test_every_kind_is_in_the_tatara_category_and_the_namespaced_ones_in_all(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]]
) -> None:
    response = await kube.call_api(f"/apis/{GROUP}/{VERSION}", "GET", auth_settings=["BearerToken"],
                                   header_params={"Accept": "application/json"}, _preload_content=False)
    resources = json.loads(await response.read())
    categories = {r["name"]: r.get("categories", []) for r in resources["resources"] if "/" not in r["name"]}
    assert categories == {"processes": ["tatara", "all"], "processtables": ["tatara"],
                          "ephemeralpools": ["tatara", "all"], "ephemeralallocations": ["tatara", "all"]}


# ----------------------------------------------------------------------------- acceptance


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
async def test_an_upstream_example_is_stored_without_pruning_and_decodes(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str, path: Path
) -> None:
    for doc in load_yaml_docs(path):
        doc["metadata"]["namespace"] = namespace
        stored = await _objects(kube).create_namespaced_custom_object(GROUP, VERSION, namespace, "processes", doc)
        _assert_nothing_pruned(doc["spec"], stored["spec"])
        process = decode_process(json.dumps(stored), validate=True)
        assert process.metadata.name == doc["metadata"]["name"]


def _pool(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "EphemeralPool",
        "metadata": {"name": name},
        "spec": {
            "desiredSize": 2,
            "desired": 3,
            "replacementPolicy": "HoldFailed",
            "stableNameClaim": True,
            "selector": {"repos": ["pleme-io/*"], "prLabels": ["preview"]},
            "template": {
                "aplicacao": {
                    "chartRef": "oci://example/chart",
                    "version": "0.5.5",
                    "profile": "all-in-one",
                    "valuesOverlay": {"replicas": 1, "nested": {"list": [1, "two", None]}},
                },
                "ttl": "2h",
                "teardown": "OnAttested",
                "postconditions": [{"kind": "HelmReleaseReleased", "params": {"name": "app"}}],
                "exports": [
                    {
                        "source": {"testReport": {"configmap": "report", "key": "junit.xml", "format": "Junit"}},
                        "channel": {"natsSubject": {"subject": "runs.{{run_id}}", "stream": "RUNS"}},
                        "when": "Always",
                    }
                ],
                "routing": {
                    "hostnames": [{"app": "api", "instance": "pr-7"}],
                    "backend": {"service": "api", "port": 8080, "ingressAnnotations": {"a": "b"}},
                    "stableNameClaim": True,
                    "priority": -5,
                },
            },
        },
    }


async def test_a_pool_with_every_newer_field_is_stored_without_pruning(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str
) -> None:
    doc = _pool("previews")
    stored = await _objects(kube).create_namespaced_custom_object(GROUP, VERSION, namespace, "ephemeralpools", doc)
    _assert_nothing_pruned(doc["spec"], stored["spec"])
    pool = decode_pool(json.dumps(stored))
    assert pool.spec.desired == 3


async def test_an_allocation_and_its_status_are_stored(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str
) -> None:
    doc = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "EphemeralAllocation",
        "metadata": {"name": "pr-7"},
        "spec": {
            "poolRef": {"name": "previews", "namespace": namespace},
            "requestor": {"kind": "github-pr", "repo": "pleme-io/app", "prNumber": 7, "prLabels": ["preview"]},
            "ttl": "3h",
        },
    }
    objects = _objects(kube)
    stored = await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "ephemeralallocations", doc)
    _assert_nothing_pruned(doc["spec"], stored["spec"])
    status = {"status": {"phase": "Bound", "assignedProcess": {"name": "previews-0", "namespace": namespace}}}
    patched = await objects.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        "ephemeralallocations",
        "pr-7",
        status,
        _content_type="application/merge-patch+json",
    )
    _assert_nothing_pruned(status["status"], patched["status"])
    assert decode_allocation(json.dumps(patched)).status is not None


async def test_the_cluster_scoped_process_table_takes_claims_in_status(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]]
) -> None:
    name = f"proc-{uuid.uuid4().hex[:8]}"
    objects = _objects(kube)
    doc = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ProcessTable", "metadata": {"name": name}, "spec": {}}
    stored = await objects.create_cluster_custom_object(GROUP, VERSION, "processtables", doc)
    try:
        assert stored["spec"]["nextSequence"] == 1
        assert stored["spec"]["sigtermTimeoutSeconds"] == 480
        claim = {"holder": "ns/api", "pid": "seph.1.7", "grantedAt": "2026-05-19T12:00:00Z", "priority": 3}
        status = {"status": {"claims": {"pleme-dev/api": claim}}}
        patched = await objects.patch_cluster_custom_object_status(
            GROUP, VERSION, "processtables", name, status, _content_type="application/merge-patch+json"
        )
        _assert_nothing_pruned(status["status"], patched["status"])
        assert decode_table(json.dumps(patched)).status is not None
    finally:
        await objects.delete_cluster_custom_object(GROUP, VERSION, "processtables", name)


# ----------------------------------------------------------------------------- rejection


def _process(name: str, **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "classification": {"pointType": "Gate", "substrate": "Observability"},
        "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "observability"}},
    }
    base.update(spec)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Process", "metadata": {"name": name}, "spec": base}


NIX = {"flakeRef": "github:pleme-io/k8s", "attribute": "observability"}
FLUX = {"gitRepository": "flux-system", "path": "./apps"}

BAD_PROCESSES = [
    pytest.param(
        {"classification": {"pointType": "gate", "substrate": "Observability"}},
        "spec.classification.pointType",
        'Unsupported value: "gate"',
        id="a wrong enum spelling is rejected naming the field",
    ),
    pytest.param(
        {"classification": {"pointType": "Gate"}},
        "spec.classification.substrate",
        "Required value",
        id="a missing required field is rejected naming the field",
    ),
    pytest.param(
        {"intent": {"nix": NIX, "flux": FLUX}},
        "spec.intent",
        "intent has multiple variants set; exactly one required",
        id="two intent variants are rejected with the model's message",
    ),
    pytest.param(
        {"intent": {}},
        "spec.intent",
        "intent has no variant set (one of nix/flux/lisp/container/aplicacao/guest required)",
        id="an empty intent is rejected with the model's message",
    ),
    pytest.param(
        {"lifetime": {"permanent": {}, "ephemeral": {}}},
        "spec.lifetime",
        "lifetime has multiple variants set; at most one required",
        id="both lifetimes are rejected",
    ),
    pytest.param(
        {
            "lifetime": {
                "ephemeral": {
                    "exports": [
                        {"source": {"receipts": {}}, "channel": {"stdout": {}, "httpEvent": {"signalType": "x"}}}
                    ]
                }
            }
        },
        "spec.lifetime.ephemeral.exports[0].channel",
        "must validate one and only one schema (oneOf)",
        id="an export channel with two slots is rejected naming the list element",
    ),
    pytest.param(
        {"signals": {"sigtermGraceSeconds": -1}},
        "spec.signals.sigtermGraceSeconds",
        "greater than or equal to 0",
        id="a negative u32 is rejected",
    ),
    pytest.param(
        {"routing": {"backend": {"service": "api", "port": 70000}}},
        "spec.routing.backend.port",
        "less than or equal to 65535",
        id="a port above u16 is rejected",
    ),
]


@pytest.mark.parametrize(("spec", "field", "fragment"), BAD_PROCESSES)
async def test_the_api_server_rejects_a_bad_process_naming_the_field(
    kube: client.ApiClient,
    tatara_crds: list[dict[str, Any]],
    namespace: str,
    spec: dict[str, Any],
    field: str,
    fragment: str,
) -> None:
    with pytest.raises(ApiException) as caught:
        await _objects(kube).create_namespaced_custom_object(
            GROUP, VERSION, namespace, "processes", _process("bad", **spec)
        )
    assert caught.value.status == 422
    message = json.loads(caught.value.body)["message"]
    assert field in message
    assert fragment in message


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        pytest.param(
            {"classification": {"pointType": "gate", "substrate": "Observability"}},
            "$.spec.classification.pointType",
            id="our decoder names the field of a wrong enum spelling",
        ),
        pytest.param(
            {"classification": {"pointType": "Gate"}},
            "$.spec.classification",
            id="our decoder names the object missing a required field",
        ),
        pytest.param(
            {"intent": {"nix": NIX, "flux": FLUX}},
            "intent has multiple variants set",
            id="our decoder rejects two intent variants when validating",
        ),
    ],
)
def test_our_decoder_rejects_the_same_documents(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises((DecodeError, InvalidSpecError)) as caught:
        decode_process(json.dumps(_process("bad", **spec)), validate=True)
    assert fragment in str(caught.value)


async def test_the_status_subresource_takes_releasing_and_rejects_an_unknown_phase(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str
) -> None:
    objects = _objects(kube)
    await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "processes", _process("p"))
    patched = await objects.patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        namespace,
        "processes",
        "p",
        {"status": {"phase": "Releasing", "pid": "seph.1"}},
        _content_type="application/merge-patch+json",
    )
    assert patched["status"]["phase"] == "Releasing"
    assert patched["status"]["children"] == []  # server-side default from the model
    with pytest.raises(ApiException) as caught:
        await objects.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            "processes",
            "p",
            {"status": {"phase": "Sleeping"}},
            _content_type="application/merge-patch+json",
        )
    assert caught.value.status == 422
    assert "status.phase" in json.loads(caught.value.body)["message"]


async def test_a_pool_with_an_unknown_replacement_policy_is_rejected(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str
) -> None:
    doc = _pool("bad")
    doc["spec"]["replacementPolicy"] = "Sometimes"
    with pytest.raises(ApiException) as caught:
        await _objects(kube).create_namespaced_custom_object(GROUP, VERSION, namespace, "ephemeralpools", doc)
    assert caught.value.status == 422
    assert "spec.replacementPolicy" in json.loads(caught.value.body)["message"]


# ----------------------------------------------------------------------------- grammars (issue 17)

# Expected spellings from the humantime 2.3 grammar as the spec states it (docs/wire-format.md#durations):
# accepted "0", "1h30m", "2h 15m", "20 min", "1 0m", "1.5h", "4.2s", "3M"; refused "5" (time unit needed),
# "1.", ".5s", "" and words.
_DURATION = "must be a duration: a number and a unit"
_PID = "must be the PID path of the parent Process"
_AP = {"chartRef": "oci://ghcr.io/pleme-io/charts/api", "version": "1.x"}
_CHART = "must be a chart reference"
_VERSION = "must be a chart version, a semver range or an OCI tag"
_CHART_AT = {"processes": "intent", "ephemeralpools": "template"}


def _with_chart(plural: str, key: str, value: str) -> dict[str, Any]:
    """A spec whose one ``aplicacao`` (a Process's intent, a pool's member template) has ``key: value``."""
    return {_CHART_AT[plural]: {"aplicacao": {**_AP, key: value}}}


BAD_GRAMMAR = [
    pytest.param("processes", {"boundary": {"timeout": "banana"}}, "spec.boundary.timeout", _DURATION,
                 id="a boundary timeout that is not a duration"),
    pytest.param("processes", {"boundary": {"timeout": "5"}}, "spec.boundary.timeout", _DURATION,
                 id="a boundary timeout without a unit"),
    pytest.param("processes", {"boundary": {"timeout": ".5s"}}, "spec.boundary.timeout", _DURATION,
                 id="a boundary timeout with a bare fraction"),
    pytest.param("processes", {"intent": {"aplicacao": {**_AP, "installTimeout": "soon"}}},
                 "spec.intent.aplicacao.installTimeout", _DURATION, id="an install timeout that is not a duration"),
    pytest.param("processes", {"lifetime": {"ephemeral": {"ttl": "1."}}}, "spec.lifetime.ephemeral.ttl", _DURATION,
                 id="an ephemeral ttl with a dangling point"),
    pytest.param("processes", {"identity": {"parent": "seph"}}, "spec.identity.parent", _PID,
                 id="a parent PID without a sequence number"),
    pytest.param("processes", {"identity": {"parent": "seph..1"}}, "spec.identity.parent", _PID,
                 id="a parent PID with an empty segment"),
    pytest.param("processes", {"routing": {"hostnames": [{"app": "Bad_App"}], "backend": {"service": "a", "port": 80}}},
                 "spec.routing.hostnames[0].app", "should match", id="a host name app that is not a DNS label"),
    pytest.param("processes", {"routing": {"hostnames": [{"app": "api", "cluster": "-edge"}],
                                           "backend": {"service": "a", "port": 80}}},
                 "spec.routing.hostnames[0].cluster", "should match", id="a cluster that starts with a hyphen"),
    pytest.param("processes", {"encapsulates": {"kind": {"bareWorkload": {"namespace": "n",
                                                                          "selector": {"app": "not a value!"}}}}},
                 "spec.encapsulates.kind.bareWorkload.selector.app", "should match",
                 id="a selector value that is not a label value"),
    pytest.param("ephemeralpools", {"freeTtl": "a day"}, "spec.freeTtl", _DURATION, id="a pool freeTtl in words"),
    pytest.param("ephemeralpools", {"maxAllocationTtl": "4"}, "spec.maxAllocationTtl", _DURATION,
                 id="a pool maxAllocationTtl without a unit"),
    pytest.param("ephemeralpools", {"template": {"aplicacao": _AP, "ttl": "1 hour!"}}, "spec.template.ttl", _DURATION,
                 id="a member ttl with punctuation"),
    pytest.param("ephemeralpools", {"template": {"aplicacao": _AP, "verifyTimeout": "-5m"}},
                 "spec.template.verifyTimeout", _DURATION, id="a negative verify timeout"),
    pytest.param("ephemeralpools", {"template": {"aplicacao": _AP, "parent": "seph.1."}}, "spec.template.parent", _PID,
                 id="a member parent PID with a trailing dot"),
    pytest.param("ephemeralallocations", {"ttl": ""}, "spec.ttl", _DURATION, id="an empty allocation ttl"),
    *(pytest.param(plural, _with_chart(plural, key, value), f"spec.{_CHART_AT[plural]}.aplicacao.{key}",
                   _CHART if key == "chartRef" else _VERSION, id=why)
      for plural, key, value, why in [
          ("processes", "chartRef", "not a chart ref at all", "a chart ref in words"),
          ("processes", "chartRef", "oci://", "an oci chart ref without a registry"),
          ("processes", "chartRef", "https://charts.example/app", "a chart ref that is an https URL"),
          ("processes", "chartRef", "repo/sub/chart", "a repository-style chart ref with two slashes"),
          ("processes", "version", "???", "a chart version of question marks"),
          ("processes", "version", ">= 1.0 ?", "a semver range with a stray character"),
          ("ephemeralpools", "chartRef", "oci://ghcr.io/Org/App", "a member oci chart ref with capitals"),
          ("ephemeralpools", "version", "1 .2", "a member chart version with a space inside"),
      ]),
]


def _object(plural: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    if plural == "processes":
        return _process(name, **spec)
    if plural == "ephemeralpools":
        doc = _pool(name)
        doc["spec"].update(spec)
        return doc
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "EphemeralAllocation", "metadata": {"name": name},
            "spec": {"requestor": {"kind": "manual"}, **spec}}


@pytest.mark.parametrize(("plural", "spec", "field", "fragment"), BAD_GRAMMAR)
async def test_the_api_server_refuses_a_value_outside_its_grammar_naming_the_field(
    kube: client.ApiClient,
    tatara_crds: list[dict[str, Any]],
    namespace: str,
    plural: str,
    spec: dict[str, Any],
    field: str,
    fragment: str,
) -> None:
    with pytest.raises(ApiException) as caught:
        await _objects(kube).create_namespaced_custom_object(GROUP, VERSION, namespace, plural,
                                                             _object(plural, "bad", spec))
    assert caught.value.status == 422
    message = json.loads(caught.value.body)["message"]
    assert f"{field}:" in message
    assert fragment in message


GOOD_GRAMMAR = [
    *({"boundary": {"timeout": t}} for t in ("0", "1h30m", "2h 15m", "20 min", "1 0m", "1.5h", "4.2s", "3M")),
    {"identity": {"parent": "seph.1.7"}},
    {"identity": {"parent": ""}},
    {"identity": {"parent": "01hzx3k9q8m2v7w4r5t6y0abcd.3"}},
    {"routing": {"hostnames": [{"app": "api", "cluster": "plo", "instance": "pr-7"}],
                 "backend": {"service": "a", "port": 80}}},
    {"encapsulates": {"kind": {"bareWorkload": {"namespace": "n", "selector": {"app": "api_v1.2", "tier": ""}}}}},
    *({"intent": {"aplicacao": {"chartRef": ref, "version": "1.0.0"}}}
      for ref in ("oci://ghcr.io/pleme-io/charts/lareira-demo-app", "oci://localhost:5000/charts/app", "oci://x",
                  "bitnami/nginx", "flux-system.charts/my_chart-1.2", "podinfo")),
    *({"intent": {"aplicacao": {"chartRef": "bitnami/nginx", "version": v}}}
      for v in ("", "*", "1", "1.x", "6.X.*", "^1.2", "~1.2.3", "~> 1.2", ">=1.0.0 <2.0.0",
                ">= 1.2, < 3.0.0 || >= 4.2.3", "1.2 - 1.4.5", "v1.2.3-rc.1+build.5", "!=1.3.0", "latest")),
]


@pytest.mark.parametrize("spec", GOOD_GRAMMAR, ids=[json.dumps(s) for s in GOOD_GRAMMAR])
async def test_the_api_server_admits_the_grammars_spellings(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str, spec: dict[str, Any]
) -> None:
    stored = await _objects(kube).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "processes", _process("good", **spec), dry_run="All")
    _assert_nothing_pruned(spec, stored["spec"])


# ----------------------------------------------------------------------------- pool size order (issue 28)


def _legacy_pool(name: str, **sizes: int) -> dict[str, Any]:
    """:func:`_pool` sized the legacy way (``desired`` 0) with ``sizes`` (``minSize`` etc.)."""
    doc = _pool(name)
    doc["spec"].update({"desired": 0, **sizes})
    return doc


# minSize ≤ desiredSize ≤ maxSize for legacy pools, maxSize 0 meaning no cap (docs/behaviour.md#pool-size-admission)
_ABOVE_MAX = "desiredSize must be at most maxSize when desired is 0"
_ABOVE_DESIRED = "minSize must be at most desiredSize when desired is 0"
BAD_SIZES = [  # (sizes, the field named, the message)
    ({"minSize": 4, "desiredSize": 5, "maxSize": 2}, "spec.desiredSize", _ABOVE_MAX),  # the issue's example
    ({"desiredSize": 3, "maxSize": 2}, "spec.desiredSize", _ABOVE_MAX),
    ({"minSize": 3, "desiredSize": 2}, "spec.minSize", _ABOVE_DESIRED),  # no cap
    ({"minSize": 3, "desiredSize": 1, "maxSize": 2}, "spec.minSize", _ABOVE_DESIRED),
]
GOOD_SIZES = [
    {"desiredSize": 5},  # maxSize 0: no cap
    {"minSize": 2, "desiredSize": 2, "maxSize": 2},
    {"minSize": 0, "desiredSize": 0, "maxSize": 1000},
    {"minSize": 1, "desiredSize": 3, "maxSize": 4},
    {"desired": 3, "minSize": 5, "desiredSize": 0, "maxSize": 1},  # desired-count sizing: not checked
]


async def test_the_api_server_refuses_only_legacy_pools_whose_sizes_are_out_of_order(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str
) -> None:
    objects = _objects(kube)
    for sizes, field, fragment in BAD_SIZES:
        with pytest.raises(ApiException) as caught:
            await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "ephemeralpools",
                                                          _legacy_pool("bad", **sizes), dry_run="All")
        assert caught.value.status == 422, sizes
        message = json.loads(caught.value.body)["message"]
        assert f"{field}: Invalid value: {fragment}" in message, (sizes, message)
    for sizes in GOOD_SIZES:
        stored = await objects.create_namespaced_custom_object(
            GROUP, VERSION, namespace, "ephemeralpools", _legacy_pool("good", **sizes), dry_run="All")
        assert {k: stored["spec"][k] for k in sizes} == sizes


# ----------------------------------------------------------------------------- columns of every kind (issue 28)

_READY_FALSE = {"status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "MaxSizeReached",
                "message": "at maxSize 1: 1 active member(s)"}


@pytest.mark.parametrize(("plural", "doc", "status", "columns", "expected"), [
    pytest.param("ephemeralpools", _legacy_pool("capped", desiredSize=1, maxSize=1),
                 {"phase": "ScalingUp", "readyCount": 0, "allocatedCount": 1},
                 ["Name", "Desired", "Free", "Allocated", "Phase", "Ready", "Reason", "Message", "Age"],
                 {"Desired": 1, "Free": 0, "Allocated": 1, "Phase": "ScalingUp"}, id="EphemeralPool"),
    pytest.param("ephemeralallocations", _object("ephemeralallocations", "waiting",
                                                          {"poolRef": {"name": "capped", "namespace": "pools"}}),
                 {"phase": "Queued", "message": "waiting for a free member of pool capped"},
                 ["Name", "Pool", "Phase", "Process", "Requestor", "Ready", "Reason", "Message", "Age"],
                 {"Pool": "capped", "Phase": "Queued", "Requestor": "manual"}, id="EphemeralAllocation"),
])
async def test_kubectl_get_shows_the_ready_condition_of_pools_and_allocations_as_of_processes(
    kube: client.ApiClient, tatara_crds: list[dict[str, Any]], namespace: str, plural: str, doc: dict[str, Any],
    status: dict[str, Any], columns: list[str], expected: dict[str, Any],
) -> None:
    objects = _objects(kube)
    name = doc["metadata"]["name"]
    await objects.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, doc)
    conditions = [{"type": "Ready", **_READY_FALSE}, {"type": "Reconciling", **_READY_FALSE},
                  {"type": "Stalled", **_READY_FALSE, "status": "True"}]
    await objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, plural, name, {"status": {**status, "conditions": conditions}},
        _content_type="application/merge-patch+json")
    table = await _table(kube, f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{plural}")
    definitions = table["columnDefinitions"]
    assert [c["name"] for c in definitions] == columns
    priorities = {c["name"]: c["priority"] for c in definitions}
    assert (priorities["Ready"], priorities["Reason"], priorities["Message"]) == (0, 1, 1)
    (row,) = table["rows"]
    cells = dict(zip([c["name"] for c in definitions], row["cells"], strict=True))
    assert {k: cells[k] for k in expected} == expected
    assert (cells["Ready"], cells["Reason"], cells["Message"]) == (
        "False", "MaxSizeReached", "at maxSize 1: 1 active member(s)")
