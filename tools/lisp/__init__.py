"""The ``(defpoint …)`` / ``(defephemeral …)`` S-expression bridge (docs/lisp.md).

Layers, each usable alone: :mod:`~tools.lisp.reader` (text → data),
:mod:`~tools.lisp.tojson` (data → JSON), :mod:`~tools.lisp.macros` (template
expansion), :mod:`~tools.lisp.compiler` (data → typed Struct),
:mod:`~tools.lisp.registry` (keyword → compiler) and :mod:`~tools.lisp.domains`
(the ``defpoint`` and ``defephemeral`` domains).
"""

from tools.lisp.compiler import Named
from tools.lisp.domains import (
    DEFEPHEMERAL,
    DEFPOINT,
    NamedEphemeral,
    NamedSpec,
    compile_ephemeral_source,
    compile_source,
    register_all,
)
from tools.lisp.errors import LispError
from tools.lisp.reader import read
from tools.lisp.registry import DomainHandler, lookup, registered_keywords
from tools.lisp.syntax import Datum, to_source
from tools.lisp.tojson import Json, kebab_to_camel, sexp_to_json

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
