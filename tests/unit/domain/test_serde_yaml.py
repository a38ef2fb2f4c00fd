"""shared/domain/serde_yaml.py: YAML text as serde_yaml 0.9 writes it (docs/wire-format.md#receipt-yaml).

Expected texts follow serde_yaml's rules (a string that would read back as null, a bool, an integer or a
float is single-quoted; a string with a line break is a literal block; libyaml decides the rest) and
libyaml's block layout, written out by hand."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from shared.domain import serde_yaml
from shared.domain.serde_yaml import to_yaml

SCALARS = [
    ("a plain word stays plain", "tatara.export", "tatara.export"),
    ("a slash and a colon without a space stay plain", "2026-05-19T12:00:00Z", "2026-05-19T12:00:00Z"),
    ("YAML 1.1 booleans are plain (serde_yaml reads YAML 1.2 core)", "yes", "yes"),
    ("true is quoted", "true", "'true'"),
    ("False is quoted", "False", "'False'"),
    ("null is quoted", "null", "'null'"),
    ("a tilde is quoted", "~", "'~'"),
    ("the empty string is quoted", "", "''"),
    ("a decimal integer is quoted", "123", "'123'"),
    ("a signed integer is quoted", "-7", "'-7'"),
    ("a hex integer is quoted", "0x1F", "'0x1F'"),
    ("digits with a leading zero are quoted", "0123", "'0123'"),
    ("a float is quoted", "1.5", "'1.5'"),
    ("an exponent float is quoted", "1e5", "'1e5'"),
    ("a float word is quoted", ".inf", "'.inf'"),
    ("inf in Rust's grammar is not finite, so plain", "inf", "inf"),
    ("a float too large to be finite is plain", "1e400", "1e400"),
    ("a digit string with a letter is plain", "12ab", "12ab"),
    ("colon-space forces single quotes", "HTTP error: refused", "'HTTP error: refused'"),
    ("a quote inside single quotes is doubled", "it's: bad", "'it''s: bad'"),
    ("a leading dash-space is quoted", "- x", "'- x'"),
    ("a leading space is quoted", " x", "' x'"),
    ("a space before a hash is quoted", "a #b", "'a #b'"),
    ("a tab forces double quotes", "a\tb", '"a\\tb"'),
    ("non-ASCII text stays plain (unicode output)", "ünï", "ünï"),
    ("a long string is not folded", "x" * 100 + " y" * 60, "x" * 100 + " y" * 60),
]


@pytest.mark.parametrize(("text", "want"), [(t, w) for _, t, w in SCALARS], ids=[i for i, _, _ in SCALARS])
def test_a_string_value_is_written_as_serde_yaml_writes_it(text: str, want: str) -> None:
    assert to_yaml({"k": text}) == f"k: {want}\n"


BLOCKS: list[tuple[str, Any, str]] = [
    ("a string with a line break is a literal block, stripped", {"k": "a\nb"}, "k: |-\n  a\n  b\n"),
    ("one trailing line break is clipped", {"k": "a\n"}, "k: |\n  a\n"),
    ("two trailing line breaks are kept, and end the document with ...", {"k": "a\n\n"}, "k: |+\n  a\n\n...\n"),
    ("nested maps indent by two, keys in the given order", {"b": {"z": 1, "a": None}, "a": True},
     "b:\n  z: 1\n  a: null\na: true\n"),
    ("a sequence sits at its key's indent", {"l": [1, "x", {"k": "v"}]}, "l:\n- 1\n- x\n- k: v\n"),
    ("empty collections are flow", {"m": {}, "l": []}, "m: {}\nl: []\n"),
    ("floats as ryu writes them", {"a": 1.0, "b": 1e21, "c": 1e-7, "d": 0.5}, "a: 1.0\nb: 1e21\nc: 1e-7\nd: 0.5\n"),
    ("non-finite floats", {"a": float("inf"), "b": float("-inf")}, "a: .inf\nb: -.inf\n"),
]


@pytest.mark.parametrize(("value", "want"), [(v, w) for _, v, w in BLOCKS], ids=[i for i, _, _ in BLOCKS])
def test_collections_and_numbers_are_laid_out_as_libyaml_does(value: Any, want: str) -> None:
    assert to_yaml(value) == want


@pytest.mark.parametrize("text", [t for _, t, _ in SCALARS] + ["a\nb", "a\n", "a\n\n"])
def test_every_string_reads_back_as_the_same_text(text: str) -> None:
    assert yaml.load(to_yaml({"k": text}), Loader=yaml.BaseLoader) == {"k": text}


def test_the_pure_python_emitter_writes_the_same_text(monkeypatch: pytest.MonkeyPatch) -> None:
    value = {"k": "HTTP error: x", "n": "0123", "l": [1, {}], "long": "y " * 80, "ml": "a\nb\n", "z": "a\n\n"}
    with_libyaml = to_yaml(value)
    monkeypatch.delattr(serde_yaml.yaml, "CDumper", raising=False)
    assert to_yaml(value) == with_libyaml


def test_anything_but_plain_data_is_refused() -> None:
    with pytest.raises(TypeError, match="not YAML data"):
        to_yaml({"k": object()})
