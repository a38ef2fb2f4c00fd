"""JSON schemas for kubeconform from CRDs and from Kubernetes's OpenAPI, made the way ``openapi2jsonschema`` makes them.

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

Kubernetes's own kinds (Deployment, Service, RBAC, PodDisruptionBudget, CustomResourceDefinition …) get theirs from
the ``api/openapi-spec/swagger.json`` of the release we test (:func:`tools.k8s_types.swagger_path`), converted as
upstream's ``openapi2jsonschema`` (instrumenta's, whose ``--expanded --kubernetes --stand-alone --strict`` output is
kubeconform's default ``{version}-standalone-strict`` schema set, yannh/kubernetes-json-schema ``build.sh``) converts
them (:func:`kubernetes_json_schemas`):

- ``IntOrString`` becomes ``oneOf: [string, integer]`` and ``Quantity`` ``oneOf: [string, number]`` (its
  ``--kubernetes`` processors: ``cpu: 1`` is accepted as every Kubernetes tool accepts it);
- ``apiVersion`` and ``kind`` get an ``enum`` from ``x-kubernetes-group-version-kind`` (``--expanded``);
- every object with ``properties`` and no ``additionalProperties`` is closed, the root too (``--strict``);
- references are resolved in place (``--stand-alone``), except to a definition on a reference cycle
  (``JSONSchemaProps``, inside a CustomResourceDefinition): upstream cannot inline those, so it refuses the
  CustomResourceDefinition kinds under ``--stand-alone`` and ships no schema for them (yannh/kubernetes-json-schema
  issue 15, "customresourcedefinition.json missing in strict/standalone/local folders"); here they stay
  ``$ref: "#/definitions/<name>"`` with the definition embedded under ``definitions`` in the same file;
- a field that its object does not list as ``required`` also accepts ``null`` (``allow_null_optional_fields``, as
  the published files have it, after resolving: ``metadata`` is ``[object, null]``; the root's ``required`` and
  list items, such as the two branches of an IntOrString, are not read, as upstream does not read them).

Each is named as kubeconform's ``{{ .ResourceKind }}{{ .KindSuffix }}.json`` template expects it
(:data:`KUBERNETES_SCHEMA_LOCATION`, :func:`kubernetes_schema_file_name`): ``deployment-apps-v1.json``,
``configmap-v1.json``, ``role-rbac-v1.json``.

Usage: ``python -m tools.kubeconform_schemas DIR`` writes the schemas of :func:`tools.crds.all_crds`;
``python -m tools.kubeconform_schemas --kubernetes DIR`` those of every Kubernetes kind of the release.
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
    schemas: dict[str, dict[str, Any]] = {}
    for crd in crds:
        for name, schema in crd_json_schemas(crd, deny_root=deny_root).items():
            if name in schemas:
                raise ValueError(f"{name}: two CRDs have the same kind and version ({crd['metadata']['name']})")
            schemas[name] = schema
    return write_schemas(schemas, directory)


KUBERNETES_SCHEMA_LOCATION = "{{ .ResourceKind }}{{ .KindSuffix }}.json"
"""The ``-schema-location`` template (relative to the schema folder) matching :func:`kubernetes_schema_file_name`:
the file part of kubeconform's default location (kubeconform ``pkg/registry``, ``schemaPath``)."""

JSON_SCHEMA = "http://json-schema.org/schema#"
"""The ``$schema`` openapi2jsonschema writes into every file."""

_DEFINITION = "#/definitions/"

_KUBERNETES_SPECIAL: dict[str, dict[str, Any]] = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
}
"""openapi2jsonschema's ``--kubernetes`` replacements of two definitions."""


def api_version(group: str, version: str) -> str:
    """``group/version``, or ``version`` alone for the core group (``""``)."""
    return f"{group}/{version}" if group else version


def kubernetes_schema_file_name(api_version: str, kind: str) -> str:
    """What kubeconform's ``{{ .ResourceKind }}{{ .KindSuffix }}.json`` gives for a document of ``api_version`` and
    ``kind``: the kind, ``-`` and the group's first label (none for the core group), ``-`` and the version,
    lowercased (kubeconform ``pkg/registry``, ``schemaPath``; openapi2jsonschema's ``--expanded`` names)."""
    group, _, version = api_version.rpartition("/")
    suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
    return f"{kind}{suffix}".lower() + ".json"


