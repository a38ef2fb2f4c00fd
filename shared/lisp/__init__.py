"""The ``(defpoint …)`` / ``(defephemeral …)`` S-expression bridge (spec/lisp-bridge.md).

Layers, each usable alone: :mod:`~shared.lisp.reader` (text → data),
:mod:`~shared.lisp.tojson` (data → JSON), :mod:`~shared.lisp.macros` (template
expansion), :mod:`~shared.lisp.compiler` (data → typed Struct),
:mod:`~shared.lisp.registry` (keyword → compiler) and :mod:`~shared.lisp.domains`
(the ``defpoint`` and ``defephemeral`` domains).
"""

from shared.lisp.compiler import Named
from shared.lisp.domains import (
    DEFEPHEMERAL,
    DEFPOINT,
    NamedEphemeral,
    NamedSpec,
    compile_ephemeral_source,
    compile_source,
    register_all,
)
from shared.lisp.errors import LispError
from shared.lisp.reader import read
from shared.lisp.registry import DomainHandler, lookup, registered_keywords
from shared.lisp.syntax import Datum, to_source
from shared.lisp.tojson import Json, kebab_to_camel, sexp_to_json

__all__ = [
    "DEFEPHEMERAL",
    "DEFPOINT",
    "Datum",
    "DomainHandler",
    "Json",
    "LispError",
    "Named",
    "NamedEphemeral",
    "NamedSpec",
    "compile_ephemeral_source",
    "compile_source",
    "kebab_to_camel",
    "lookup",
    "read",
    "register_all",
    "registered_keywords",
    "sexp_to_json",
    "to_source",
]
