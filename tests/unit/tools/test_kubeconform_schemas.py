"""tools.kubeconform_schemas: the conversion of kubeconform's ``scripts/openapi2jsonschema.py`` (upstream's own
test cases for ``additional_properties`` and ``replace_int_or_string``), file names, the root switch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.kubeconform_schemas import crd_json_schemas, schema_file_name, write_json_schemas


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
