"""CustomResourceDefinitions generated from the msgspec models.

Two layers:

- :func:`structural_schema` turns one msgspec-annotated type (a ``Struct``, an enum, a
  scalar, a list or map of those) into an OpenAPI v3 schema that the API server accepts as
  *structural* (apiextensions.k8s.io/v1): every node has a ``type`` unless it is free JSON,
  no ``$ref`` (nested types are inlined), ``x-kubernetes-preserve-unknown-fields: true``
  only where the model says "any JSON" (``Any`` or ``dict[str, Any]``), optional fields are
  left out of ``required``, ``nullable: true`` only where our encoder can write ``null``.
- :func:`crd_document` wraps a spec type and a status type into a full
  ``CustomResourceDefinition`` document described by a :class:`Resource` (names, scope,
  printer columns, short names). The four tatara resources are listed by
  :func:`tatara_resources`; ``python -m tools.gen_crds`` writes them into the charts.

Type mapping (wire format: docs/wire-format.md#scalars):

============================  ====================================================
model type                    schema
============================  ====================================================
``str``                       ``type: string`` (+ ``minLength``/``maxLength``/``pattern``)
``bool``                      ``type: boolean``
``int`` with bounds           ``type: integer``, ``minimum``/``maximum`` as declared, and
                              ``format: int32`` if the bounds fit 32 bits else ``int64``
                              (the reference's ``uint32`` & co. only draw
                              "unrecognized format" warnings from the API server)
``float``                     ``type: number, format: double``
``datetime``                  ``type: string, format: date-time``
``Enum`` / ``Literal``        ``type: string`` (or integer) + ``enum: [...]`` in declaration order
``list[T]``                   ``type: array, items: <T>``
``dict[str, T]``              ``type: object, additionalProperties: <T>``
``dict[str, Any]``            ``type: object, x-kubernetes-preserve-unknown-fields: true``
``Any``                       ``x-kubernetes-preserve-unknown-fields: true`` (any JSON value)
``T | None``                  schema of ``T``; the field is not ``required``
``Struct``                    ``type: object, properties`` (wire names, declaration order),
                              ``required`` = fields without a default
tagged union Struct           as ``Struct`` plus ``x-kubernetes-validations`` CEL rules that
                              reject zero / several populated slots (see :class:`UnionRule`)
============================  ====================================================

Descriptions come from ``Meta(description=...)``, else the attribute docstring written under
the field in the class body, else (for a nested ``Struct`` or enum) the type's own docstring.
Defaults become ``default:`` (the encoded default value) unless the default is ``None``.
"""

from __future__ import annotations

import ast
import enum
import inspect
import itertools
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import msgspec.inspect as mi
import yaml

__all__ = [
    "CrdSchemaError",
    "PrinterColumn",
    "Resource",
    "UnionRule",
    "crd_document",
    "describe",
    "generated_files",
    "render_yaml",
    "structural_schema",
    "tatara_resources",
    "tatara_union_rule",
    "walk_schema",
]

JSON = dict[str, Any]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


class CrdSchemaError(TypeError):
    """A model type has no structural-schema form (recursion, non-string map keys, an
    unsupported union or a custom type). The message names the JSON path of the field."""


