"""The S-expression reader (docs/lisp.md#reader).

No library on PyPI reads this grammar exactly (sexpdata 1.0.2 keeps the backslash
of unknown escapes, reads ``1_000`` as 1000, ``it's`` as one symbol, ``nil`` as an
empty list, and ``[...]`` as brackets), so the reader is ours. It is iterative, so
deep nesting cannot exhaust the Python stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tools.lisp.errors import SourceMap
from tools.lisp.syntax import (
    Bool,
    Datum,
    Float,
    Int,
    Keyword,
    Quoted,
    QuoteKind,
    SList,
    Str,
    Symbol,
)

WHITESPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B)) + "\u2028\u2029\u202f\u205f\u3000"
)
"""The Unicode White_Space property; not ``str.isspace``, which adds U+001C-U+001F."""

DELIMITERS = frozenset("()'`,\";")
"""Characters that end a bare atom without being part of it."""

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
"""String escapes; any other escaped character stands for itself."""

I64_MIN, I64_MAX = -(2**63), 2**63 - 1

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_FLOAT_WORD = re.compile(r"[+-]?(?:inf|infinity|nan)", re.IGNORECASE)


def classify_atom(token: str, index: int = -1) -> Datum:
    """Classify a bare atom's text: bool, keyword, int, float, else symbol."""
    if token == "#t":
        return Bool(True, index)
    if token == "#f":
        return Bool(False, index)
    if token.startswith(":"):
        return Keyword(token[1:], index)
    if _INT.fullmatch(token):
        value = int(token)
        if I64_MIN <= value <= I64_MAX:
            return Int(value, index)
        return Float(float(token), index)
    if _FLOAT.fullmatch(token) or _FLOAT_WORD.fullmatch(token):
        return Float(float(token), index)
    return Symbol(token, index)


@dataclass(slots=True)
class _OpenList:
    index: int
    items: list[Datum] = field(default_factory=list)


@dataclass(slots=True)
class _Prefix:
    kind: QuoteKind
    index: int


def read(src: str) -> list[Datum]:
    """Read every top-level datum of ``src``, in order.

    Raises :class:`~tools.lisp.errors.LispError` (in-tree wording) for an
    unmatched ``)`` or ``(``, a prefix with nothing after it, or an unterminated
    string; the error's position is a UTF-8 byte offset.
    """
    where = SourceMap(src)
    top: list[Datum] = []
    stack: list[_OpenList | _Prefix] = []
    i, n = 0, len(src)

    def finish(datum: Datum) -> None:
        while stack and isinstance(stack[-1], _Prefix):
            prefix = stack.pop()
            assert isinstance(prefix, _Prefix)
            datum = Quoted(prefix.kind, datum, prefix.index)
        if stack:
            frame = stack[-1]
            assert isinstance(frame, _OpenList)
            frame.items.append(datum)
        else:
            top.append(datum)

    while i < n:
        c = src[i]
        if c in WHITESPACE:
            i += 1
        elif c == ";":
            end = src.find("\n", i)
            i = n if end < 0 else end + 1
        elif c == "(":
            stack.append(_OpenList(i))
            i += 1
        elif c == ")":
            if not stack or isinstance(stack[-1], _Prefix):
                raise where.error(f"unmatched closing paren at position {where.locate(i)[0]}", i)
            frame = stack.pop()
            assert isinstance(frame, _OpenList)
            i += 1
            finish(SList(tuple(frame.items), frame.index))
        elif c in "'`,":
            if c == "'":
                stack.append(_Prefix("quote", i))
                i += 1
            elif c == "`":
                stack.append(_Prefix("quasiquote", i))
                i += 1
            elif src.startswith(",@", i):
                stack.append(_Prefix("unquote-splice", i))
                i += 2
            else:
                stack.append(_Prefix("unquote", i))
                i += 1
        elif c == '"':
            start = i
            i += 1
            chars: list[str] = []
            while True:
                if i >= n or (src[i] == "\\" and i + 1 >= n):
                    byte = where.locate(start)[0]
                    raise where.error(f"unterminated string literal at position {byte}", start)
                ch = src[i]
                if ch == '"':
                    i += 1
                    break
                if ch == "\\":
                    chars.append(ESCAPES.get(src[i + 1], src[i + 1]))
                    i += 2
                else:
                    chars.append(ch)
                    i += 1
            finish(Str("".join(chars), start))
        else:
            start = i
            while i < n and src[i] not in WHITESPACE and src[i] not in DELIMITERS:
                i += 1
            finish(classify_atom(src[start:i], start))

    if stack:
        frame = stack[-1]
        if isinstance(frame, _Prefix):
            raise where.error(f"unexpected end of input at position {len(src.encode('utf-8'))}", n)
        raise where.error(f"unmatched opening paren at position {where.locate(frame.index)[0]}", frame.index)
    return top
