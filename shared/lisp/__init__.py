"""The ``(defpoint …)`` / ``(defephemeral …)`` S-expression bridge (spec/lisp-bridge.md).

Layers, each usable alone: :mod:`~shared.lisp.reader` (text → data),
:mod:`~shared.lisp.tojson` (data → JSON).
"""

from shared.lisp.errors import LispError
from shared.lisp.reader import read
from shared.lisp.syntax import Datum, to_source
from shared.lisp.tojson import Json, kebab_to_camel, sexp_to_json

__all__ = ["Datum", "Json", "LispError", "kebab_to_camel", "read", "sexp_to_json", "to_source"]
