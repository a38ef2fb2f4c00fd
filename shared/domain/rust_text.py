"""Texts the reference builds with Rust's formatting: ``{:?}`` of a string.

Source: Rust ``core`` — ``impl Debug for str`` and ``char::escape_debug_ext`` (with
``escape_grapheme_extended``, ``escape_double_quote``), ``core::unicode::printable``
(docs/wire-format.md#error-texts). Used wherever a reference error text quotes a value:
``invalid DNS label "<l>"…``, ``ephemeral env id must be lowercase hex [0-9a-f], got "<s>"``,
``version != tatara-receipt/v1 (got "<v>")``.
"""

from __future__ import annotations

import unicodedata
from typing import Final

__all__ = ["debug_str"]

_SHORT: Final = {"\0": "\\0", "\t": "\\t", "\r": "\\r", "\n": "\\n", "\\": "\\\\", '"': '\\"'}

_NOT_PRINTABLE: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
"""General categories Rust's ``is_printable`` treats as not printable (U+0020 SPACE aside)."""

_OTHER_GRAPHEME_EXTEND: Final = (
    (0x09BE, 0x09BE), (0x09D7, 0x09D7), (0x0B3E, 0x0B3E), (0x0B57, 0x0B57), (0x0BBE, 0x0BBE),
    (0x0BD7, 0x0BD7), (0x0CC2, 0x0CC2), (0x0CD5, 0x0CD6), (0x0D3E, 0x0D3E), (0x0D57, 0x0D57),
    (0x0DCF, 0x0DCF), (0x0DDF, 0x0DDF), (0x1B35, 0x1B35), (0x200C, 0x200C), (0x302E, 0x302F),
    (0xFF9E, 0xFF9F), (0x1133E, 0x1133E), (0x11357, 0x11357), (0x114B0, 0x114B0), (0x114BD, 0x114BD),
    (0x115AF, 0x115AF), (0x11930, 0x11930), (0x1D165, 0x1D165), (0x1D16E, 0x1D172), (0xE0020, 0xE007F),
)
"""Unicode's ``Other_Grapheme_Extend`` (PropList.txt): with the nonspacing and enclosing marks
(Mn, Me) they make ``Grapheme_Extend``."""


def _is_grapheme_extended(char: str) -> bool:
    if unicodedata.category(char) in ("Mn", "Me"):
        return True
    code = ord(char)
    return any(low <= code <= high for low, high in _OTHER_GRAPHEME_EXTEND)


def _escape(char: str) -> str:
    short = _SHORT.get(char)
    if short is not None:
        return short
    if char == " " or (" " < char < "\x7f"):
        return char
    if _is_grapheme_extended(char) or unicodedata.category(char) in _NOT_PRINTABLE:
        return f"\\u{{{ord(char):x}}}"
    return char


def debug_str(text: str) -> str:
    """``format!("{:?}", text)``: ``text`` in double quotes, with ``\\0 \\t \\r \\n \\\\ \\"`` and
    ``\\u{<hex>}`` (lower-case, no padding) for grapheme extenders and characters that are not
    printable (controls, format characters, separators other than the space, unassigned…).

    E.g. ``debug_str('a"b') == '"a\\\\"b"'``, ``debug_str("a\\u200bb") == '"a\\\\u{200b}b"'``.
    The character classes come from Python's ``unicodedata`` (its Unicode version: a character
    assigned after it is escaped here, where a newer Rust prints it).
    """
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    return '"' + "".join(_escape(c) for c in text) + '"'
