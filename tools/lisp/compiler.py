"""Typed compilation of ``(KEYWORD NAME :kw value …)`` forms into msgspec Structs
(docs/lisp.md#pipeline, docs/lisp.md#keyword-arguments, docs/lisp.md#forms), strict as the in-tree copy
is (docs/lisp.md#errors).

The field table is read from the target Struct, as the reference's derive reads the
Rust struct: a field's keyword is its Python (snake_case) name with ``_`` → ``-``;
``str``, ``int``, ``float``, ``bool`` and ``list[str]`` fields take atoms directly
(docs/lisp.md#field-extraction); a ``list[T]`` field takes a list whose items are converted one by one; any
other field goes through :func:`~tools.lisp.tojson.sexp_to_json` and then
``msgspec.convert`` against the field's type, so nested defaults and validation
come from the models. Absent fields take the model's default; a field without one
is required.
"""

from __future__ import annotations

import difflib
import functools
import types
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, auto
from typing import Annotated, Any, Generic, TypeVar, Union, get_args, get_origin

import msgspec

from tools.lisp.errors import LispError, SourceMap
from tools.lisp.syntax import Bool, Datum, Float, Int, Keyword, SList, Str, Symbol, shape, to_source
from tools.lisp.tojson import Json, sexp_to_json

S = TypeVar("S", bound=msgspec.Struct)

_I64 = (-(2**63), 2**63 - 1)
_INT_NAMES = {
    (0, 2**8 - 1): "u8",
    (0, 2**16 - 1): "u16",
    (0, 2**32 - 1): "u32",
    (0, 2**64 - 1): "u64",
    (-(2**7), 2**7 - 1): "i8",
    (-(2**15), 2**15 - 1): "i16",
    (-(2**31), 2**31 - 1): "i32",
    _I64: "i64",
}


@dataclass(frozen=True, slots=True)
class Named(Generic[S]):
    """One compiled form: its NAME (never written into the spec, docs/lisp.md#name) and the spec."""

    name: str
    spec: S


class _Kind(Enum):
    STRING = auto()
    INT = auto()
    NUMBER = auto()
    BOOL = auto()
    STRINGS = auto()
    ITEMS = auto()
    CONVERT = auto()


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    keyword: str
    wire: str
    kind: _Kind
    type: Any
    item_type: Any
    required: bool
    bounds: tuple[int, int]


def _strip_annotated(tp: Any) -> tuple[Any, list[msgspec.Meta]]:
    if get_origin(tp) is Annotated:
        base, *extra = get_args(tp)
        return base, [m for m in extra if isinstance(m, msgspec.Meta)]
    return tp, []


def _strip_optional(tp: Any) -> Any:
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _plan_field(info: msgspec.structs.FieldInfo) -> _Field:
    tp, metas = _strip_annotated(_strip_optional(info.type))
    low = max((m.ge for m in metas if m.ge is not None), default=_I64[0])
    high = min((m.le for m in metas if m.le is not None), default=_I64[1])
    item_type: Any = None
    if tp is str:
        kind = _Kind.STRING
    elif tp is bool:
        kind = _Kind.BOOL
    elif tp is int:
        kind = _Kind.INT
    elif tp is float:
        kind = _Kind.NUMBER
    elif get_origin(tp) is list:
        (item_type,) = get_args(tp)
        kind = _Kind.STRINGS if item_type is str else _Kind.ITEMS
    else:
        kind = _Kind.CONVERT
    return _Field(
        name=info.name,
        keyword=info.name.replace("_", "-"),
        wire=info.encode_name,
        kind=kind,
        type=info.type,
        item_type=item_type,
        required=info.required,
        bounds=(int(low), int(high)),
    )


@functools.cache
def _plan(spec_type: type[msgspec.Struct]) -> tuple[_Field, ...]:
    return tuple(_plan_field(f) for f in msgspec.structs.fields(spec_type))


# ── serde's sequence form of a struct ──────────────────────────────────────────


