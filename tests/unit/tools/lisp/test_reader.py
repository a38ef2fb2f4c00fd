"""The reader (docs/lisp.md#reader) and S-expression → JSON conversion (docs/lisp.md#s-expressions-to-json)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.lisp.errors import LispError
from tools.lisp.reader import read
from tools.lisp.syntax import (
    Bool,
    Datum,
    Float,
    Int,
    Keyword,
    Quoted,
    SList,
    Str,
    Symbol,
    to_source,
)
from tools.lisp.tojson import kebab_to_camel, sexp_to_json


def program_json(src: str) -> list[object]:
    return [sexp_to_json(d) for d in read(src)]


S_CASES = [
    (
        "S1 numbers, strings, keywords and bools",
        'foo 42 -7 +5 3.14 -2.5 1e3 .5 5. "hi" :kw #t #f',
        ["foo", 42, -7, 5, 3.14, -2.5, 1000.0, 0.5, 5.0, "hi", ":kw", True, False],
    ),
    (
        "S2 look-alikes stay symbols",
        "true false nil #T [] [1 2] 1_000 007 -0 seph.1",
        ["true", "false", "nil", "#T", "[]", "[1", "2]", "1_000", 7, 0, "seph.1"],
    ),
    (
        "S3 non-finite floats become null and odd atoms stay symbols",
        "inf NaN -inf 1e400 9223372036854775808 1e e5 . -",
        [None, None, None, None, 9.223372036854776e18, "1e", "e5", ".", "-"],
    ),
    (
        "S4 escapes are decoded and unknown escapes drop the backslash",
        r'"a\nb\tc\"d\\e\q\x\r"',
        ['a\nb\tc"d\\eqx\r'],
    ),
    ("S5 line comments end at a newline", '"ok" ; comment "x"\n(a;inner\nb)', ["ok", ["a", "b"]]),
    (
        "S6 quote wrappers are stripped",
        "'foo '(a b) `(:a ,x) ,@y '(:k v)",
        ["foo", ["a", "b"], {"a": "x"}, "y", {"k": "v"}],
    ),
    (
        "S7 only even keyword-headed lists are objects",
        "() (:) (:a) (:a 1) (:a 1 :b) (:a 1 b 2) (1 :a 2) ((:a 1) (:b 2)) (:a :b) (:a (1 2) :b ())",
        [
            [],
            [":"],
            [":a"],
            {"a": 1},
            [":a", 1, ":b"],
            [":a", 1, "b", 2],
            [1, ":a", 2],
            [{"a": 1}, {"b": 2}],
            {"a": ":b"},
            {"a": [1, 2], "b": []},
        ],
    ),
    (
        "S8 nested plists convert at every depth",
        '(:a (:b (:c-d-e "x")) :f ((:g 1) (:h 2)))',
        [{"a": {"b": {"cDE": "x"}}, "f": [{"g": 1}, {"h": 2}]}],
    ),
    (
        "S9 keys are kebab to camel with no exceptions",
        "(:a--b 1 :-x 2 :x- 3 :a_b 4 :Foo 5 :a-1 6 :ns/k-v 8)",
        [{"aB": 1, "X": 2, "x": 3, "a_b": 4, "Foo": 5, "a1": 6, "ns/kV": 8}],
    ),
    (
        "S11 delimiters end atoms",
        'x"y"z  it\'s  (a,b)  a;b',
        ["x", "y", "z", "it", "s", ["a", "b"], "a"],
    ),
    ("empty input is an empty program", "", []),
    ("a string is never re-classified", '"42" ":k" "#t"', ["42", ":k", "#t"]),
    ("a string may span lines and hold a semicolon", '"a\n;b"', ["a\n;b"]),
    ("dotted pairs do not exist", "(a . b)", [["a", ".", "b"]]),
    ("i64 bounds stay integers", "-9223372036854775808 9223372036854775807", [-(2**63), 2**63 - 1]),
    ("a quoted keyword is not a key", "(':a 1)", [[":a", 1]]),
]


@pytest.mark.parametrize(("src", "expected"), [c[1:] for c in S_CASES], ids=[c[0] for c in S_CASES])
def test_program_converts_to_the_expected_json(src: str, expected: list[object]) -> None:
    assert program_json(src) == expected


def test_s3_json_text_has_no_bare_nan() -> None:
    assert json.dumps(program_json("NaN inf")) == "[null, null]"


def test_s1_whole_float_stays_float() -> None:
    (value,) = program_json("1e3")
    assert isinstance(value, float)


@pytest.mark.parametrize(
    ("src", "message"),
    [
        ("(:a 1 :a 2)", "compile error in :a: duplicate keyword"),
        ("(:point-type X :pointType Y)", "compile error in :pointType: duplicate keyword"),
    ],
    ids=["S10 the same key twice", "S10 two spellings of one camel key"],
)
def test_s10_duplicate_plist_key_is_rejected(src: str, message: str) -> None:
    with pytest.raises(LispError) as err:
        program_json(src)
    assert err.value.message == message


ERROR_CASES = [
    ("S12 end of input inside a list", "(a b", "unmatched opening paren at position 0", 1, 1),
    ("S13 a close paren with no open list", "   )", "unmatched closing paren at position 3", 1, 4),
    ("S14 a prefix with nothing after it", "(a b) '", "unexpected end of input at position 7", 1, 8),
    ("S15 an unterminated string", '"ok" "abc', "unterminated string literal at position 5", 1, 6),
    ("a backslash ending the input", '"ab\\', "unterminated string literal at position 0", 1, 1),
    ("the innermost open paren is reported", "(a\n  (b", "unmatched opening paren at position 5", 2, 3),
    ("a prefix closed by a paren", "(a ')", "unmatched closing paren at position 4", 1, 5),
    ("S a close paren after an atom", "a)b", "unmatched closing paren at position 1", 1, 2),
    ("positions are utf-8 byte offsets", 'é "x', "unterminated string literal at position 3", 1, 3),
]


@pytest.mark.parametrize(
    ("src", "message", "line", "column"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_reader_error_text_and_location(src: str, message: str, line: int, column: int) -> None:
    with pytest.raises(LispError) as err:
        read(src)
    assert err.value.message == message
    assert (err.value.line, err.value.column) == (line, column)
    assert str(err.value) == f"{message} (line {line}, column {column})"


def test_reader_keeps_atom_kinds_apart() -> None:
    assert read('sym :kw "s" 1 1.5 #t') == [
        Symbol("sym"),
        Keyword("kw"),
        Str("s"),
        Int(1),
        Float(1.5),
        Bool(True),
    ]


def test_keyword_names_may_be_empty_or_hold_colons() -> None:
    assert read(": ::") == [Keyword(""), Keyword(":")]


def test_prefixes_nest() -> None:
    assert read("',x ,@y") == [
        Quoted("quote", Quoted("unquote", Symbol("x"))),
        Quoted("unquote-splice", Symbol("y")),
    ]


@pytest.mark.parametrize("ws", ["\u00a0", "\u2003", "\u3000", "\x85", "\v"])
def test_unicode_white_space_separates_tokens(ws: str) -> None:
    assert read(f"a{ws}b") == [Symbol("a"), Symbol("b")]


@pytest.mark.parametrize("ch", ["\x1c", "\x1f"])
def test_information_separators_are_atom_characters(ch: str) -> None:
    assert read(f"a{ch}b") == [Symbol(f"a{ch}b")]


def test_deep_nesting_does_not_exhaust_the_stack() -> None:
    depth = 50_000
    (datum,) = read("(" * depth + ")" * depth)
    for _ in range(depth - 1):
        assert isinstance(datum, SList)
        (datum,) = datum.items
    assert datum == SList(())


KEBAB_CASES = [
    ("point-type", "pointType"),
    ("must-reach", "mustReach"),
    ("data-classification", "dataClassification"),
    ("sigterm-grace-seconds", "sigtermGraceSeconds"),
    ("probeImage", "probeImage"),
    ("HOME", "HOME"),
    ("a--b", "aB"),
    ("-x", "X"),
    ("x-", "x"),
    ("a-1", "a1"),
    ("a_b", "a_b"),
    ("ns/k-v", "ns/kV"),
    ("é-ü", "éÜ"),
    ("log-level", "logLevel"),
    ("a-ß", "aSS"),
]


@pytest.mark.parametrize(("name", "key"), KEBAB_CASES, ids=[c[0] for c in KEBAB_CASES])
def test_kebab_to_camel(name: str, key: str) -> None:
    assert kebab_to_camel(name) == key


# ── properties ───────────────────────────────────────────────────────────────

_ATOM_TEXT = st.text(
    alphabet=st.characters(
        blacklist_characters="()'`,\";",
        blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs"),
    ),
    min_size=1,
)


def _is_symbol(text: str) -> bool:
    (datum,) = read(text)
    return isinstance(datum, Symbol)


atoms: st.SearchStrategy[Datum] = st.one_of(
    _ATOM_TEXT.filter(lambda t: _is_symbol(t)).map(Symbol),
    _ATOM_TEXT.map(lambda t: Keyword(t[1:] if t.startswith(":") else t)),
    st.text().map(Str),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(Int),
    st.floats(allow_nan=False).map(Float),
    st.booleans().map(Bool),
)

data: st.SearchStrategy[Datum] = st.recursive(
    atoms,
    lambda children: st.one_of(
        st.lists(children, max_size=6).map(lambda xs: SList(tuple(xs))),
        st.tuples(st.sampled_from(["quote", "quasiquote", "unquote", "unquote-splice"]), children).map(
            lambda kd: Quoted(kd[0], kd[1])  # type: ignore[arg-type]
        ),
    ),
    max_leaves=25,
)


@given(st.lists(data, max_size=5))
def test_print_then_read_is_identity(program: list[Datum]) -> None:
    assert read(" ".join(to_source(d) for d in program)) == program


@given(st.lists(data, max_size=5), st.sampled_from([" ", "\n", "\t ; c\n", "\u3000"]))
def test_separator_choice_does_not_change_the_program(program: list[Datum], sep: str) -> None:
    assert read(sep.join(to_source(d) for d in program) + sep) == program


@given(data)
def test_conversion_gives_finite_json(datum: Datum) -> None:
    try:
        value = sexp_to_json(datum)
    except LispError as err:
        failure = err.message
    else:
        failure = None
    if failure is not None:
        assert failure.endswith(": duplicate keyword")
        return
    text = json.dumps(value, allow_nan=False)
    assert json.loads(text) == value


@given(st.floats())
def test_every_float_converts_to_a_json_number_or_null(value: float) -> None:
    converted = sexp_to_json(Float(value))
    assert converted is None if not math.isfinite(value) else converted == value


@given(st.text())
def test_reader_never_fails_with_anything_but_a_lisp_error(src: str) -> None:
    position: int | None = 0
    try:
        read(src)
    except LispError as err:
        position = err.position
    assert position is not None
    assert 0 <= position <= len(src.encode("utf-8"))


def test_an_unquoted_symbol_starting_with_at_prints_so_it_reads_back_as_unquote() -> None:
    """``,@x`` is unquote-splice: the unquote of the symbol ``@x`` needs a space (found by the property test)."""
    datum = Quoted("unquote", Symbol("@"))
    assert to_source(datum) == ", @"
    assert read(to_source(datum)) == [datum]
    assert read(",@x") == [Quoted("unquote-splice", Symbol("x"))]
