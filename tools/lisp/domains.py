"""The two domains tatara defines: ``defpoint`` → ProcessSpec and ``defephemeral`` →
EphemeralSpec (docs/lisp.md#defpoint, docs/lisp.md#defephemeral)."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from shared.domain.api.codec import to_wire
from shared.domain.api.ephemeral import EphemeralSpec
from shared.domain.api.process import ProcessSpec
from tools.lisp import registry
from tools.lisp.compiler import Named, compile_forms
from tools.lisp.errors import LispError, SourceMap
from tools.lisp.macros import expand_program
from tools.lisp.reader import read
from tools.lisp.tojson import Json

S = TypeVar("S", bound=msgspec.Struct)

DEFPOINT = "defpoint"
"""Keyword of a ProcessSpec form."""

DEFEPHEMERAL = "defephemeral"
"""Keyword of an EphemeralSpec form."""

NamedSpec = Named[ProcessSpec]
"""A compiled ``(defpoint NAME …)``: ``.name`` and ``.spec`` (a ProcessSpec)."""

NamedEphemeral = Named[EphemeralSpec]
"""A compiled ``(defephemeral NAME …)``: ``.name`` and ``.spec`` (an EphemeralSpec)."""


def compile_program(src: str, spec_type: type[S], keyword: str) -> list[Named[S]]:
    """Read ``src``, expand its macros and compile each top-level ``(keyword NAME …)``
    form into ``spec_type``, in source order; other forms are skipped.

    All-or-nothing: raises :class:`~tools.lisp.errors.LispError` on the first reader,
    macro or compile error, located by byte offset, line and column.
    """
    where = SourceMap(src)
    forms = read(src)
    try:
        return compile_forms(expand_program(forms, where), spec_type, keyword, where)
    except RecursionError:
        raise LispError(f"compile error in {keyword}: nesting too deep") from None


def compile_source(src: str) -> list[NamedSpec]:
    """Compile every ``(defpoint NAME :kw value …)`` form in ``src`` (docs/lisp.md#defpoint).

    ``:classification`` and ``:intent`` are required; the other keywords default as
    ProcessSpec does. Duplicate and unknown keywords are errors, as in the in-tree copy (docs/lisp.md#errors). Raises
    :class:`~tools.lisp.errors.LispError`.
    """
    return compile_program(src, ProcessSpec, DEFPOINT)


def compile_ephemeral_source(src: str) -> list[NamedEphemeral]:
    """Compile every ``(defephemeral NAME :kw value …)`` form in ``src`` (docs/lisp.md#defephemeral).

    ``:aplicacao`` is required; ``:ttl`` defaults to ``"1h"`` and ``:max-concurrent``
    to 1. Lower a result with ``spec.to_process_spec()`` (docs/wire-format.md#ephemeralspec). Raises
    :class:`~tools.lisp.errors.LispError`.
    """
    return compile_program(src, EphemeralSpec, DEFEPHEMERAL)


def _encode(spec: msgspec.Struct) -> Json:
    value: Json = to_wire(spec)
    return value


def register_all() -> None:
    """Register ``defpoint`` and ``defephemeral`` with the process-wide registry
    (docs/lisp.md#registry). Idempotent."""
    registry.register(DEFPOINT, ProcessSpec, _encode)
    registry.register(DEFEPHEMERAL, EphemeralSpec, _encode)