def _positional(value: Json, tp: Any) -> Json:
    """Rewrite JSON arrays that sit where a Struct is expected into objects, field by
    field in declaration order, as serde accepts a struct written as a sequence (docs/lisp.md#field-extraction:
    ``:classification (Gate Compute)``, ``:identity ()``). Recurses through nested
    Structs, lists and dicts."""
    tp, _ = _strip_annotated(_strip_optional(tp))
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        fields = msgspec.structs.fields(tp)
        if isinstance(value, list) and len(value) <= len(fields):
            value = {f.encode_name: v for f, v in zip(fields, value, strict=False)}
        if isinstance(value, dict):
            by_wire = {f.encode_name: f.type for f in fields}
            return {k: _positional(v, by_wire[k]) if k in by_wire else v for k, v in value.items()}
        return value
    origin = get_origin(tp)
    if origin is list and isinstance(value, list):
        (item,) = get_args(tp)
        return [_positional(v, item) for v in value]
    if origin is dict and isinstance(value, dict):
        _, item = get_args(tp)
        return {k: _positional(v, item) for k, v in value.items()}
    return value


def _convert(value: Json, tp: Any) -> Any:
    return msgspec.convert(_positional(value, tp), tp, strict=True)


# ── kwargs ───────────────────────────────────────────────────────────────────


def _suggest(name: str, allowed: Sequence[str]) -> str:
    squash = name.replace("-", "").replace("_", "").lower()
    for candidate in allowed:
        if candidate.replace("-", "").lower() == squash:
            return candidate
    for candidate in allowed:
        if name.startswith(candidate + "-") or candidate.startswith(name + "-"):
            return candidate
    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.75)
    return close[0] if close else ""


def parse_kwargs(args: Sequence[Datum], allowed: Sequence[str], where: SourceMap) -> dict[str, tuple[Keyword, Datum]]:
    """Pair up ``:keyword value`` arguments (docs/lisp.md#keyword-arguments), keyed by the keyword as written.

    Raises :class:`LispError`, in this order of precedence: a non-keyword in a key
    slot (``compile error in kwargs[i]: expected keyword, got <shape>``), a repeated
    keyword (``compile error in :k: duplicate keyword``), a dangling last element
    (``odd keyword arguments: dangling element `<datum>```), a keyword that names no
    field (``compile error in :k: unknown keyword (allowed: …)``).
    """
    pairs: dict[str, tuple[Keyword, Datum]] = {}
    for i in range(0, len(args) - 1, 2):
        key, value = args[i], args[i + 1]
        if not isinstance(key, Keyword):
            raise where.error(f"compile error in kwargs[{i}]: expected keyword, got {shape(key)}", key.index)
        if key.name in pairs:
            raise where.error(f"compile error in :{key.name}: duplicate keyword", key.index)
        pairs[key.name] = (key, value)
    if len(args) % 2:
        dangling = args[-1]
        raise where.error(f"odd keyword arguments: dangling element `{to_source(dangling)}`", dangling.index)
    for name, (key, _) in pairs.items():
        if name not in allowed:
            hint = _suggest(name, allowed)
            did_you_mean = f"did you mean :{hint}?; " if hint else ""
            listing = ", ".join(":" + a for a in allowed)
            raise where.error(
                f"compile error in :{name}: unknown keyword ({did_you_mean}allowed: {listing})", key.index
            )
    return pairs


# ── one field ──────────────────────────────────────────────────────────────────


def _expected(field: _Field, what: str, datum: Datum, where: SourceMap) -> LispError:
    return where.error(f"compile error in :{field.keyword}: expected {what}, got {shape(datum)}", datum.index)


