"""The generic Struct → structural OpenAPI v3 schema converter (tools/crd.py) on small Structs.

Every expected schema below is written by hand from the structural-schema rules
(apiextensions.k8s.io/v1: a ``type`` on every node except free JSON, no ``$ref``,
``x-kubernetes-preserve-unknown-fields`` only for free JSON) and the wire conventions of
docs/wire-format.md#scalars — not copied from the converter's output.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

import msgspec
import pytest
from msgspec import Meta

from tools.crd import (
    CrdSchemaError,
    PrinterColumn,
    Resource,
    UnionRule,
    crd_document,
    structural_schema,
    walk_schema,
)

U16 = Annotated[int, Meta(ge=0, le=0xFFFF)]
U32 = Annotated[int, Meta(ge=0, le=0xFFFF_FFFF)]
U64 = Annotated[int, Meta(ge=0)]  # msgspec refuses bounds beyond int64
I32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]


class Colour(enum.Enum):
    """A colour."""

    RED = "Red"
    GREEN = "Green"
    BLUE = "Blue"


class Scalars(msgspec.Struct, rename="camel", omit_defaults=True):
    name: str
    enabled: bool
    port: U16
    count: U32
    big: U64
    priority: I32
    ratio: float
    at: datetime
    plain: int


class Leaf(msgspec.Struct, rename="camel", omit_defaults=True):
    """A leaf."""

    flake_ref: str
    """Where the flake lives."""
    extra_args: list[str] = []


class Defaults(msgspec.Struct, rename="camel", omit_defaults=True):
    colour: Colour = Colour.GREEN
    grace_seconds: U32 = 480
    force: bool = True
    tags: list[str] = msgspec.field(default_factory=list)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    note: str | None = None
    mode: Literal["a", "b"] = "a"


class Containers(msgspec.Struct, rename="camel", omit_defaults=True):
    leaves: list[Leaf]
    by_name: dict[str, Leaf]
    values: dict[str, Any]
    anything: Any
    maybe_leaf: Leaf | None = None


class Described(msgspec.Struct, rename="camel", omit_defaults=True):
    """Top doc.

    Second paragraph."""

    a: Annotated[str, Meta(description="from Meta")]
    b: str
    """from the attribute docstring"""
    c: Annotated[str, Meta(description="Meta wins")] = ""
    """docstring loses"""


class Emission(msgspec.Struct, rename="camel", omit_defaults=True):
    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"profile", "exports"})
    _write_null: ClassVar[frozenset[str]] = frozenset({"params"})

    profile: str = ""
    exports: list[str] = []
    always: list[str] = []
    params: dict[str, Any] | None = None
    free: Any = None


class Choice(msgspec.Struct, omit_defaults=True):
    __crd_union__: ClassVar[UnionRule] = UnionRule("pick")

    left: Leaf | None = None
    right: Leaf | None = None


class AtMostOne(msgspec.Struct, omit_defaults=True):
    __crd_union__: ClassVar[UnionRule] = UnionRule("lifetime", allow_empty=True)

    permanent: dict[str, str] | None = None
    ephemeral: dict[str, str] | None = None


class Node(msgspec.Struct):
    children: list[Node] = []


class IntKeys(msgspec.Struct):
    by_id: dict[int, str]


class Mixed(msgspec.Struct):
    either: int | str
    bad: str | Leaf


LEAF = {
    "description": "A leaf.",
    "type": "object",
    "properties": {
        "flakeRef": {"description": "Where the flake lives.", "type": "string"},
        "extraArgs": {"type": "array", "default": [], "items": {"type": "string"}},
    },
    "required": ["flakeRef"],
}

DEFAULTS = {
    "type": "object",
    "properties": {
        "colour": {
            "description": "A colour.",
            "type": "string",
            "enum": ["Red", "Green", "Blue"],
            "default": "Green",
        },
        "graceSeconds": {
            "type": "integer",
            "format": "int64",
            "default": 480,
            "minimum": 0,
            "maximum": 4294967295,
        },
        "force": {"type": "boolean", "default": True},
        "tags": {"type": "array", "default": [], "items": {"type": "string"}},
        "labels": {"type": "object", "default": {}, "additionalProperties": {"type": "string"}},
        "note": {"type": "string"},
        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
    },
}


def test_scalars_map_to_openapi_types_and_integer_bounds_pick_a_known_format() -> None:
    # The API server knows only int32/int64 (it warns on the reference's uint16/uint32/uint64),
    # so the Rust widths become bounds: u16 fits int32, u32 needs int64.
    assert structural_schema(Scalars) == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "enabled": {"type": "boolean"},
            "port": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 65535},
            "count": {"type": "integer", "format": "int64", "minimum": 0, "maximum": 4294967295},
            "big": {"type": "integer", "format": "int64", "minimum": 0},
            "priority": {"type": "integer", "format": "int32", "minimum": -2147483648, "maximum": 2147483647},
            "ratio": {"type": "number", "format": "double"},
            "at": {"type": "string", "format": "date-time"},
            "plain": {"type": "integer", "format": "int64"},
        },
        "required": ["name", "enabled", "port", "count", "big", "priority", "ratio", "at", "plain"],
    }


def test_defaults_are_written_as_wire_values_and_none_defaults_are_optional_not_nullable() -> None:
    assert structural_schema(Defaults) == DEFAULTS


def test_nested_structs_are_inlined_and_free_json_preserves_unknown_fields() -> None:
    assert structural_schema(Containers) == {
        "type": "object",
        "properties": {
            "leaves": {"type": "array", "items": LEAF},
            "byName": {"type": "object", "additionalProperties": LEAF},
            "values": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "anything": {"x-kubernetes-preserve-unknown-fields": True},
            "maybeLeaf": LEAF,
        },
        "required": ["leaves", "byName", "values", "anything"],
    }


def test_descriptions_come_from_meta_then_attribute_docstrings_then_the_type() -> None:
    schema = structural_schema(Described)
    assert schema["description"] == "Top doc."  # first paragraph only
    assert schema["properties"] == {
        "a": {"description": "from Meta", "type": "string"},
        "b": {"description": "from the attribute docstring", "type": "string"},
        "c": {"description": "Meta wins", "type": "string", "default": ""},
    }


def test_fields_omitted_at_default_get_no_default_and_null_written_fields_are_nullable() -> None:
    assert structural_schema(Emission)["properties"] == {
        "profile": {"type": "string"},
        "exports": {"type": "array", "items": {"type": "string"}},
        "always": {"type": "array", "default": [], "items": {"type": "string"}},
        "params": {"type": "object", "nullable": True, "x-kubernetes-preserve-unknown-fields": True},
        "free": {"x-kubernetes-preserve-unknown-fields": True},
    }


def test_a_tagged_union_gets_cel_rules_with_the_models_error_texts() -> None:
    assert structural_schema(Choice) == {
        "type": "object",
        "properties": {"left": LEAF, "right": LEAF},
        "x-kubernetes-validations": [
            {
                "rule": "has(self.left) || has(self.right)",
                "message": "pick has no variant set (one of left/right required)",
            },
            {
                "rule": "[has(self.left), has(self.right)].filter(set, set).size() <= 1",
                "message": "pick has multiple variants set; exactly one required",
            },
        ],
    }


class InList(msgspec.Struct):
    choices: list[Choice]
    by_key: dict[str, AtMostOne]


def test_unions_inside_lists_and_maps_use_openapi_value_validations_not_cel() -> None:
    # CEL cost is multiplied by the unbounded list length and the API server refuses the CRD;
    # oneOf/not with only `required` inside are structural value validations with no cost.
    schema = structural_schema(InList)["properties"]
    assert schema["choices"]["items"] == {
        "type": "object",
        "properties": {"left": LEAF, "right": LEAF},
        "oneOf": [{"required": ["left"]}, {"required": ["right"]}],
    }
    assert schema["by_key"]["additionalProperties"] == {
        "type": "object",
        "properties": {
            "permanent": {"type": "object", "additionalProperties": {"type": "string"}},
            "ephemeral": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "not": {"required": ["permanent", "ephemeral"]},
    }


def test_an_at_most_one_union_of_three_forbids_every_pair() -> None:
    assert UnionRule("way", allow_empty=True).value_validation(["a", "b", "c"]) == {
        "not": {"anyOf": [{"required": ["a", "b"]}, {"required": ["a", "c"]}, {"required": ["b", "c"]}]}
    }


def test_an_at_most_one_union_allows_the_empty_object() -> None:
    rules = structural_schema(AtMostOne)["x-kubernetes-validations"]
    assert rules == [
        {
            "rule": "[has(self.permanent), has(self.ephemeral)].filter(set, set).size() <= 1",
            "message": "lifetime has multiple variants set; at most one required",
        }
    ]


@pytest.mark.parametrize(
    ("tp", "fragment"),
    [
        pytest.param(Node, "recursive type Node -> Node", id="a recursive type cannot be inlined"),
        pytest.param(IntKeys, "by_id: map keys must be strings", id="a map with integer keys is rejected"),
        pytest.param(Mixed, "bad: a union of", id="a union of a string and a struct is rejected"),
    ],
)
def test_types_without_a_structural_form_raise_naming_the_field(tp: type, fragment: str) -> None:
    with pytest.raises(CrdSchemaError, match=fragment):
        structural_schema(tp)


def test_int_or_string_uses_the_kubernetes_extension() -> None:
    class IntOrString(msgspec.Struct):
        port: int | str

    assert structural_schema(IntOrString)["properties"]["port"] == {"x-kubernetes-int-or-string": True}


def test_crd_document_wraps_spec_and_status_with_names_columns_and_status_subresource() -> None:
    resource = Resource(
        group="example.test",
        version="v1",
        kind="Widget",
        plural="widgets",
        singular="widget",
        scope="Cluster",
        spec_type=Leaf,
        status_type=Defaults,
        chart="widgets",
        short_names=("wd",),
        printer_columns=(PrinterColumn("Ref", "string", ".spec.flakeRef"),),
    )
    doc = crd_document(resource)
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["kind"] == "CustomResourceDefinition"
    assert doc["metadata"] == {"name": "widgets.example.test"}
    assert doc["spec"]["group"] == "example.test"
    assert doc["spec"]["scope"] == "Cluster"
    assert doc["spec"]["names"] == {
        "kind": "Widget",
        "plural": "widgets",
        "singular": "widget",
        "shortNames": ["wd"],
        "categories": [],
    }
    (version,) = doc["spec"]["versions"]
    assert version["name"] == "v1"
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {"status": {}}
    assert version["additionalPrinterColumns"] == [{"name": "Ref", "type": "string", "jsonPath": ".spec.flakeRef"}]
    root = version["schema"]["openAPIV3Schema"]
    assert root["type"] == "object"
    assert root["required"] == ["spec"]
    assert root["properties"]["spec"] == LEAF
    assert root["properties"]["status"] == DEFAULTS


def test_walk_schema_visits_items_and_map_values_with_paths() -> None:
    paths = [path for path, _ in walk_schema(structural_schema(Containers))]
    assert paths[:4] == ["", ".leaves", ".leaves[]", ".leaves[].flakeRef"]
    assert ".byName.*.extraArgs[]" in paths
    assert ".anything" in paths
