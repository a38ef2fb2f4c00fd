"""The process-wide domain registry: keyword → typed compiler (docs/lisp.md#registry)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

from tools.lisp.compiler import build_spec
from tools.lisp.errors import SourceMap
from tools.lisp.syntax import Datum
from tools.lisp.tojson import Json


@dataclass(frozen=True, slots=True)
class DomainHandler:
    """A registered domain.

    ``compile(args)`` takes the kwargs of a form only (no head, no NAME), builds the
    typed spec with the same rules as ``compile_source`` and returns it serialized
    to JSON (camelCase keys, defaults filled in). It raises
    :class:`~tools.lisp.errors.LispError`; a NAME first in ``args`` fails with
    ``compile error in kwargs[0]: expected keyword, got symbol``. Errors carry no
    position, since ``args`` have no source text.
    """

    keyword: str
    spec_type: type[msgspec.Struct]
    compile: Callable[[Sequence[Datum]], Json]


_lock = threading.Lock()
_handlers: dict[str, DomainHandler] = {}


def register(keyword: str, spec_type: type[msgspec.Struct], encode: Callable[[msgspec.Struct], Json]) -> None:
    """Register ``spec_type`` under ``keyword``, replacing any earlier entry (so
    registering twice is harmless). ``encode`` serializes a built spec to JSON."""

    def compile_args(args: Sequence[Datum]) -> Json:
        return encode(build_spec(spec_type, args, SourceMap(None)))

    with _lock:
        _handlers[keyword] = DomainHandler(keyword, spec_type, compile_args)


def lookup(keyword: str) -> DomainHandler | None:
    """The handler registered under ``keyword``, or ``None``; never raises."""
    with _lock:
        return _handlers.get(keyword)


def registered_keywords() -> list[str]:
    """Every registered keyword, in no particular order."""
    with _lock:
        return list(_handlers)
