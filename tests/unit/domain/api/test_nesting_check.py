"""The decoder's quick nesting check (docs/wire-format.md#numbers: serde_json's recursion limit).

``_too_deep_if_valid`` must agree, on valid JSON, with the depth a JSON parser sees; on anything else the
decoder must still raise what the exact scan raised before (the nesting error first).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from shared.domain.api.codec import MAX_NESTING, DecodeError, _too_deep_if_valid, decode, wire_decoder
from shared.domain.api.process import ProcessSpec


def depth(value: Any) -> int:
    """Arrays/objects nested in a parsed document, counted from its root (independent of the codec)."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def arrays(levels: int, inner: str = "") -> str:
    return "[" * levels + inner + "]" * levels


def objects(levels: int) -> str:
    return '{"k":' * levels + "1" + "}" * levels if levels else "1"


WIDE = "[" + ",".join(["{}"] * 300) + "]"  # 301 brackets, two deep
MANAGED = json.dumps({"f:status": {f'k:{{"type":"C{i}"}}': {".": {}, "f:status": {}} for i in range(80)}})

VALID = {
    "127 arrays": arrays(MAX_NESTING),
    "128 arrays": arrays(MAX_NESTING + 1),
    "127 objects": objects(MAX_NESTING),
    "128 objects": objects(MAX_NESTING + 1),
    "arrays and objects alternating, 128": '[{"a":' * 64 + "1" + "}]" * 64,
    "wide and shallow": WIDE,
    "managedFields-like keys with escaped braces": MANAGED,
    "openers in a string beside 100 levels": arrays(100, '"' + "[" * 200 + '"'),
    "closers in a string inside 128 levels": arrays(MAX_NESTING + 1, '"' + "]}" * 200 + '"'),
    "escaped quote, then brackets still inside the string": arrays(120, '"\\"' + "[" * 50 + '"') + "",
    "escaped backslash ends the string, then real levels": '["\\\\",' + arrays(MAX_NESTING) + "]",
    "three backslashes and a quote stay inside": arrays(100, '"\\\\\\"' + "[" * 50 + '"'),
    "a unicode escape of a bracket is not a bracket": arrays(100, '"' + "\\u005b" * 50 + '"'),
    "strings with and without brackets alternating": "[" + ",".join(['"["', '""', '"x"', '"]"'] * 60)
                                                     + "," + arrays(MAX_NESTING) + "]",
    "many empty strings and 128 levels": "[" + ",".join(['""'] * 200) + "," + arrays(MAX_NESTING) + "]",
}


@pytest.mark.parametrize("name", VALID)
def test_the_quick_check_is_exact_on_valid_json(name: str) -> None:
    text = VALID[name]
    expected = depth(json.loads(text)) > MAX_NESTING
    assert _too_deep_if_valid(text.encode()) is expected


def overlay_spec(overlay: str) -> str:
    return ('{"classification":{"pointType":"Gate","substrate":"Compute"},"intent":{"aplicacao":'
            '{"chartRef":"c","version":"1","valuesOverlay":' + overlay + "}}}")


@pytest.mark.parametrize(("overlay", "deep"), [
    ('{"d":' + arrays(MAX_NESTING - 4) + "}", False),  # spec, intent, aplicacao, valuesOverlay: 4 levels above
    ('{"d":' + arrays(MAX_NESTING - 3) + "}", True),
    ('{"s":"\\"' + "[" * 300 + '","d":' + arrays(MAX_NESTING - 4) + "}", False),
    ('{"s":"\\\\","d":' + arrays(MAX_NESTING - 3) + "}", True),
])
def test_valid_specs_decode_or_raise_the_nesting_error(overlay: str, deep: bool) -> None:
    text = overlay_spec(overlay)
    assert (depth(json.loads(text)) > MAX_NESTING) is deep
    if deep:
        with pytest.raises(DecodeError, match=f"nesting deeper than {MAX_NESTING}"):
            decode(text, ProcessSpec)
    else:
        assert decode(text, ProcessSpec).intent.aplicacao is not None


@pytest.mark.parametrize("text", [
    "[" * 200,  # never closed
    '{"a":"' + "[" * 200,  # an unterminated string: the exact scan skips the quote and counts the brackets
    '{"classification":5,"x":"' + "[" * 200,  # a type error before the malformed rest
    '{"classification":{"pointType":"Nope"},"x":"\\' + "[" * 200,  # a bad value, then a dangling escape
])
def test_malformed_deep_documents_still_raise_the_nesting_error_first(text: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=f"nesting deeper than {MAX_NESTING}"):
        wire_decoder(ProcessSpec).decode(text)


@pytest.mark.parametrize(("text", "error"), [
    ('{"classification":5}', msgspec.ValidationError),
    ('{"classification":{"pointType":"Gate"' + "[" * 100, msgspec.DecodeError),
    ('{"a":"' + "[" * 100, msgspec.DecodeError),
])
def test_malformed_shallow_documents_raise_what_msgspec_raises(text: str, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        wire_decoder(ProcessSpec).decode(text)
    assert "nesting" not in str(caught.value)
