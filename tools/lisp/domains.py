"""The domains tatara defines: ``defpoint`` → ProcessSpec, ``defephemeral`` → EphemeralSpec,
``defenvmatrix`` → EnvMatrixSpec, ``defencapsulates`` → EncapsulatesSpec and ``defrouting`` →
RoutingSpec (docs/lisp.md#forms)."""

from __future__ import annotations

from typing import TypeVar

import msgspec

from shared.domain.api.codec import to_wire
from shared.domain.api.encapsulates import EncapsulatesSpec
from shared.domain.api.envmatrix import EnvMatrixSpec
from shared.domain.api.ephemeral import EphemeralSpec
from shared.domain.api.process import ProcessSpec
from shared.domain.api.routing import RoutingSpec
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

DEFENVMATRIX = "defenvmatrix"
"""Keyword of an EnvMatrixSpec form."""

DEFENCAPSULATES = "defencapsulates"
"""Keyword of an EncapsulatesSpec form."""

DEFROUTING = "defrouting"
"""Keyword of a RoutingSpec form."""

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


def compile_env_matrix_source(src: str) -> list[Named[EnvMatrixSpec]]:
    """Compile every ``(defenvmatrix NAME :kw value …)`` form in ``src`` (docs/lisp.md#defenvmatrix).

    ``:base`` (an EphemeralSpec plist) and ``:axes`` (a list of axis plists) are required;
    ``:select`` defaults to ``Cartesian`` and ``:budget`` to ``(:max-envs 0)``. Expand a result with
    ``spec.expand(name)`` (docs/wire-format.md#envmatrixspec). Raises :class:`~tools.lisp.errors.LispError`.
    """
    return compile_program(src, EnvMatrixSpec, DEFENVMATRIX)


def compile_encapsulates_source(src: str) -> list[Named[EncapsulatesSpec]]:
    """Compile every ``(defencapsulates NAME :kind (…) :mode …)`` form in ``src``
    (docs/lisp.md#defencapsulates). Raises :class:`~tools.lisp.errors.LispError`."""
    return compile_program(src, EncapsulatesSpec, DEFENCAPSULATES)


def compile_routing_source(src: str) -> list[Named[RoutingSpec]]:
    """Compile every ``(defrouting NAME :hostnames (…) :backend (…) …)`` form in ``src``
    (docs/lisp.md#defrouting). Raises :class:`~tools.lisp.errors.LispError`."""
    return compile_program(src, RoutingSpec, DEFROUTING)


def _encode(spec: msgspec.Struct) -> Json:
    value: Json = to_wire(spec)
    return value


def register_all() -> None:
    """Register the five domains with the process-wide registry (docs/lisp.md#registry): ``defpoint``
    and ``defephemeral`` (as the reference does), then ``defenvmatrix``, ``defencapsulates`` and
    ``defrouting``. Idempotent."""
    registry.register(DEFPOINT, ProcessSpec, _encode)
    registry.register(DEFEPHEMERAL, EphemeralSpec, _encode)
    registry.register(DEFENVMATRIX, EnvMatrixSpec, _encode)
    registry.register(DEFENCAPSULATES, EncapsulatesSpec, _encode)
    registry.register(DEFROUTING, RoutingSpec, _encode)
