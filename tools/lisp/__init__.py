"""The ``(defpoint …)`` / ``(defephemeral …)`` / ``(defenvmatrix …)`` / ``(defencapsulates …)`` /
``(defrouting …)`` S-expression bridge (docs/lisp.md).

Layers, each usable alone: :mod:`~tools.lisp.reader` (text → data),
:mod:`~tools.lisp.tojson` (data → JSON), :mod:`~tools.lisp.macros` (template
expansion), :mod:`~tools.lisp.compiler` (data → typed Struct),
:mod:`~tools.lisp.registry` (keyword → compiler) and :mod:`~tools.lisp.domains`
(the five domains).
"""

from tools.lisp.compiler import Named
from tools.lisp.domains import (
    DEFENCAPSULATES,
    DEFENVMATRIX,
    DEFEPHEMERAL,
    DEFPOINT,
    DEFROUTING,
    NamedEphemeral,
    NamedSpec,
    compile_encapsulates_source,
    compile_env_matrix_source,
    compile_ephemeral_source,
    compile_routing_source,
    compile_source,
    register_all,
)
from tools.lisp.errors import LispError
from tools.lisp.reader import read
from tools.lisp.registry import DomainHandler, lookup, registered_keywords
from tools.lisp.syntax import Datum, to_source
from tools.lisp.tojson import Json, kebab_to_camel, sexp_to_json

__all__ = [
    "DEFENCAPSULATES",
    "DEFENVMATRIX",
    "DEFEPHEMERAL",
    "DEFPOINT",
    "DEFROUTING",
    "Datum",
    "DomainHandler",
    "Json",
    "LispError",
    "Named",
    "NamedEphemeral",
    "NamedSpec",
    "compile_encapsulates_source",
    "compile_env_matrix_source",
    "compile_ephemeral_source",
    "compile_routing_source",
    "compile_source",
    "kebab_to_camel",
    "lookup",
    "read",
    "register_all",
    "registered_keywords",
    "sexp_to_json",
    "to_source",
]