@dataclass(frozen=True)
class UnionRule:
    """How the API server checks a tagged union: an object whose properties are the slots.

    Two encodings, chosen by where the union sits:

    - not inside a list or map: ``x-kubernetes-validations`` CEL rules whose messages repeat
      the model's error texts (docs/wire-format.md#tagged-unions):
      ``"<noun> has no variant set (one of a/b/c required)"`` (unless ``allow_empty``) and
      ``"<noun> has multiple variants set; exactly one required"`` (``at most one`` when
      ``allow_empty``);
    - inside a list or map (e.g. ``exports[].channel``): the API server multiplies a CEL
      rule's cost by the list's possible length and rejects the CRD when no ``maxItems``
      bounds it, so OpenAPI value validations are used instead — ``oneOf`` of
      ``{required: [slot]}`` (exactly one), or ``not: {anyOf: [{required: [a, b]}, ...]}``
      (at most one). These carry no types, as structural schemas require.

    ``slots`` are wire keys; empty means every property of the Struct.
    """

    noun: str
    allow_empty: bool = False
    slots: tuple[str, ...] = ()

    def validations(self, slots: Sequence[str]) -> list[JSON]:
        """The ``x-kubernetes-validations`` entries (CEL) for an object with these slots."""
        slots = self.slots or tuple(slots)
        present = [f"has(self.{slot})" for slot in slots]
        rules: list[JSON] = []
        if not self.allow_empty:
            rules.append(
                {
                    "rule": " || ".join(present),
                    "message": f"{self.noun} has no variant set (one of {'/'.join(slots)} required)",
                }
            )
        quantity = "at most one" if self.allow_empty else "exactly one"
        rules.append(
            {
                "rule": f"[{', '.join(present)}].filter(set, set).size() <= 1",
                "message": f"{self.noun} has multiple variants set; {quantity} required",
            }
        )
        return rules

    def value_validation(self, slots: Sequence[str]) -> JSON:
        """The CEL-free form: ``{"oneOf": [...]}`` or ``{"not": {"anyOf": [...]}}``."""
        slots = self.slots or tuple(slots)
        if not self.allow_empty:
            return {"oneOf": [{"required": [slot]} for slot in slots]}
        pairs = [[a, b] for i, a in enumerate(slots) for b in slots[i + 1 :]]
        if len(pairs) == 1:
            return {"not": {"required": pairs[0]}}
        return {"not": {"anyOf": [{"required": pair} for pair in pairs]}}


UnionResolver = Callable[[type], "UnionRule | None"]
"""Tells whether a Struct class is a tagged union (and how to word its rules)."""


def _default_union_rule(cls: type) -> UnionRule | None:
    """``cls.__crd_union__`` if set; else a :class:`shared.domain.api.tagged_union.TaggedUnion`
    subclass gives ``UnionRule(cls._noun, allow_empty=cls._allow_empty)``."""
    rule = getattr(cls, "__crd_union__", None)
    if isinstance(rule, UnionRule):
        return rule
    from shared.domain.api.tagged_union import TaggedUnion

    if issubclass(cls, TaggedUnion):
        return UnionRule(noun=cls._noun, allow_empty=bool(getattr(cls, "_allow_empty", False)))
    return None


# --------------------------------------------------------------------------- docstrings


