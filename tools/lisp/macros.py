"""The macro layer that runs before form selection (docs/lisp.md#macros).

``(defmacro NAME (PARAMS…) BODY)`` (also spelled ``defpoint-template`` or
``defcheck``) defines a template; any list headed by a defined name is replaced by
its body with ``,param`` substituted and ``,@param`` spliced, at any depth and
repeatedly. ``&rest name`` collects the remaining arguments. Quoted data is not
expanded. Definitions produce no output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tools.lisp.errors import SourceMap
from tools.lisp.syntax import Datum, Quoted, SList, Symbol

DEFINING_HEADS = frozenset({"defmacro", "defpoint-template", "defcheck"})
"""Heads reserved for macro definitions."""

MAX_EXPANSIONS = 10_000
"""Expansion budget per program, so a self-recursive macro fails instead of hanging."""


@dataclass(frozen=True, slots=True)
class Macro:
    """A template: positional ``params``, optional ``rest`` name, and its ``body``."""

    name: str
    params: tuple[str, ...]
    rest: str | None
    body: Datum


def _definition(form: SList, head: str, where: SourceMap) -> Macro:
    usage = f"compile error in {head}: ({head} name (params) body) required"
    if len(form.items) < 4:
        raise where.error(usage, form.index)
    name, params, body = form.items[1], form.items[2], form.items[3]
    if not isinstance(name, Symbol):
        raise where.error(f"compile error in {head}: expected name symbol", name.index)
    if not isinstance(params, SList) or not all(isinstance(p, Symbol) for p in params.items):
        raise where.error(f"compile error in {head}: expected param list", params.index)
    names = [p.name for p in params.items if isinstance(p, Symbol)]
    rest: str | None = None
    if "&rest" in names:
        at = names.index("&rest")
        if at != len(names) - 2:
            raise where.error(f"compile error in {head}: &rest must precede the last parameter", params.index)
        rest, names = names[-1], names[:at]
    if isinstance(body, Quoted) and body.kind == "quasiquote":
        body = body.datum
    return Macro(name.name, tuple(names), rest, body)


class _Expander:
    def __init__(self, macros: dict[str, Macro], where: SourceMap) -> None:
        self.macros = macros
        self.where = where
        self.budget = MAX_EXPANSIONS

    def expand(self, datum: Datum) -> Datum:
        while isinstance(datum, SList) and datum.items and isinstance(datum.items[0], Symbol):
            macro = self.macros.get(datum.items[0].name)
            if macro is None:
                break
            self.budget -= 1
            if self.budget < 0:
                raise self.where.error(f"compile error in {macro.name}: expansion limit reached", datum.index)
            datum = self._apply(macro, datum)
        if isinstance(datum, SList):
            return SList(tuple(self.expand(item) for item in datum.items), datum.index)
        if isinstance(datum, Quoted) and datum.kind != "quote":
            return Quoted(datum.kind, self.expand(datum.datum), datum.index)
        return datum

    def _apply(self, macro: Macro, call: SList) -> Datum:
        args = call.items[1:]
        if len(args) < len(macro.params) or (macro.rest is None and len(args) > len(macro.params)):
            wanted = f"{len(macro.params)}{'+' if macro.rest else ''}"
            raise self.where.error(
                f"compile error in {macro.name}: expected {wanted} arguments, got {len(args)}", call.index
            )
        env: dict[str, Datum] = dict(zip(macro.params, args, strict=False))
        if macro.rest is not None:
            env[macro.rest] = SList(tuple(args[len(macro.params) :]), call.index)
        return _substitute(macro.body, env)


def _substitute(datum: Datum, env: dict[str, Datum]) -> Datum:
    if isinstance(datum, Quoted) and datum.kind == "unquote" and isinstance(datum.datum, Symbol):
        return env.get(datum.datum.name, datum)
    if isinstance(datum, Quoted):
        return Quoted(datum.kind, _substitute(datum.datum, env), datum.index)
    if not isinstance(datum, SList):
        return datum
    items: list[Datum] = []
    for item in datum.items:
        if (
            isinstance(item, Quoted)
            and item.kind == "unquote-splice"
            and isinstance(item.datum, Symbol)
            and item.datum.name in env
        ):
            spliced = env[item.datum.name]
            items.extend(spliced.items if isinstance(spliced, SList) else (spliced,))
        else:
            items.append(_substitute(item, env))
    return SList(tuple(items), datum.index)


def expand_program(forms: Sequence[Datum], where: SourceMap) -> list[Datum]:
    """Collect the top-level macro definitions, drop them, and expand every other form.

    Raises :class:`~tools.lisp.errors.LispError` for a malformed definition
    (``compile error in defmacro: (defmacro name (params) body) required``), a call
    with the wrong number of arguments, or runaway expansion.
    """
    macros: dict[str, Macro] = {}
    rest: list[Datum] = []
    for form in forms:
        head = form.items[0] if isinstance(form, SList) and form.items else None
        if isinstance(head, Symbol) and head.name in DEFINING_HEADS:
            assert isinstance(form, SList)
            macro = _definition(form, head.name, where)
            macros[macro.name] = macro
        else:
            rest.append(form)
    if not macros:
        return rest
    expander = _Expander(macros, where)
    return [expander.expand(form) for form in rest]
