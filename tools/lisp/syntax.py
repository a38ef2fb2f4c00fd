"""S-expression data as the reader produces them (docs/lisp.md#reader).

Six atom kinds are kept apart because later stages depend on it: a symbol and a
string convert to the same JSON string but only a string literal fills a ``str``
field (docs/lisp.md#field-extraction), and only a keyword can occupy a key slot (docs/lisp.md#plists).

Every datum carries ``index``, the character index of its first character in the
source (``-1`` when built by code); it is ignored by equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

QuoteKind = Literal["quote", "quasiquote", "unquote", "unquote-splice"]

QUOTE_PREFIX: dict[QuoteKind, str] = {
    "quote": "'",
    "quasiquote": "`",
    "unquote": ",",
    "unquote-splice": ",@",
}


@dataclass(frozen=True, slots=True)
class Symbol:
    """A bare atom that is not a number, bool or keyword; case preserved (``Gate``, ``seph.1``)."""

    name: str
    index: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Keyword:
    """``:name``; ``name`` excludes the leading colon and may be empty."""

    name: str
    index: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Str:
    """A string literal, escapes decoded."""

    value: str
    index: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Int:
    """An integer literal in the signed 64-bit range."""

    value: int
    index: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Float:
    """A floating-point literal (may be infinite or NaN)."""

    value: float
    index: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Bool:
    """``#t`` or ``#f``."""

    value: bool
    index: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class SList:
    """A parenthesised list; ``()`` is the empty list (there is no nil literal)."""

    items: tuple[Datum, ...]
    index: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Quoted:
    """A prefixed datum: ``'x``, `` `x``, ``,x`` or ``,@x``."""

    kind: QuoteKind
    datum: Datum
    index: int = field(default=-1, compare=False)


Datum = Symbol | Keyword | Str | Int | Float | Bool | SList | Quoted


def shape(datum: Datum) -> str:
    """The lower-case kind name used in error messages (``got int``, ``got list``)."""
    match datum:
        case Symbol():
            return "symbol"
        case Keyword():
            return "keyword"
        case Str():
            return "string"
        case Int():
            return "int"
        case Float():
            return "float"
        case Bool():
            return "bool"
        case SList():
            return "list"
        case Quoted(kind=kind):
            return kind


def _print_str(value: str) -> str:
    escaped = (
        value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    )
    return f'"{escaped}"'


def _print_float(value: float) -> str:
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    return text if any(c in text for c in ".en") else text + ".0"


def to_source(datum: Datum) -> str:
    """Print ``datum`` as Lisp source that reads back to an equal datum.

    Symbols are printed verbatim, so a symbol whose text reads as something else
    (``12``, ``#t``) does not round-trip; the reader never produces one.
    """
    match datum:
        case Symbol(name=name):
            return name
        case Keyword(name=name):
            return ":" + name
        case Str(value=value):
            return _print_str(value)
        case Int(value=value):
            return str(value)
        case Float(value=value):
            return _print_float(value)
        case Bool(value=value):
            return "#t" if value else "#f"
        case SList(items=items):
            return "(" + " ".join(to_source(item) for item in items) + ")"
        case Quoted(kind=kind, datum=inner):
            text = to_source(inner)
            if kind == "unquote" and text.startswith("@"):
                return ", " + text  # ",@" would read back as unquote-splice
            return QUOTE_PREFIX[kind] + text