def _extract(field: _Field, datum: Datum, where: SourceMap) -> Json:
    """Return the JSON value of one present field, checked against its type."""
    match field.kind:
        case _Kind.STRING:
            if not isinstance(datum, Str):
                raise _expected(field, "string", datum, where)
            return datum.value
        case _Kind.BOOL:
            if not isinstance(datum, Bool):
                raise _expected(field, "bool", datum, where)
            return datum.value
        case _Kind.INT:
            if not isinstance(datum, Int):
                raise _expected(field, "int", datum, where)
            low, high = field.bounds
            if not low <= datum.value <= high:
                type_name = _INT_NAMES.get(field.bounds, f"[{low}, {high}]")
                raise where.error(
                    f"compile error in :{field.keyword}: {datum.value} is out of range for {type_name}",
                    datum.index,
                )
            return datum.value
        case _Kind.NUMBER:
            if not isinstance(datum, Int | Float):
                raise _expected(field, "number", datum, where)
            return float(datum.value)
        case _Kind.STRINGS:
            if not isinstance(datum, SList):
                raise _expected(field, "list of strings", datum, where)
            for item in datum.items:
                if not isinstance(item, Str):
                    raise _expected(field, "list of strings", item, where)
            return [item.value for item in datum.items if isinstance(item, Str)]
        case _Kind.ITEMS:
            if not isinstance(datum, SList):
                raise _expected(field, "list", datum, where)
            items: list[Json] = []
            for idx, item in enumerate(datum.items):
                value = sexp_to_json(item, where)
                try:
                    _convert(value, field.item_type)
                except msgspec.ValidationError as err:
                    raise where.error(
                        f"compile error in :{field.keyword}[{idx}]: deserialize: {err}", item.index
                    ) from None
                items.append(value)
            return items
        case _Kind.CONVERT:
            value = _positional(sexp_to_json(datum, where), field.type)
            try:
                _convert(value, field.type)
            except msgspec.ValidationError as err:
                raise where.error(f"compile error in :{field.keyword}: deserialize: {err}", datum.index) from None
            return value


def build_spec(spec_type: type[S], args: Sequence[Datum], where: SourceMap, form_index: int = -1) -> S:
    """Build ``spec_type`` from kwargs ``args`` (everything after NAME).

    Fields are taken in declaration order; the first problem raises
    :class:`LispError` (``required but not provided``, ``expected <kind>, got
    <shape>``, ``<v> is out of range for <type>``, ``deserialize: <msgspec message>``),
    located at the offending datum (``form_index`` for a missing field).
    """
    plan = _plan(spec_type)
    pairs = parse_kwargs(args, [f.keyword for f in plan], where)
    wire: dict[str, Json] = {}
    for field in plan:
        present = pairs.get(field.keyword)
        if present is None:
            if field.required:
                raise where.error(f"compile error in :{field.keyword}: required but not provided", form_index)
            continue
        wire[field.wire] = _extract(field, present[1], where)
    try:
        result: S = _convert(wire, spec_type)
    except msgspec.ValidationError as err:
        raise where.error(f"compile error in {spec_type.__name__}: deserialize: {err}", form_index) from None
    return result


def _form_name(form: SList, keyword: str, where: SourceMap) -> str:
    if len(form.items) < 2:
        raise where.error(f"compile error in {keyword}: expected ({keyword} NAME …)", form.index)
    name = form.items[1]
    if isinstance(name, Symbol):
        return name.name
    if isinstance(name, Str):
        return name.value
    raise where.error(
        f"compile error in {keyword}: positional NAME must be a symbol or string (got {shape(name)})",
        name.index,
    )


def compile_forms(forms: Sequence[Datum], spec_type: type[S], keyword: str, where: SourceMap) -> list[Named[S]]:
    """Compile every top-level ``(keyword NAME …)`` form in ``forms`` (docs/lisp.md#pipeline).

    Every other form is skipped silently (docs/lisp.md#skipped-forms). All-or-nothing: the first error
    raises :class:`LispError` and nothing is returned.
    """
    out: list[Named[S]] = []
    for form in forms:
        if not (isinstance(form, SList) and form.items and form.items[0] == Symbol(keyword)):
            continue
        name = _form_name(form, keyword, where)
        out.append(Named(name, build_spec(spec_type, form.items[2:], where, form.index)))
    return out
