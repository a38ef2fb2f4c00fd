"""The four generated tatara CRDs: drift, structural-schema invariants, names and columns.

Expected names, scopes, short names and printer columns are copied by hand from
docs/wire-format.md#kinds. The
reference's stale chart CRDs (tests/fixtures/upstream-tatara/crds, descriptions stripped)
must be a subset of ours: every property path they declare exists in our schema.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from tools.crd import CrdSchemaError, generated_files, structural_schema, walk_schema
from tools.gen_crds import drift

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = ROOT / "tests" / "fixtures" / "upstream-tatara" / "crds"

FILES = {
    "Process": "charts/tatara-reconciler/crds/processes.yaml",
    "ProcessTable": "charts/tatara-reconciler/crds/processtables.yaml",
    "EphemeralPool": "charts/tatara-pool-reconciler/crds/ephemeralpools.yaml",
    "EphemeralAllocation": "charts/tatara-pool-reconciler/crds/ephemeralallocations.yaml",
}

# kind → (plural, singular, shortNames, scope)
NAMES = {
    "Process": ("processes", "process", ["proc"], "Namespaced"),
    "ProcessTable": ("processtables", "processtable", ["pt"], "Cluster"),
    "EphemeralPool": ("ephemeralpools", "ephemeralpool", ["epool"], "Namespaced"),
    "EphemeralAllocation": ("ephemeralallocations", "ephemeralallocation", ["ealloc"], "Namespaced"),
}

# kind → [(name, type, jsonPath)] in order
COLUMNS = {
    "Process": [
        ("PID", "string", ".status.pid"),
        ("Phase", "string", ".status.phase"),
        ("Type", "string", ".spec.classification.pointType"),
        ("Substrate", "string", ".spec.classification.substrate"),
        ("Gen", "integer", ".status.attestation.generation"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
    "ProcessTable": [
        ("Procs", "integer", ".status.processCount"),
        ("Ready", "integer", ".status.readyCount"),
        ("NextPID", "integer", ".spec.nextSequence"),
        ("Depth", "integer", ".spec.maxDepth"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
    "EphemeralPool": [
        ("Desired", "integer", ".spec.desiredSize"),
        ("Free", "integer", ".status.readyCount"),  # the reference's "Ready": RENAMED
        ("Allocated", "integer", ".status.allocatedCount"),
        ("Phase", "string", ".status.phase"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
    "EphemeralAllocation": [
        ("Pool", "string", ".spec.poolRef.name"),
        ("Phase", "string", ".status.phase"),
        ("Process", "string", ".status.assignedProcess.name"),
        ("Requestor", "string", ".spec.requestor.kind"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ],
}

# kubectl's view of the Ready condition (issue 17), ours only: (name, type, jsonPath, priority)
_READY = ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status', None)
_REASON = ("Reason", "string", '.status.conditions[?(@.type=="Ready")].reason', 1)
_MESSAGE = ("Message", "string", '.status.conditions[?(@.type=="Ready")].message', 1)
ADDED_COLUMNS = {
    "Process": [_READY, _REASON, _MESSAGE],
    "ProcessTable": [],  # no conditions, no message; its "Ready" is the reference's count
    "EphemeralPool": [_READY, _REASON, _MESSAGE],  # issue 28: every kind with conditions reads the same
    "EphemeralAllocation": [_READY, _REASON, _MESSAGE],
}

# reference column name → ours, where ours differs (issue 28: the pool's count of Free members is "Free",
# so that its "Ready" is the condition's as on every other kind; docs/divergences.md#crd-columns)
RENAMED = {"EphemeralPool": {"Ready": "Free"}}

CATEGORIES = {
    "Process": ["tatara", "all"],
    "ProcessTable": ["tatara"],
    "EphemeralPool": ["tatara", "all"],
    "EphemeralAllocation": ["tatara", "all"],
}

ROOT_TYPE_META = {
    "apiVersion": "string",
    "kind": "string",
}

_CONDITION_PARAMS = ("preconditions[].params", "postconditions[].params")

# Free JSON (docs/wire-format.md#free-form-json): params, valuesOverlay, guest.spec, the values of
# helmValues and of lisp bindings, and the same fields in the pool template.
PRESERVE_UNKNOWN = {
    "Process": {
        *(f".spec.boundary.{p}" for p in _CONDITION_PARAMS),
        ".spec.intent.flux.helmValues",
        ".spec.intent.lisp.bindings",
        ".spec.intent.aplicacao.valuesOverlay",
        ".spec.intent.guest.spec",
        *(f".status.boundary.{p}" for p in _CONDITION_PARAMS),
    },
    "ProcessTable": set(),
    "EphemeralPool": {
        *(f".spec.template.{p}" for p in _CONDITION_PARAMS),
        ".spec.template.aplicacao.valuesOverlay",
    },
    "EphemeralAllocation": set(),
}

# Fields our encoder writes as `null` when unset (the reference writes them "always").
NULLABLE = {
    "Process": {
        *(f".spec.boundary.{p}" for p in _CONDITION_PARAMS),
        ".spec.intent.aplicacao.valuesOverlay",
        *(f".status.boundary.{p}" for p in _CONDITION_PARAMS),
    },
    "ProcessTable": set(),
    "EphemeralPool": {
        *(f".spec.template.{p}" for p in _CONDITION_PARAMS),
        ".spec.template.aplicacao.valuesOverlay",
    },
    "EphemeralAllocation": set(),
}


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return generated_files()


@pytest.fixture(scope="module")
def docs(generated: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = {}
    for text in generated.values():
        doc = yaml.safe_load(text)
        out[doc["spec"]["names"]["kind"]] = doc
    return out


def _root(doc: Mapping[str, Any]) -> dict[str, Any]:
    (version,) = doc["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _all_dicts(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _all_dicts(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _all_dicts(value, f"{path}/{i}")


def _junction_branches(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _all_keys(node: Any) -> Iterator[str]:
    """Every mapping key in a value validation (the contents of ``required`` lists excluded)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            if key != "required":
                yield from _all_keys(value)
    elif isinstance(node, list):
        for value in node:
            yield from _all_keys(value)