def _is_ref(node: Any) -> bool:
    """A JSON reference: a mapping whose ``$ref`` is a string (a *property* named ``$ref``, as JSONSchemaProps has,
    is a mapping, not a reference)."""
    return isinstance(node, dict) and isinstance(node.get("$ref"), str)


def _refs(node: Any) -> set[str]:
    """The definition names ``node`` references anywhere inside."""
    if _is_ref(node):
        return {node["$ref"].removeprefix(_DEFINITION)}
    if isinstance(node, dict):
        return {name for value in node.values() for name in _refs(value)}
    if isinstance(node, list):
        return {name for item in node for name in _refs(item)}
    return set()


def _cyclic(definitions: dict[str, Any]) -> set[str]:
    """The definitions that reach themselves through references (they cannot be inlined)."""
    edges = {name: _refs(schema) & definitions.keys() for name, schema in definitions.items()}
    cyclic: set[str] = set()
    for start in edges:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            name = todo.pop()
            if name == start:
                cyclic.add(start)
                break
            if name not in seen:
                seen.add(name)
                todo.extend(edges[name])
    return cyclic


def _inline(node: Any, definitions: dict[str, Any], cyclic: set[str]) -> Any:
    """``node`` with every reference replaced by (a copy of) what it references, resolved too, siblings of ``$ref``
    dropped as jsonref drops them; a reference to a :func:`_cyclic` definition is kept."""
    if _is_ref(node):
        name = node["$ref"].removeprefix(_DEFINITION)
        if name in cyclic:
            return {"$ref": _DEFINITION + name}
        return _inline(definitions[name], definitions, cyclic)
    if isinstance(node, dict):
        return {key: _inline(value, definitions, cyclic) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, definitions, cyclic) for item in node]
    return node


def _allow_null_optional_fields(data: Any, parent: Any = None, grand_parent: Any = None, key: str | None = None) -> Any:
    """openapi2jsonschema's ``allow_null_optional_fields``: every ``type: <t>`` becomes ``[<t>, "null"]`` unless the
    field is in its object's ``required``; returns a new value."""
    if not isinstance(data, dict):
        return data
    new: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict):
            new[k] = _allow_null_optional_fields(v, data, parent, k)
        elif isinstance(v, list):
            new[k] = [_allow_null_optional_fields(x, v, parent, k) for x in v]
        elif isinstance(v, str) and k == "type" and v != "null":
            required = isinstance(grand_parent, dict) and "required" in grand_parent and key in grand_parent["required"]
            new[k] = v if required else [v, "null"]
        else:
            new[k] = v
    return new


