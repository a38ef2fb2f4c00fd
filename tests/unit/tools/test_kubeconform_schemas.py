"""tools.kubeconform_schemas: the conversion of kubeconform's ``scripts/openapi2jsonschema.py`` (upstream's own
test cases for ``additional_properties`` and ``replace_int_or_string``), file names, the root switch; and the
Kubernetes kinds converted from a swagger as openapi2jsonschema's ``--expanded --kubernetes --stand-alone --strict``
does, named as kubeconform's ``{{ .ResourceKind }}{{ .KindSuffix }}.json`` expects (kubeconform ``pkg/registry``
``registry_test.go``; file names and fields of the published yannh/kubernetes-json-schema
``master-standalone-strict`` files)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools import k8s_types
from tools.kubeconform_schemas import (
    JSON_SCHEMA,
    crd_json_schemas,
    kubernetes_json_schemas,
    kubernetes_schema_file_name,
    main,
    schema_file_name,
    write_json_schemas,
)


def _crd(kind: str, group: str, schema: dict[str, Any], *versions: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{kind.lower()}s.{group}"},
            "spec": {"group": group, "names": {"kind": kind},
                     "versions": [{"name": v, "schema": {"openAPIV3Schema": schema}} for v in versions]}}


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {"port": {"format": "int-or-string"}},
                 "required": ["port"]},
        "status": {"type": "object", "additionalProperties": {"type": "string"}},
        "labels": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


def test_file_names_are_kind_underscore_version_lowercased() -> None:
    assert schema_file_name("EphemeralPool", "v1alpha1") == "ephemeralpool_v1alpha1.json"
    assert set(crd_json_schemas(_crd("HelmRelease", "helm.toolkit.fluxcd.io", SCHEMA, "v2", "v2beta2"))) == {
        "helmrelease_v2.json", "helmrelease_v2beta2.json"}


@pytest.mark.parametrize("deny_root", [True, False])
def test_objects_with_properties_are_closed(deny_root: bool) -> None:
    [schema] = crd_json_schemas(_crd("Thing", "example.com", SCHEMA, "v1"), deny_root=deny_root).values()
    assert ("additionalProperties" in schema) is deny_root
    spec = schema["properties"]["spec"]
    assert spec["additionalProperties"] is False
    assert spec["properties"]["port"] == {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    assert schema["properties"]["status"]["additionalProperties"] == {"type": "string"}  # left alone
    assert "additionalProperties" not in schema["properties"]["labels"]  # no properties: open
    assert "additionalProperties" not in SCHEMA["properties"]["spec"]  # the input is not modified


def test_write_refuses_two_crds_with_one_file_name(tmp_path: Path) -> None:
    crds = [_crd("Thing", "a.example.com", SCHEMA, "v1"), _crd("Thing", "b.example.com", SCHEMA, "v1")]
    with pytest.raises(ValueError, match=r"thing_v1\.json"):
        write_json_schemas(crds, tmp_path)


def test_write_one_json_file_per_kind_and_version(tmp_path: Path) -> None:
    [path] = write_json_schemas([_crd("Thing", "example.com", SCHEMA, "v1")], tmp_path / "out")
    assert path == tmp_path / "out" / "thing_v1.json"
    assert json.loads(path.read_text())["properties"]["spec"]["additionalProperties"] is False


@pytest.mark.parametrize(("api_version", "kind", "name"), [
    ("apps/v1", "Deployment", "deployment-apps-v1.json"),  # kubeconform's registry_test.go
    ("v1", "Service", "service-v1.json"),  # kubeconform's registry_test.go
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterrole-rbac-v1.json"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest", "certificatesigningrequest-certificates-v1.json"),
    ("batch/v1", "CronJob", "cronjob-batch-v1.json"),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudget-policy-v1.json"),
])
def test_kubernetes_file_names_are_the_ones_kubeconform_looks_for(api_version: str, kind: str, name: str) -> None:
    assert kubernetes_schema_file_name(api_version, kind) == name


INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
PROPS = "io.k8s.example.v1.Props"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/definitions/{name}"}


SWAGGER: dict[str, Any] = {"definitions": {
    "io.k8s.api.example.v1.Widget": {
        "description": "A widget.", "type": "object", "required": ["spec"],
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                       "metadata": {**_ref(META), "description": "dropped beside $ref, as jsonref drops it"},
                       "spec": _ref("io.k8s.api.example.v1.WidgetSpec")},
        "x-kubernetes-group-version-kind": [{"group": "example.k8s.io", "kind": "Widget", "version": "v1"}],
    },
    "io.k8s.api.example.v1.WidgetSpec": {
        "type": "object", "required": ["port"],
        "properties": {"port": _ref(INT_OR_STRING), "size": _ref(QUANTITY),
                       "replicas": {"type": "integer", "format": "int32"},
                       "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                       "schema": _ref(PROPS)},
    },
    "io.k8s.api.core.v1.Pod": {
        "type": "object", "properties": {"kind": {"type": "string"}, "metadata": _ref(META)},
        "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
    },
    META: {"type": "object", "properties": {"name": {"type": "string"}}},
    # recursive, as JSONSchemaProps is; it has a property named $ref, which is no reference
    PROPS: {"type": "object", "properties": {"$ref": {"type": "string"},
                                             "properties": {"type": "object", "additionalProperties": _ref(PROPS)}}},
    INT_OR_STRING: {"type": "string", "format": "int-or-string"},
    QUANTITY: {"type": "string"},
}}


def test_kubernetes_kinds_are_inlined_closed_and_nullable_where_optional() -> None:
    before = json.dumps(SWAGGER, sort_keys=True)
    schemas = kubernetes_json_schemas(SWAGGER)
    assert json.dumps(SWAGGER, sort_keys=True) == before  # the input is not modified
    assert set(schemas) == {"widget-example-v1.json", "pod-v1.json"}

    widget = schemas["widget-example-v1.json"]
    assert (widget["type"], widget["additionalProperties"], widget["$schema"]) == ("object", False, JSON_SCHEMA)
    assert widget["$schema"] == "http://json-schema.org/schema#"
    root = widget["properties"]
    # --expanded: the enums of the group-version-kind; optional fields also take null
    assert root["apiVersion"] == {"type": ["string", "null"], "enum": ["example.k8s.io/v1"]}
    assert root["kind"] == {"type": ["string", "null"], "enum": ["Widget"]}
    # --stand-alone: the reference replaced by its target, the $ref's sibling gone
    assert root["metadata"] == {"type": ["object", "null"], "properties": {"name": {"type": ["string", "null"]}},
                                "additionalProperties": False}
    spec = root["spec"]
    assert (spec["type"], spec["additionalProperties"]) == (["object", "null"], False)
    # --kubernetes: IntOrString and Quantity; their branches are list items, nullable even under a required field
    # (port), as the published service-v1.json's targetPort is
    assert spec["properties"]["port"] == {"oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"]}]}
    assert spec["properties"]["size"] == {"oneOf": [{"type": ["string", "null"]}, {"type": ["number", "null"]}]}
    assert spec["properties"]["replicas"] == {"type": ["integer", "null"], "format": "int32"}
    assert spec["properties"]["labels"] == {"type": ["object", "null"], "additionalProperties": {
        "type": ["string", "null"]}}  # a map: left open
    assert schemas["pod-v1.json"]["properties"]["kind"]["enum"] == ["Pod"]


def test_a_required_field_stays_non_null_below_the_root() -> None:
    """As openapi2jsonschema does it: ``required`` is read from the field's object, except at the root (the
    published files have a nullable ``spec`` where the swagger requires it)."""
    swagger = {"definitions": {"io.k8s.api.example.v1.Thing": {
        "type": "object", "required": ["spec"],
        "properties": {"kind": {"type": "string"}, "spec": {
            "type": "object", "required": ["size"], "properties": {"size": {"type": "integer"},
                                                                   "name": {"type": "string"}}}},
        "x-kubernetes-group-version-kind": [{"group": "example.io", "kind": "Thing", "version": "v1"}]}}}
    [thing] = kubernetes_json_schemas(swagger).values()
    spec = thing["properties"]["spec"]
    assert spec["type"] == ["object", "null"]
    assert spec["properties"] == {"size": {"type": "integer"}, "name": {"type": ["string", "null"]}}


def test_a_recursive_definition_is_referenced_and_embedded_once() -> None:
    widget = kubernetes_json_schemas(SWAGGER, [("example.k8s.io/v1", "Widget")])["widget-example-v1.json"]
    assert widget["properties"]["spec"]["properties"]["schema"] == _ref(PROPS)
    assert set(widget["definitions"]) == {PROPS}
    props = widget["definitions"][PROPS]
    assert props["additionalProperties"] is False
    assert props["properties"]["$ref"] == {"type": ["string", "null"]}  # a property, not a reference
    assert props["properties"]["properties"] == {"type": ["object", "null"], "additionalProperties": _ref(PROPS)}
    assert "definitions" not in kubernetes_json_schemas(SWAGGER, [("v1", "Pod")])["pod-v1.json"]


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(KeyError, match="apps/v1 Deployment"):
        kubernetes_json_schemas(SWAGGER, [("apps/v1", "Deployment")])


def test_usage_needs_one_folder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--kubernetes"]) == 2
    assert "usage" in capsys.readouterr().err


def _release_swagger() -> dict[str, Any]:
    path = k8s_types.swagger_path()
    if not path.is_file():
        pytest.skip(f"{path} not downloaded (tatara control-plane build downloads it)")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_the_release_kinds_match_the_published_standalone_strict_files() -> None:
    """Fields as yannh/kubernetes-json-schema's master-standalone-strict configmap-v1.json and service-v1.json
    have them (made by openapi2jsonschema from the master swagger)."""
    schemas = kubernetes_json_schemas(_release_swagger(), [("v1", "ConfigMap"), ("v1", "Service")])
    configmap, service = schemas["configmap-v1.json"], schemas["service-v1.json"]
    assert configmap["properties"]["apiVersion"]["type"] == ["string", "null"]
    assert configmap["properties"]["apiVersion"]["enum"] == ["v1"]
    assert configmap["properties"]["kind"]["enum"] == ["ConfigMap"]
    assert configmap["properties"]["binaryData"]["additionalProperties"] == {"format": "byte",
                                                                            "type": ["string", "null"]}
    meta = configmap["properties"]["metadata"]
    assert (meta["type"], meta["additionalProperties"]) == (["object", "null"], False)
    owner = meta["properties"]["ownerReferences"]["items"]
    assert (owner["type"], owner["additionalProperties"]) == (["object", "null"], False)
    assert {k: owner["properties"][k]["type"] for k in ("uid", "controller")} == {"uid": "string",
                                                                                 "controller": ["boolean", "null"]}
    assert (configmap["type"], configmap["additionalProperties"]) == ("object", False)
    port = service["properties"]["spec"]["properties"]["ports"]["items"]["properties"]
    assert port["targetPort"] == {"oneOf": [{"type": ["string", "null"]}, {"type": ["integer", "null"]}]}
    assert (port["port"]["type"], port["port"]["format"]) == ("integer", "int32")
