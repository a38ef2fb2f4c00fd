"""JSON schemas for kubeconform from CRDs, made the way kubeconform's ``openapi2jsonschema`` makes them.

The kubeconform README ("CustomResourceDefinition (CRD) Support", "Converting an OpenAPI file to a JSON
Schema") validates custom resources against one JSON schema per kind and version, converted from the
CRD's ``openAPIV3Schema``, named ``{kind}_{version}`` lowercased (its ``FILENAME_FORMAT`` default) plus
``.json``, and found through ``-schema-location '<dir>/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json'``
(``ResourceKind`` is lowercased by kubeconform; ``ResourceAPIVersion`` is ``v1alpha1`` in
``tatara.pleme.io/v1alpha1``). The conversion is the one of upstream's ``scripts/openapi2jsonschema.py``
at the pinned release (:data:`tools.controlplane.kubeconform.KUBECONFORM_VERSION`):

- every object schema that declares ``properties`` and no ``additionalProperties`` gets
  ``additionalProperties: false`` (what makes ``-strict`` refuse unknown fields); the root too when
  ``DENY_ROOT_ADDITIONAL_PROPERTIES`` is set (``deny_root``), which is why a CRD must declare
  ``apiVersion``, ``kind`` and ``metadata`` at its root;
- ``format: int-or-string`` becomes ``oneOf: [string, integer]``.

Usage: ``python -m tools.kubeconform_schemas DIR`` writes the schemas of :func:`tools.crds.all_crds`.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SCHEMA_LOCATION = "{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
"""The ``-schema-location`` template (relative to the schema folder) matching :func:`schema_file_name`."""


def schema_file_name(kind: str, version: str) -> str:
    """``{kind}_{version}.json``, lowercased (openapi2jsonschema's default ``FILENAME_FORMAT``)."""
    return f"{kind}_{version}".lower() + ".json"


def _close_objects(data: Any, skip: bool = False) -> Any:
    """openapi2jsonschema's ``additional_properties``: ``additionalProperties: false`` wherever a mapping
    has ``properties`` and no ``additionalProperties`` (except the mapping itself when ``skip``), in place."""
    if isinstance(data, dict):
        if "properties" in data and not skip and "additionalProperties" not in data:
            data["additionalProperties"] = False
        for value in list(data.values()):
            _close_objects(value)
    return data


def _replace_int_or_string(data: Any) -> Any:
    """openapi2jsonschema's ``replace_int_or_string``: ``format: int-or-string`` becomes a string|integer oneOf."""
    if not isinstance(data, dict):
        return data
    new: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            if value.get("format") == "int-or-string":
                new[key] = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
            else:
                new[key] = _replace_int_or_string(value)
        elif isinstance(value, list):
            new[key] = [_replace_int_or_string(item) for item in value]
        else:
            new[key] = value
    return new


def crd_json_schemas(crd: dict[str, Any], deny_root: bool = True) -> dict[str, dict[str, Any]]:
    """File name → JSON schema, one per version of ``crd`` (an ``apiextensions.k8s.io/v1`` CRD document)
    that has an ``openAPIV3Schema``; ``deny_root`` closes the root too (``DENY_ROOT_ADDITIONAL_PROPERTIES``)."""
    kind = crd["spec"]["names"]["kind"]
    out: dict[str, dict[str, Any]] = {}
    for version in crd["spec"].get("versions") or []:
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            continue
        closed = _close_objects(copy.deepcopy(schema), skip=not deny_root)
        out[schema_file_name(kind, version["name"])] = _replace_int_or_string(closed)
    return out


def write_json_schemas(crds: Iterable[dict[str, Any]], directory: Path, deny_root: bool = True) -> list[Path]:
    """Write :func:`crd_json_schemas` of every CRD into ``directory`` (created); return the files written.

    Raises:
        ValueError: two CRDs give the same file name (same kind and version in two groups).
    """
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for crd in crds:
        for name, schema in crd_json_schemas(crd, deny_root=deny_root).items():
            path = directory / name
            if path in written:
                raise ValueError(f"{name}: two CRDs have the same kind and version ({crd['metadata']['name']})")
            path.write_text(json.dumps(schema, indent=2) + "\n")
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    """Write the schemas of every CRD ``tatara up`` installs into the folder given, print the files."""
    from tools.crds import all_crds

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tools.kubeconform_schemas DIR", file=sys.stderr)
        return 2
    for path in write_json_schemas(all_crds(), Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