def _with_nullable_properties(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with int-or-string replaced and optional fields nullable under ``properties`` (the root stays)."""
    if "properties" in schema:
        schema["properties"] = _allow_null_optional_fields(_replace_int_or_string(schema["properties"]))
    return schema


def kubernetes_definitions(swagger: dict[str, Any]) -> dict[str, Any]:
    """The swagger's definitions as openapi2jsonschema's ``_definitions.json`` with ``--expanded --kubernetes
    --strict``: the two special types replaced, ``apiVersion``/``kind`` enums, objects closed (a new mapping)."""
    definitions: dict[str, Any] = copy.deepcopy(swagger["definitions"])
    definitions.update(copy.deepcopy(_KUBERNETES_SPECIAL))
    for schema in definitions.values():
        properties = schema.get("properties") or {}
        for gvk in schema.get("x-kubernetes-group-version-kind") or []:
            for field, value in (("apiVersion", api_version(gvk["group"], gvk["version"])), ("kind", gvk["kind"])):
                if field in properties and value not in properties[field].setdefault("enum", []):
                    properties[field]["enum"].append(value)
        _close_objects(schema)
    return definitions


def kubernetes_kinds(swagger: dict[str, Any]) -> dict[tuple[str, str], str]:
    """``(apiVersion, kind)`` → the definition of each kind the release serves (one group-version-kind)."""
    kinds: dict[tuple[str, str], str] = {}
    for name, schema in swagger["definitions"].items():
        gvks = schema.get("x-kubernetes-group-version-kind") or []
        if len(gvks) == 1 and "kind" in (schema.get("properties") or {}):
            (gvk,) = gvks
            kinds[(api_version(gvk["group"], gvk["version"]), gvk["kind"])] = name
    return kinds


def kubernetes_json_schemas(swagger: dict[str, Any],
                            kinds: Iterable[tuple[str, str]] | None = None) -> dict[str, dict[str, Any]]:
    """File name → standalone strict JSON schema of each ``(apiVersion, kind)`` in ``kinds`` (every kind the swagger
    has when None), as the module docstring describes.

    Raises:
        KeyError: a kind asked for is not in the swagger.
    """
    served = kubernetes_kinds(swagger)
    definitions = kubernetes_definitions(swagger)
    cyclic = _cyclic(definitions)
    out: dict[str, dict[str, Any]] = {}
    for api, kind in sorted(served if kinds is None else set(kinds)):
        if (api, kind) not in served:
            raise KeyError(f"{api} {kind}: not a kind of this Kubernetes release")
        name = served[(api, kind)]
        schema: dict[str, Any] = _inline(definitions[name], definitions, cyclic)
        schema.setdefault("type", "object")
        schema["additionalProperties"] = False
        schema["$schema"] = JSON_SCHEMA
        _with_nullable_properties(schema)
        embedded: dict[str, Any] = {}
        todo = sorted(_refs(schema))
        while todo:
            ref = todo.pop()
            if ref not in embedded:
                embedded[ref] = _with_nullable_properties(_inline(definitions[ref], definitions, cyclic))
                todo.extend(_refs(embedded[ref]))
        if embedded:
            schema["definitions"] = dict(sorted(embedded.items()))
        out[kubernetes_schema_file_name(api, kind)] = schema
    return out


def write_schemas(schemas: dict[str, dict[str, Any]], directory: Path) -> list[Path]:
    """Write each file name → schema into ``directory`` (created); return the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, schema in schemas.items():
        path = directory / name
        path.write_text(json.dumps(schema, indent=2) + "\n")
        written.append(path)
    return written


def read_swagger() -> dict[str, Any]:
    """The swagger.json of the Kubernetes release we test, from the Go module cache; the module is downloaded
    from the Go module proxy first when the cache lacks it (``tatara control-plane build`` downloads it too, but
    a plane built earlier does not bring back a module cache emptied since).

    Raises:
        tools.controlplane.build.BuildError: ``go`` is missing or the download failed.
        FileNotFoundError: the downloaded module has no swagger.json.
    """
    import tempfile

    from tools.controlplane.build import KUBERNETES_VERSION, run_go
    from tools.k8s_types import swagger_path

    path = swagger_path()
    if not path.is_file():
        with tempfile.TemporaryDirectory() as empty:
            info = json.loads(run_go("mod", "download", "-json", f"k8s.io/kubernetes@{KUBERNETES_VERSION}",
                                     cwd=Path(empty), purpose="the Kubernetes schemas", env={"GOFLAGS": "-mod=mod"}))
        path = Path(info["Dir"]) / "api" / "openapi-spec" / "swagger.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found in k8s.io/kubernetes@{KUBERNETES_VERSION}")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def main(argv: list[str] | None = None) -> int:
    """Write the schemas of every CRD ``tatara up`` installs (or, with ``--kubernetes``, of every Kubernetes kind)
    into the folder given, print the files."""
    from tools.crds import all_crds

    args = sys.argv[1:] if argv is None else argv
    kubernetes = args[:1] == ["--kubernetes"]
    if len(args) != 1 + kubernetes:
        print("usage: python -m tools.kubeconform_schemas [--kubernetes] DIR", file=sys.stderr)
        return 2
    directory = Path(args[-1])
    paths = (write_schemas(kubernetes_json_schemas(read_swagger()), directory) if kubernetes
             else write_json_schemas(all_crds(), directory))
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
