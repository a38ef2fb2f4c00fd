"""S-expression to JSON conversion (docs/lisp.md#s-expressions-to-json), strict (in-tree) flavour.

JSON values are the Python builtins ``json`` / msgspec use: ``None``, ``bool``,
``int``, ``float``, ``str``, ``list`` and ``dict``.
"""

from __future__ import annotations

import math
from typing import TypeAlias

from tools.lisp.errors import LispError, SourceMap
from tools.lisp.syntax import Bool, Datum, Float, Int, Keyword, Quoted, SList, Str, Symbol

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None


def kebab_to_camel(name: str) -> str:
    """Turn a keyword name into a JSON key (docs/lisp.md#keyword-names): each ``-`` is dropped and upper-cases
    the next character; nothing else changes (``a--b`` → ``aB``, ``x-`` → ``x``).
    """
    out: list[str] = []
    upper_next = False
    for ch in name:
        if ch == "-":
            upper_next = True
        elif upper_next:
            out.append(ch.upper())
            upper_next = False
        else:
            out.append(ch)
    return "".join(out)


def is_plist(items: tuple[Datum, ...]) -> bool:
    """True when a list converts to an object (docs/lisp.md#plists): non-empty, even length, and a
    keyword at every even index."""
    return bool(items) and len(items) % 2 == 0 and all(isinstance(k, Keyword) for k in items[::2])


def sexp_to_json(datum: Datum, where: SourceMap | None = None) -> Json:
    """Convert one datum to JSON.

    Symbols and strings become strings, a keyword value keeps its colon (``":kw"``),
    non-finite floats become ``None``, quote wrappers are stripped, a plist becomes an
    object with camelCase keys and any other list an array.

    Raises :class:`LispError` ``compile error in :K: duplicate keyword`` when two keys
    of one plist give the same camelCase key (K is the later keyword as written).
    ``where`` locates that error in the source.
    """
    match datum:
        case Symbol(name=name):
            return name
        case Keyword(name=name):
            return ":" + name
        case Str(value=value):
            return value
        case Bool(value=value):
            return value
        case Int(value=value):
            return value
        case Float(value=value):
            return value if math.isfinite(value) else None
        case Quoted(datum=inner):
            return sexp_to_json(inner, where)
        case SList(items=items) if is_plist(items):
            obj: dict[str, Json] = {}
            for k, v in zip(items[::2], items[1::2], strict=True):
                assert isinstance(k, Keyword)
                key = kebab_to_camel(k.name)
                if key in obj:
                    message = f"compile error in :{k.name}: duplicate keyword"
                    raise where.error(message, k.index) if where else LispError(message)
                obj[key] = sexp_to_json(v, where)
            return obj
        case SList(items=items):
            return [sexp_to_json(item, where) for item in items]