KINDS = list(FILES)


def test_one_file_per_kind_in_the_owning_chart(generated: dict[str, str]) -> None:
    assert sorted(generated) == sorted(FILES.values())


def test_checked_in_crds_match_the_models() -> None:
    diffs = drift(ROOT)
    assert not diffs, "checked-in CRDs drifted; run `python -m tools.gen_crds`:\n" + "\n".join(diffs.values())


def test_generation_is_deterministic(generated: dict[str, str]) -> None:
    """The same files from another interpreter with another hash seed (set and dict-of-set order)."""
    script = "import json; from tools.crd import generated_files; print(json.dumps(generated_files()))"
    env = {**os.environ, "PYTHONHASHSEED": "4242" if os.environ.get("PYTHONHASHSEED") != "4242" else "7"}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120, check=True)
    assert json.loads(result.stdout) == generated


@pytest.mark.parametrize("kind", KINDS)
def test_names_scope_and_group_follow_the_spec(docs: dict[str, dict[str, Any]], kind: str) -> None:
    doc = docs[kind]
    plural, singular, short, scope = NAMES[kind]
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["metadata"]["name"] == f"{plural}.tatara.pleme.io"
    assert doc["spec"]["group"] == "tatara.pleme.io"
    assert doc["spec"]["scope"] == scope
    assert doc["spec"]["names"] == {
        "kind": kind,
        "plural": plural,
        "singular": singular,
        "shortNames": short,
        "categories": CATEGORIES[kind],
    }
    (version,) = doc["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}


@pytest.mark.parametrize("kind", KINDS)
def test_printer_columns_are_the_specs_then_the_ready_condition_then_age(
    docs: dict[str, dict[str, Any]], kind: str
) -> None:
    (version,) = docs[kind]["spec"]["versions"]
    got = [(c["name"], c["type"], c["jsonPath"], c.get("priority")) for c in version["additionalPrinterColumns"]]
    spec = [(*c, None) for c in COLUMNS[kind]]
    assert got == [*spec[:-1], *ADDED_COLUMNS[kind], spec[-1]]
    added = {c[0] for c in ADDED_COLUMNS[kind]}
    assert all(c.get("description") for c in version["additionalPrinterColumns"] if c["name"] in added)


def _properties(schema: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every named field (what ``kubectl explain`` lists), not list items or map values themselves."""
    for name, sub in (schema.get("properties") or {}).items():
        yield f"{path}.{name}", sub
        yield from _properties(sub, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        if isinstance(schema.get(key), Mapping):
            yield from _properties(schema[key], path + suffix)


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_has_a_description_that_says_more_than_its_path(
    docs: dict[str, dict[str, Any]], kind: str
) -> None:
    fields = dict(_properties(_root(docs[kind])))
    # `metadata` is bare `{type: object}` as controller-gen writes it: the API server publishes ObjectMeta's
    # own schema and descriptions in its place
    del fields[".metadata"]
    assert len(fields) > 25
    assert [p for p, node in fields.items() if not node.get("description")] == []
    path_only = [p for p, node in fields.items() if node["description"].strip().rstrip(".").strip("`") in p]
    assert path_only == []


class _Undocumented(msgspec.Struct):
    """A model with one documented and one undocumented field."""

    documented: str
    """Says what it is."""
    bare: int = 0


def test_the_generator_refuses_a_field_without_a_description() -> None:
    with pytest.raises(CrdSchemaError, match=r"fields without a description.*\bbare\b"):
        structural_schema(_Undocumented, require_descriptions=True)
    assert "description" not in structural_schema(_Undocumented)["properties"]["bare"]


@pytest.mark.parametrize("kind", KINDS)
def test_the_root_schema_declares_api_version_kind_and_metadata(docs: dict[str, dict[str, Any]], kind: str) -> None:
    root = _root(docs[kind])
    assert list(root["properties"]) == ["apiVersion", "kind", "metadata", "spec", "status"]
    for name, type_ in ROOT_TYPE_META.items():
        assert root["properties"][name]["type"] == type_
        assert root["properties"][name]["description"]
    assert root["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize("kind", KINDS)
def test_names_and_columns_equal_the_reference_crd(docs: dict[str, dict[str, Any]], kind: str) -> None:
    ref = yaml.safe_load((UPSTREAM / Path(FILES[kind]).name).read_text())
    ours = docs[kind]
    assert ours["metadata"]["name"] == ref["metadata"]["name"]
    assert ours["spec"]["scope"] == ref["spec"]["scope"]
    for key in ("kind", "plural", "singular", "shortNames"):
        assert ours["spec"]["names"][key] == ref["spec"]["names"][key], key
    assert ref["spec"]["names"]["categories"] == []  # ours: CATEGORIES (docs/divergences.md#crd-columns)
    (ref_version,) = ref["spec"]["versions"]
    (our_version,) = ours["spec"]["versions"]
    added = set(ADDED_COLUMNS[kind])
    kept = [c for c in our_version["additionalPrinterColumns"]
            if (c["name"], c["type"], c["jsonPath"], c.get("priority")) not in added]
    renamed = RENAMED.get(kind, {})
    assert kept == [{**c, "name": renamed.get(c["name"], c["name"])} for c in ref_version["additionalPrinterColumns"]]
    assert our_version["subresources"] == ref_version["subresources"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_property_of_the_reference_schema_exists_in_ours(docs: dict[str, dict[str, Any]], kind: str) -> None:
    ref = yaml.safe_load((UPSTREAM / Path(FILES[kind]).name).read_text())
    ours = dict(walk_schema(_root(docs[kind])))
    missing = []
    narrower_enums = []
    for path, node in walk_schema(_root(ref)):
        if path not in ours:
            missing.append(path)
        elif "enum" in node and not set(node["enum"]) <= set(ours[path].get("enum", node["enum"])):
            narrower_enums.append(path)
    assert not missing
    assert not narrower_enums


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("Process", ".spec.routing.backend.port"),
        ("Process", ".spec.routing.hostnames[].app"),
        ("Process", ".spec.encapsulates.kind.existingHelmRelease.releaseName"),
        ("Process", ".spec.encapsulates.mode"),
        ("Process", ".spec.lifetime.ephemeral.exports[].source.testReport.configmap"),
        ("Process", ".spec.lifetime.ephemeral.exports[].channel.natsSubject.subject"),
        ("ProcessTable", ".status.claims.*.holder"),
        ("EphemeralPool", ".spec.desired"),
        ("EphemeralPool", ".spec.replacementPolicy"),
        ("EphemeralPool", ".spec.stableNameClaim"),
        ("EphemeralPool", ".spec.template.exports"),
        ("EphemeralPool", ".spec.template.routing"),
    ],
)
def test_fields_missing_from_the_stale_reference_crds_are_present(
    docs: dict[str, dict[str, Any]], kind: str, path: str
) -> None:
    assert path in dict(walk_schema(_root(docs[kind])))


@pytest.mark.parametrize(
    ("kind", "path"),
    [("Process", ".status.phase"), ("ProcessTable", ".status.processes[].phase")],
)
def test_process_phase_enums_include_releasing(docs: dict[str, dict[str, Any]], kind: str, path: str) -> None:
    node = dict(walk_schema(_root(docs[kind])))[path]
    assert node["enum"] == [
        "Pending",
        "Forking",
        "Execing",
        "Running",
        "Attested",
        "Reconverging",
        "Releasing",
        "Exiting",
        "Failed",
        "Zombie",
        "Reaped",
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_schema_is_structural(docs: dict[str, dict[str, Any]], kind: str) -> None:
    """apiextensions.k8s.io/v1 structural rules: a type everywhere except free JSON, no $ref,
    oneOf/anyOf/allOf/not only as value validations (nothing but `required` inside),
    required ⊆ properties, no additionalProperties next to properties."""
    root = _root(docs[kind])
    for where, node in _all_dicts(root):
        assert "$ref" not in node
        for junction in ("oneOf", "anyOf", "allOf", "not"):
            for branch in _junction_branches(node.get(junction)):
                assert set(_all_keys(branch)) <= {"required", "anyOf", "not", "oneOf"}, f"{where}: {junction}"
    for path, node in walk_schema(root):
        free = node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string")
        assert "type" in node or free, f"{path} has no type"
        props = node.get("properties", {})
        assert set(node.get("required", [])) <= set(props), path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("type") == "array":
            assert "items" in node, path


@pytest.mark.parametrize("kind", KINDS)
def test_preserve_unknown_fields_only_at_free_json_nodes(docs: dict[str, dict[str, Any]], kind: str) -> None:
    found = {path for path, node in walk_schema(_root(docs[kind])) if node.get("x-kubernetes-preserve-unknown-fields")}
    assert found == PRESERVE_UNKNOWN[kind]


@pytest.mark.parametrize("kind", KINDS)
def test_nullable_only_where_our_encoder_writes_null(docs: dict[str, dict[str, Any]], kind: str) -> None:
    found = {path for path, node in walk_schema(_root(docs[kind])) if node.get("nullable")}
    assert found == NULLABLE[kind]


@pytest.mark.parametrize(
    ("kind", "path", "fmt", "low", "high"),
    [
        ("Process", ".spec.signals.sigtermGraceSeconds", "int64", 0, 2**32 - 1),
        ("Process", ".spec.routing.backend.port", "int32", 0, 65535),
        ("Process", ".spec.routing.priority", "int32", -(2**31), 2**31 - 1),
        ("Process", ".spec.intent.container.replicas", "int32", -(2**31), 2**31 - 1),
        ("Process", ".status.attestation.generation", "int64", 0, None),
        ("Process", ".status.exitCode", "int32", -(2**31), 2**31 - 1),
        ("ProcessTable", ".spec.nextSequence", "int64", 0, 2**32 - 1),
        ("ProcessTable", ".status.claims.*.priority", "int32", -(2**31), 2**31 - 1),
        ("EphemeralPool", ".spec.desiredSize", "int64", 0, 2**32 - 1),
        ("EphemeralAllocation", ".spec.requestor.prNumber", "int64", 0, None),
    ],
)
def test_integer_bounds_follow_the_rust_types_with_formats_the_api_server_knows(
    docs: dict[str, dict[str, Any]], kind: str, path: str, fmt: str, low: int, high: int | None
) -> None:
    """u16/u32/u64/i32 (docs/wire-format.md#scalars) as bounds; format int32 or int64 (the reference's
    uint32 & co. are "unrecognized format" to the API server)."""
    node = dict(walk_schema(_root(docs[kind])))[path]
    assert node["type"] == "integer"
    assert node["format"] == fmt
    assert node["minimum"] == low
    assert node.get("maximum") == high


@pytest.mark.parametrize(
    ("kind", "path", "required"),
    [
        ("Process", "", ["spec"]),
        ("Process", ".spec", ["classification", "intent"]),
        ("Process", ".spec.classification", ["pointType", "substrate"]),
        ("Process", ".spec.intent.aplicacao", ["chartRef", "version"]),
        ("Process", ".status.boundary.preconditions[]", ["kind", "satisfied"]),
        ("ProcessTable", ".spec", None),
        # The reference requires both counters; our model defaults them to 0 so that a status
        # holding only claims (server-side applied) is valid (docs/divergences.md#processtable-status-counters).
        ("ProcessTable", ".status", None),
        ("EphemeralPool", ".spec", ["desiredSize", "template"]),
        ("EphemeralAllocation", ".spec", ["requestor"]),
    ],
)
def test_required_lists_follow_the_spec(
    docs: dict[str, dict[str, Any]], kind: str, path: str, required: list[str] | None
) -> None:
    node = dict(walk_schema(_root(docs[kind])))[path]
    assert node.get("required") == required


@pytest.mark.parametrize(
    ("kind", "path", "messages"),
    [
        ("Process", ".spec.intent", [
            "intent has no variant set (one of nix/flux/lisp/container/aplicacao/guest required)",
            "intent has multiple variants set; exactly one required",
        ]),
        ("Process", ".spec.lifetime", ["lifetime has multiple variants set; at most one required"]),
        ("Process", ".spec.encapsulates.kind", [
            "encapsulation kind has no variant set (one of existingHelmRelease/existingKustomization/bareWorkload "
            "required)",
            "encapsulation kind has multiple variants set; exactly one required",
        ]),
    ],
)
def test_tagged_unions_carry_cel_rules_with_the_model_error_texts(
    docs: dict[str, dict[str, Any]], kind: str, path: str, messages: list[str]
) -> None:
    """The texts the models raise (shared/domain/api/intent.py, lifetime.py, encapsulates.py), written out."""
    node = dict(walk_schema(_root(docs[kind])))[path]
    assert [rule["message"] for rule in node["x-kubernetes-validations"]] == messages


EXPORT_SOURCES = ["receipts", "testReport", "processSnapshot", "runMarker"]
EXPORT_CHANNELS = ["httpEvent", "natsSubject", "stdout"]


@pytest.mark.parametrize(
    ("kind", "path", "slots"),
    [
        ("Process", ".spec.lifetime.ephemeral.exports[].source", EXPORT_SOURCES),
        ("Process", ".spec.lifetime.ephemeral.exports[].channel", EXPORT_CHANNELS),
        ("EphemeralPool", ".spec.template.exports[].source", EXPORT_SOURCES),
        ("EphemeralPool", ".spec.template.exports[].channel", EXPORT_CHANNELS),
    ],
)
def test_tagged_unions_inside_lists_use_one_of(
    docs: dict[str, dict[str, Any]], kind: str, path: str, slots: list[str]
) -> None:
    node = dict(walk_schema(_root(docs[kind])))[path]
    assert "x-kubernetes-validations" not in node
    assert list(node["properties"]) == slots
    assert node["oneOf"] == [{"required": [slot]} for slot in slots]


def test_no_cel_rule_sits_inside_a_list_or_map(docs: dict[str, dict[str, Any]]) -> None:
    """The API server multiplies a rule's cost by the enclosing lists' possible length."""
    for kind, doc in docs.items():
        for path, node in walk_schema(_root(doc)):
            if "x-kubernetes-validations" in node:
                assert "[]" not in path, f"{kind} {path}"
                assert ".*" not in path, f"{kind} {path}"


def test_defaults_follow_the_spec(docs: dict[str, dict[str, Any]]) -> None:
    process = dict(walk_schema(_root(docs["Process"])))
    assert process[".spec.signals.sigtermGraceSeconds"]["default"] == 480
    assert process[".spec.signals.sigkillForce"]["default"] is True
    assert process[".spec.intent.flux.decryptSops"]["default"] is True
    assert process[".spec.intent.lisp.reader"]["default"] == "tatara-lisp"
    assert process[".status.phase"]["default"] == "Pending"
    # left out on output when empty/default, so no server-side default either
    assert "default" not in process[".spec.lifetime"]
    assert "default" not in process[".spec.lifetime.ephemeral.exports"]
    assert "default" not in process[".spec.intent.aplicacao.profile"]
    table = dict(walk_schema(_root(docs["ProcessTable"])))
    assert table[".spec.nextSequence"]["default"] == 1
    assert table[".spec.zombieTimeoutSeconds"]["default"] == 600
    assert table[".spec.orphanReapingEnabled"]["default"] is True
    pool = dict(walk_schema(_root(docs["EphemeralPool"])))
    assert pool[".spec.replacementPolicy"]["default"] == "ReplaceImmediate"
    assert pool[".spec.freeTtl"]["default"] == "24h"
    assert pool[".spec.maxAllocationTtl"]["default"] == "4h"


# -------------------------------------------------------------------- kubeconform -strict (issue 17)

EXAMPLE_FILES = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/upstream/*.yaml"),
                        *UPSTREAM.parent.glob("examples/*.yaml")])


def _strict_violations(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[str]:
    """Keys kubeconform ``-strict`` refuses with a schema made from ours by openapi2jsonschema ``--strict``
    (``additionalProperties: false`` on every object that declares ``properties``)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            for key, sub in value.items():
                if key not in props:
                    yield f"{path}.{key}"
                else:
                    yield from _strict_violations(sub, props[key], f"{path}.{key}")
        elif isinstance(schema.get("additionalProperties"), Mapping):
            for key, sub in value.items():
                yield from _strict_violations(sub, schema["additionalProperties"], f"{path}.{key}")
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, sub in enumerate(value):
            yield from _strict_violations(sub, schema["items"], f"{path}[{i}]")


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_examples_pass_a_strict_schema_made_from_our_crds(docs: dict[str, dict[str, Any]], path: Path) -> None:
    objects = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") in docs]
    assert objects or "tatara.pleme.io" not in path.read_text()
    for obj in objects:
        assert list(_strict_violations(obj, _root(docs[obj["kind"]]), "")) == [], obj["metadata"]["name"]