_RST_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]*\.)?([^`]+)`")


def describe(doc: str | None) -> str | None:
    """A schema ``description`` from a docstring: its first paragraph on one line, Sphinx
    roles and double backticks reduced to plain `code` (``kubectl explain`` readers have no Sphinx)."""
    if not doc or not doc.strip():
        return None
    first = inspect.cleandoc(doc).split("\n\n", 1)[0]
    text = " ".join(line.strip() for line in first.splitlines())
    text = _RST_ROLE.sub(r"`\1`", text).replace("``", "`")
    text = text.strip()
    return text or None


def _type_doc(cls: type) -> str | None:
    """The class's own docstring (not an inherited or generated one) as a description."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or not doc.strip():
        return None
    if issubclass(cls, enum.Enum) and doc in {"An enumeration.", enum.Enum.__doc__}:
        return None
    return describe(doc)


def _field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string literal right under ``name: T = ...``) of ``cls`` and
    its bases, by Python field name; the subclass wins. Classes without source give ``{}``."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or klass.__module__ in {"msgspec", "builtins"}:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef)), [])
        for stmt, nxt in itertools.pairwise(body):
            if (
                isinstance(stmt, ast.AnnAssign)
                and isinstance(stmt.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                text = describe(nxt.value.value)
                if text:
                    docs[stmt.target.id] = text
    return docs


# --------------------------------------------------------------------------- schema walk


@dataclass
class _Walker:
    resolve_union: UnionResolver
    require_descriptions: bool = False
    """Record every Struct field whose schema has no description (see :func:`structural_schema`)."""
    undocumented: list[str] = field(default_factory=list)
    stack: list[type] = field(default_factory=list)
    collections: int = 0
    """How many lists/maps enclose the node being built (CEL rules only at depth 0)."""

    def node(self, t: mi.Type, path: str) -> JSON:
        """Schema for one inspected type; ``path`` is the JSON path used in errors."""
        description: str | None = None
        extra: JSON = {}
        while isinstance(t, mi.Metadata):
            schema_extra = dict(t.extra_json_schema or {})
            description = describe(schema_extra.pop("description", None)) or description
            schema_extra.pop("title", None)
            schema_extra.pop("examples", None)
            if isinstance(_strip(t), mi.IntType):
                schema_extra.pop("format", None)  # derived from the bounds, see _integer
            extra.update(schema_extra)
            t = t.type
        out = self._bare(t, path)
        if description:
            out["description"] = description
        out.update(extra)
        return _ordered(out)

    def _bare(self, t: mi.Type, path: str) -> JSON:
        if isinstance(t, mi.StructType):
            return self._struct(t, path)
        if isinstance(t, mi.UnionType):
            return self._union(t, path)
        if isinstance(t, mi.StrType):
            out: JSON = {"type": "string"}
            _put(out, "minLength", t.min_length)
            _put(out, "maxLength", t.max_length)
            _put(out, "pattern", t.pattern)
            return out
        if isinstance(t, mi.BoolType):
            return {"type": "boolean"}
        if isinstance(t, mi.IntType):
            return _integer(t)
        if isinstance(t, mi.FloatType):
            out = {"type": "number", "format": "double"}
            _put(out, "minimum", t.ge if t.ge is not None else t.gt)
            _put(out, "maximum", t.le if t.le is not None else t.lt)
            if t.gt is not None:
                out["exclusiveMinimum"] = True
            if t.lt is not None:
                out["exclusiveMaximum"] = True
            return out
        if isinstance(t, mi.DateTimeType):
            return {"type": "string", "format": "date-time"}
        if isinstance(t, mi.DateType):
            return {"type": "string", "format": "date"}
        if isinstance(t, mi.UUIDType):
            return {"type": "string", "format": "uuid"}
        if isinstance(t, (mi.BytesType, mi.ByteArrayType)):
            return {"type": "string", "format": "byte"}
        if isinstance(t, mi.EnumType):
            return self._enum(t.cls, path)
        if isinstance(t, mi.LiteralType):
            return _enum_values(list(t.values), path)
        if isinstance(t, (mi.ListType, mi.VarTupleType, mi.SetType, mi.FrozenSetType)):
            out = {"type": "array", "items": self._inside_collection(t.item_type, f"{path}[]")}
            _put(out, "minItems", t.min_length)
            _put(out, "maxItems", t.max_length)
            return out
        if isinstance(t, mi.DictType):
            return self._dict(t, path)
        if isinstance(t, mi.AnyType):
            return {"x-kubernetes-preserve-unknown-fields": True}
        raise CrdSchemaError(f"{path}: no structural schema for {t!r}")

    def _inside_collection(self, t: mi.Type, path: str) -> JSON:
        self.collections += 1
        try:
            return self.node(t, path)
        finally:
            self.collections -= 1

    def _enum(self, cls: type[enum.Enum], path: str) -> JSON:
        out = _enum_values([m.value for m in cls], path)
        _put(out, "description", _type_doc(cls))
        return out

    def _dict(self, t: mi.DictType, path: str) -> JSON:
        key = t.key_type
        while isinstance(key, mi.Metadata):
            key = key.type
        if not isinstance(key, (mi.StrType, mi.EnumType, mi.LiteralType)):
            raise CrdSchemaError(f"{path}: map keys must be strings, not {key!r}")
        value = t.value_type
        while isinstance(value, mi.Metadata):
            value = value.type
        out: JSON = {"type": "object"}
        if isinstance(value, mi.AnyType):
            out["x-kubernetes-preserve-unknown-fields"] = True
        else:
            out["additionalProperties"] = self._inside_collection(t.value_type, f"{path}.*")
        _put(out, "minProperties", t.min_length)
        _put(out, "maxProperties", t.max_length)
        return out

    def _union(self, t: mi.UnionType, path: str) -> JSON:
        members = [m for m in t.types if not isinstance(m, mi.NoneType)]
        if len(members) == 1:
            return self.node(members[0], path)
        bare = {type(_strip(m)) for m in members}
        if bare == {mi.IntType, mi.StrType}:
            return {"x-kubernetes-int-or-string": True}
        raise CrdSchemaError(f"{path}: a union of {members!r} has no structural form")

    def _struct(self, t: mi.StructType, path: str) -> JSON:
        cls = t.cls
        if cls in self.stack:
            chain = " -> ".join(c.__name__ for c in [*self.stack, cls])
            raise CrdSchemaError(f"{path}: recursive type {chain} cannot be inlined")
        if t.array_like or t.tag_field is not None:
            raise CrdSchemaError(f"{path}: {cls.__name__} is array-like or msgspec-tagged; not a CRD shape")
        self.stack.append(cls)
        try:
            docs = _field_docs(cls)
            emission = _Emission.of(cls)
            properties: JSON = {}
            required: list[str] = []
            for f in t.fields:
                sub = f"{path}.{f.encode_name}" if path else f.encode_name
                prop = self.node(f.type, sub)
                doc = docs.get(f.name)
                if doc and not _has_own_description(f.type):
                    prop["description"] = doc
                if self.require_descriptions and not prop.get("description"):
                    self.undocumented.append(f"{sub} ({cls.__module__}.{cls.__qualname__}.{f.name})")
                if f.required:
                    required.append(f.encode_name)
                else:
                    prop = _with_default(prop, f, emission, sub)
                properties[f.encode_name] = _ordered(prop)
        finally:
            self.stack.pop()
        out: JSON = {}
        _put(out, "description", _type_doc(cls))
        out["type"] = "object"
        out["properties"] = properties
        if required:
            out["required"] = required
        rule = self.resolve_union(cls)
        if rule is not None:
            unknown = [s for s in rule.slots if s not in properties]
            if unknown:
                raise CrdSchemaError(f"{path}: union slots {unknown} are not fields of {cls.__name__}")
            if self.collections:
                out.update(rule.value_validation(list(properties)))
            else:
                out["x-kubernetes-validations"] = rule.validations(list(properties))
        return out


def _strip(t: mi.Type) -> mi.Type:
    while isinstance(t, mi.Metadata):
        t = t.type
    return t


def _has_own_description(t: mi.Type) -> bool:
    while isinstance(t, mi.Metadata):
        if (t.extra_json_schema or {}).get("description"):
            return True
        t = t.type
    return False


def _put(out: JSON, key: str, value: object) -> None:
    if value is not None:
        out[key] = value


def _integer(t: mi.IntType) -> JSON:
    """``int32`` when the declared bounds fit 32 bits, else ``int64`` — the two integer formats
    the API server knows (it answers ``unrecognized format "uint32"`` warnings for the
    reference's ``uint16``/``uint32``/``uint64``); the bounds themselves carry unsignedness."""
    low = t.ge if t.ge is not None else (t.gt + 1 if t.gt is not None else None)
    high = t.le if t.le is not None else (t.lt - 1 if t.lt is not None else None)
    fits_32 = low is not None and high is not None and low >= _INT32_MIN and high <= _INT32_MAX
    out: JSON = {"type": "integer", "format": "int32" if fits_32 else "int64"}
    if low is not None and _INT64_MIN <= low <= _INT64_MAX:
        out["minimum"] = low
    if high is not None and _INT64_MIN <= high <= _INT64_MAX:
        out["maximum"] = high
    _put(out, "multipleOf", t.multiple_of)
    return out


def _enum_values(values: list[Any], path: str) -> JSON:
    if values and all(isinstance(v, str) for v in values):
        return {"type": "string", "enum": values}
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return {"type": "integer", "enum": values}
    raise CrdSchemaError(f"{path}: enum values {values!r} must be all strings or all integers")


def _includes_none(t: mi.Type) -> bool:
    t = _strip(t)
    if isinstance(t, mi.NoneType | mi.AnyType):
        return True
    return isinstance(t, mi.UnionType) and any(isinstance(m, mi.NoneType) for m in t.types)


@dataclass(frozen=True)
class _Emission:
    """How a Struct's encoder writes optional fields (see ``shared.domain.api.wire.WireStruct``).

    ``omit_when_default``: fields left out when equal to their default (no ``default:`` in
    the schema, as the reference's generator does for ``skip_serializing_if`` fields).
    ``write_null``: ``None``-default fields written as ``null`` (so ``nullable: true``).
    Names may be Python or wire names.
    """

    omit_when_default: frozenset[str]
    write_null: frozenset[str]
    writes_none: bool

    @classmethod
    def of(cls, struct: type) -> _Emission:
        return cls(
            omit_when_default=frozenset(getattr(struct, "_omit_when_default", ())),
            write_null=frozenset(getattr(struct, "_write_null", ())),
            writes_none=not struct.__struct_config__.omit_defaults,  # type: ignore[attr-defined]
        )

    def has(self, names: frozenset[str], f: mi.Field) -> bool:
        return f.name in names or f.encode_name in names


def _with_default(prop: JSON, f: mi.Field, emission: _Emission, path: str) -> JSON:
    """Add ``default:`` (and ``nullable``) to an optional field's schema.

    A ``None`` default gives no ``default:``; the field is ``nullable`` only when our
    encoder writes that ``null`` (``_write_null``, or a Struct that does not omit defaults).
    A field omitted when it equals its default gets no ``default:`` either.
    """
    value = f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
    if value is None:
        if _includes_none(f.type) and (emission.writes_none or emission.has(emission.write_null, f)):
            prop = {**prop, "nullable": True}
        return prop
    if emission.has(emission.omit_when_default, f):
        return prop
    try:
        encoded = msgspec.to_builtins(value)
    except (TypeError, msgspec.EncodeError) as exc:  # pragma: no cover - models control this
        raise CrdSchemaError(f"{path}: default {value!r} is not JSON: {exc}") from exc
    return {**prop, "default": encoded}


_KEY_ORDER = (
    "description",
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "nullable",
    "items",
    "properties",
    "required",
    "additionalProperties",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-validations",
    "oneOf",
    "not",
)
_KEY_RANK = {key: rank for rank, key in enumerate(_KEY_ORDER)}


def _ordered(node: JSON) -> JSON:
    """The node's keys in one fixed order (unknown keys last, in insertion order)."""
    return dict(sorted(node.items(), key=lambda kv: _KEY_RANK.get(kv[0], len(_KEY_ORDER))))


def structural_schema(tp: Any, *, unions: UnionResolver | None = None, require_descriptions: bool = False) -> JSON:
    """Structural OpenAPI v3 schema (a JSON-able dict) for a msgspec-annotated type.

    ``unions`` says which Struct classes are tagged unions; by default a class attribute
    ``__crd_union__ = UnionRule(...)`` marks one. Raises :class:`CrdSchemaError` for types
    with no structural form, and, with ``require_descriptions``, when a Struct field has no
    description (no attribute docstring, ``Meta(description=...)`` or documented type): the error
    names every such field, so ``kubectl explain`` never says ``<no description>``.
    """
    walker = _Walker(resolve_union=unions or _default_union_rule, require_descriptions=require_descriptions)
    schema = walker.node(mi.type_info(tp), "")
    if walker.undocumented:
        raise CrdSchemaError("fields without a description (write a docstring under each): "
                             + ", ".join(walker.undocumented))
    return schema


# --------------------------------------------------------------------------- documents


ColumnType = Literal["string", "integer", "number", "boolean", "date"]


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry (``kubectl get`` column)."""

    name: str
    type: ColumnType
    json_path: str
    description: str | None = None
    priority: int | None = None

    def to_json(self) -> JSON:
        out: JSON = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        _put(out, "description", self.description)
        _put(out, "priority", self.priority)
        return out


@dataclass(frozen=True)
class Resource:
    """Everything a CRD says besides the schema: names, scope, columns, where it is written.

    ``spec_type``/``status_type`` are the msgspec types of ``.spec`` and ``.status``;
    ``chart`` is the chart folder under ``charts/`` whose ``crds/`` holds the file
    ``<plural>.yaml``.
    """

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: Literal["Namespaced", "Cluster"]
    spec_type: Any
    status_type: Any
    chart: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    description: str | None = None
    spec_required: bool = True

    @property
    def name(self) -> str:
        """The CRD's ``metadata.name``: ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"

    @property
    def file_name(self) -> str:
        return f"{self.plural}.yaml"


def crd_document(
    resource: Resource, *, unions: UnionResolver | None = None, require_descriptions: bool = False
) -> JSON:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition for one resource.

    One served+storage version, ``status`` subresource, printer columns, and the root schema
    ``{type: object, required: [spec], properties: {apiVersion, kind, metadata, spec, status}}``. Raises
    :class:`CrdSchemaError` when a model type has no structural form (or, with
    ``require_descriptions``, a field has no description).
    """
    spec = structural_schema(resource.spec_type, unions=unions, require_descriptions=require_descriptions)
    status = structural_schema(resource.status_type, unions=unions, require_descriptions=require_descriptions)
    root: JSON = {}
    if resource.description:
        root["description"] = resource.description
    root["type"] = "object"
    root["properties"] = {**ROOT_PROPERTIES, "spec": spec, "status": status}
    if resource.spec_required:
        root["required"] = ["spec"]
    version: JSON = {"name": resource.version, "served": True, "storage": True}
    if resource.printer_columns:
        version["additionalPrinterColumns"] = [c.to_json() for c in resource.printer_columns]
    version["schema"] = {"openAPIV3Schema": root}
    version["subresources"] = {"status": {}}
    names: JSON = {
        "kind": resource.kind,
        "plural": resource.plural,
        "singular": resource.singular,
        "shortNames": list(resource.short_names),
        "categories": list(resource.categories),
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": resource.name},
        "spec": {
            "group": resource.group,
            "names": names,
            "scope": resource.scope,
            "versions": [version],
        },
    }


def walk_schema(schema: Mapping[str, Any], path: str = "") -> Iterable[tuple[str, Mapping[str, Any]]]:
    """Every schema node with its path (``.a.b``, ``[]`` for items, ``.*`` for map values)."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from walk_schema(sub, f"{path}.{name}")
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from walk_schema(items, f"{path}[]")
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield from walk_schema(extra, f"{path}.*")


# --------------------------------------------------------------------------- the tatara CRDs

_HEADER = (
    "# Generated from the msgspec models in shared/domain/api by `python -m tools.gen_crds`; do not edit.\n"
    "# A unit test fails when this file differs from what the models generate.\n"
)


def _age() -> PrinterColumn:
    return PrinterColumn("Age", "date", ".metadata.creationTimestamp")


def _ready_condition(field: str) -> str:
    return f'.status.conditions[?(@.type=="Ready")].{field}'


_CONDITION_STATUS = PrinterColumn("Ready", "string", _ready_condition("status"),
                                  "Status of the Ready condition: True, False or Unknown.")
_CONDITION_REASON = PrinterColumn("Reason", "string", _ready_condition("reason"),
                                  "Reason of the Ready condition (why it is not Ready).", priority=1)
_CONDITION_MESSAGE = PrinterColumn("Message", "string", _ready_condition("message"),
                                   "Message of the Ready condition.", priority=1)

CATEGORIES_NAMESPACED = ("tatara", "all")
"""``kubectl get tatara`` lists every tatara kind; ``kubectl get all`` includes the namespaced ones."""
CATEGORIES_CLUSTER = ("tatara",)
"""The cluster-scoped ProcessTable is not in ``all`` (a namespaced listing)."""

ROOT_PROPERTIES: JSON = {
    "apiVersion": {
        "description": (
            "APIVersion defines the versioned schema of this representation of an object. Servers should "
            "convert recognized schemas to the latest internal value, and may reject unrecognized values. "
            "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
        ),
        "type": "string",
    },
    "kind": {
        "description": (
            "Kind is a string value representing the REST resource this object represents. Servers may infer "
            "this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. "
            "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
        ),
        "type": "string",
    },
    "metadata": {"type": "object"},
}
"""The root properties controller-gen writes into every CRD (the text of the Kubernetes API's
``TypeMeta`` docs), so schema tools that close objects (kubeconform ``-strict``) accept objects."""


def tatara_resources() -> tuple[Resource, ...]:
    """The four tatara kinds, in the reference generator's order (docs/wire-format.md#kinds):
    Process and ProcessTable (chart ``tatara-reconciler``), EphemeralPool and
    EphemeralAllocation (chart ``tatara-pool-reconciler``). Names, scope and short names are the
    reference's; printer columns are the reference's followed by the Ready condition's status, reason
    and message where the kind has that condition (the pool's count of Free members is headed ``Free``,
    so its ``Ready`` is the condition's, as on every other kind), and categories ``tatara``/``all`` are
    ours (docs/divergences.md#crd-columns)."""
    from shared.domain.api.allocation import AllocationSpec, AllocationStatus
    from shared.domain.api.pool import AdmittedPoolSpec, PoolStatus
    from shared.domain.api.process import ProcessSpec, ProcessStatus
    from shared.domain.api.table import ProcessTableSpec, ProcessTableStatus
    from shared.domain.group import GROUP, VERSION

    return (
        Resource(
            group=GROUP,
            version=VERSION,
            kind="Process",
            plural="processes",
            singular="process",
            scope="Namespaced",
            spec_type=ProcessSpec,
            status_type=ProcessStatus,
            chart="tatara-reconciler",
            short_names=("proc",),
            categories=CATEGORIES_NAMESPACED,
            printer_columns=(
                PrinterColumn("PID", "string", ".status.pid"),
                PrinterColumn("Phase", "string", ".status.phase"),
                PrinterColumn("Type", "string", ".spec.classification.pointType"),
                PrinterColumn("Substrate", "string", ".spec.classification.substrate"),
                PrinterColumn("Gen", "integer", ".status.attestation.generation"),
                _CONDITION_STATUS,
                _CONDITION_REASON,
                _CONDITION_MESSAGE,
                _age(),
            ),
            description="A unit of desired cluster state reconciled through Unix-like process phases.",
        ),
        Resource(
            group=GROUP,
            version=VERSION,
            kind="ProcessTable",
            plural="processtables",
            singular="processtable",
            scope="Cluster",
            spec_type=ProcessTableSpec,
            status_type=ProcessTableStatus,
            chart="tatara-reconciler",
            short_names=("pt",),
            categories=CATEGORIES_CLUSTER,
            printer_columns=(
                PrinterColumn("Procs", "integer", ".status.processCount"),
                PrinterColumn("Ready", "integer", ".status.readyCount"),
                PrinterColumn("NextPID", "integer", ".spec.nextSequence"),
                PrinterColumn("Depth", "integer", ".spec.maxDepth"),
                _age(),
            ),
            description="The cluster's process table (/proc): PID sequence, limits, rows and hostname claims.",
        ),
        Resource(
            group=GROUP,
            version=VERSION,
            kind="EphemeralPool",
            plural="ephemeralpools",
            singular="ephemeralpool",
            scope="Namespaced",
            spec_type=AdmittedPoolSpec,
            status_type=PoolStatus,
            chart="tatara-pool-reconciler",
            short_names=("epool",),
            categories=CATEGORIES_NAMESPACED,
            printer_columns=(
                PrinterColumn("Desired", "integer", ".spec.desiredSize"),
                PrinterColumn("Free", "integer", ".status.readyCount"),
                PrinterColumn("Allocated", "integer", ".status.allocatedCount"),
                PrinterColumn("Phase", "string", ".status.phase"),
                _CONDITION_STATUS,
                _CONDITION_REASON,
                _CONDITION_MESSAGE,
                _age(),
            ),
            description="A pool of pre-warmed member Processes built from one template.",
        ),
        Resource(
            group=GROUP,
            version=VERSION,
            kind="EphemeralAllocation",
            plural="ephemeralallocations",
            singular="ephemeralallocation",
            scope="Namespaced",
            spec_type=AllocationSpec,
            status_type=AllocationStatus,
            chart="tatara-pool-reconciler",
            short_names=("ealloc",),
            categories=CATEGORIES_NAMESPACED,
            printer_columns=(
                PrinterColumn("Pool", "string", ".spec.poolRef.name"),
                PrinterColumn("Phase", "string", ".status.phase"),
                PrinterColumn("Process", "string", ".status.assignedProcess.name"),
                PrinterColumn("Requestor", "string", ".spec.requestor.kind"),
                _CONDITION_STATUS,
                _CONDITION_REASON,
                _CONDITION_MESSAGE,
                _age(),
            ),
            description="A request to hold one pool member (e.g. per pull request) until its TTL expires.",
        ),
    )


def tatara_union_rule(cls: type) -> UnionRule | None:
    """Union rules for the tatara models: every ``TaggedUnion`` must resolve to exactly one
    slot, except ``Lifetime``, where an empty object means Permanent (docs/wire-format.md#lifetime)."""
    from shared.domain.api.lifetime import Lifetime

    if cls is Lifetime:
        return UnionRule(noun=Lifetime._noun, allow_empty=True)
    return _default_union_rule(cls)


class _CrdDumper(yaml.SafeDumper):
    """Block-style YAML, multi-line strings as literal blocks, no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_CrdDumper.add_representer(str, _represent_str)


def render_yaml(doc: Mapping[str, Any]) -> str:
    """Deterministic YAML text of one CRD document: a generated-file header, keys in the
    order built here (never sorted), block style."""
    body = yaml.dump(doc, Dumper=_CrdDumper, sort_keys=False, default_flow_style=False, width=100, allow_unicode=True)
    return _HEADER + body


def generated_files() -> dict[str, str]:
    """``{path relative to the project root: YAML text}`` for the four tatara CRDs:
    ``charts/<chart>/crds/<plural>.yaml``. Raises :class:`CrdSchemaError` when a field of the
    models has no description."""
    return {
        f"charts/{r.chart}/crds/{r.file_name}": render_yaml(
            crd_document(r, unions=tatara_union_rule, require_descriptions=True))
        for r in tatara_resources()
    }
