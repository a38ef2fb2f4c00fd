"""The macro layer (docs/lisp.md#macros) and order-independence of kwargs (docs/lisp.md#keyword-arguments)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.lisp import LispError, compile_source, read
from tools.lisp.errors import SourceMap
from tools.lisp.macros import expand_program
from tools.lisp.syntax import to_source


def expanded(src: str) -> str:
    return " ".join(to_source(d) for d in expand_program(read(src), SourceMap(src)))


EXPANSIONS = [
    ("a definition produces no output", "(defmacro m () 1)", ""),
    ("a template head is reserved too", "(defpoint-template t (x) ,x) (t 5)", "5"),
    ("a check head is reserved too", "(defcheck c () ok) (c)", "ok"),
    ("unquote substitutes a parameter", "(defmacro m (a b) (,b ,a)) (m 1 2)", "(2 1)"),
    ("a leading quasiquote on the body is removed", "(defmacro m (a) `(x ,a)) (m 1)", "(x 1)"),
    ("splice inserts a list's items", "(defmacro m (xs) (a ,@xs b)) (m (1 2))", "(a 1 2 b)"),
    ("&rest collects the remaining arguments", "(defmacro m (a &rest r) (,a ,@r)) (m 1 2 3)", "(1 2 3)"),
    ("calls expand at any depth", "(defmacro m () 9) (a (b (m)))", "(a (b 9))"),
    ("expansion repeats until no macro is left", "(defmacro m () (n)) (defmacro n () 7) (m)", "7"),
    ("quoted data is not expanded", "(defmacro m () 9) '(m)", "'(m)"),
    ("a program without macros is unchanged", "(a b) c", "(a b) c"),
]


@pytest.mark.parametrize(("src", "out"), [c[1:] for c in EXPANSIONS], ids=[c[0] for c in EXPANSIONS])
def test_expansion(src: str, out: str) -> None:
    assert expanded(src) == out


MACRO_ERRORS = [
    ("too short a definition", "(defmacro bad)", "compile error in defmacro: (defmacro name (params) body) required"),
    ("a template that is too short", "(defpoint-template t ())", "compile error in defpoint-template: "),
    ("a name that is not a symbol", '(defmacro "m" () 1)', "compile error in defmacro: expected name symbol"),
    ("params that are not a list", "(defmacro m x 1)", "compile error in defmacro: expected param list"),
    ("too few arguments", "(defmacro m (a b) 1) (m 1)", "compile error in m: expected 2 arguments, got 1"),
    ("too many arguments", "(defmacro m (a) 1) (m 1 2)", "compile error in m: expected 1 arguments, got 2"),
    ("a macro that never stops", "(defmacro m () (m)) (m)", "compile error in m: expansion limit reached"),
]


@pytest.mark.parametrize(("src", "prefix"), [c[1:] for c in MACRO_ERRORS], ids=[c[0] for c in MACRO_ERRORS])
def test_macro_errors(src: str, prefix: str) -> None:
    with pytest.raises(LispError) as err:
        expanded(src)
    assert err.value.message.startswith(prefix), err.value.message


PAIRS = [
    ":classification (:point-type Gate :substrate Compute)",
    ':intent (:flux (:git-repository "g" :path "."))',
    ':identity (:parent "p.1")',
    ":suspended #t",
    ':depends-on ((:name "a"))',
    ":signals (:sigterm-grace-seconds 30)",
    ':boundary (:timeout "5m")',
]


@given(st.permutations(PAIRS))
def test_keyword_order_does_not_change_the_spec(pairs: list[str]) -> None:
    (first,) = compile_source(f"(defpoint x {' '.join(PAIRS)})")
    (again,) = compile_source(f"(defpoint x {' '.join(pairs)})")
    assert again == first


@given(st.sampled_from(PAIRS[2:]), st.sampled_from(PAIRS[2:]))
def test_any_repeated_keyword_is_rejected(a: str, b: str) -> None:
    src = f"(defpoint x {PAIRS[0]} {PAIRS[1]} {a} {b})"
    if a == b:
        with pytest.raises(LispError, match="duplicate keyword"):
            compile_source(src)
    else:
        assert len(compile_source(src)) == 1
