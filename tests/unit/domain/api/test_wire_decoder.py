"""The decoder's number path and accept/reject decisions (docs/wire-format.md#numbers)."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest

from shared.domain.api.codec import MAX_NESTING, DecodeError, decode, decode_process, format_timestamp, wire_decoder
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import ProcessAttestation, ProcessSpec

HEAD = '{"classification":{"pointType":"Gate","substrate":"Compute"'


def overlay_spec(overlay: str, classification: str = "") -> str:
    return (HEAD + classification + '},"intent":{"aplicacao":{"chartRef":"c","version":"1","valuesOverlay":'
            + overlay + "}}}")


def overlay(text: str) -> Any:
    spec = decode(overlay_spec(text), ProcessSpec)
    assert spec.intent.aplicacao is not None
    return spec.intent.aplicacao.values_overlay


@pytest.mark.parametrize(("text", "expected"), [
    ('{"a":2e-24}', 2.0000000000000002e-24),
    ('{"a":909.4290778244613}', 909.4290778244612),
    ('{"a":[1.0,9007199254740993.0]}', [1.0, 9007199254740994.0]),
    ('{"a":18446744073709551616}', 1.8446744073709552e19),
    ('{"a":18446744073709551615}', 18446744073709551615),
    ('{"a":{"b":-9223372036854775809}}', {"b": -9.223372036854776e18}),
    ('{"a":1}', 1),
])
def test_free_json_numbers_are_read_as_serde_json_reads_them(text: str, expected: Any) -> None:
    assert overlay(text) == {"a": expected}


def test_minus_zero_is_a_float_in_free_json() -> None:
    value = overlay('{"a":-0,"b":[ -0 ],"c":-0.0}')
    assert [math.copysign(1.0, v) for v in (value["a"], value["b"][0], value["c"])] == [-1.0, -1.0, -1.0]
    assert all(isinstance(v, float) for v in (value["a"], value["b"][0]))


def test_number_like_text_inside_strings_is_left_alone() -> None:
    text = '{"s":"x:-0,[-0]","t":"18446744073709551616","u":"a\\":-0,"}'
    assert overlay(text) == {"s": "x:-0,[-0]", "t": "18446744073709551616", "u": 'a":-0,'}


@pytest.mark.parametrize(("field", "literal"), [
    ('"signals":{"sigtermGraceSeconds":%s}', "-0"),
    ('"signals":{"sigtermGraceSeconds":%s}', "3e1"),
    ('"signals":{"sigtermGraceSeconds":%s}', "4294967296"),
    ('"routing":{"backend":{"service":"s","port":1},"priority":%s}', "-0"),
])
def test_integer_fields_refuse_what_the_reference_reads_as_floats(field: str, literal: str) -> None:
    spec = HEAD + '},"intent":{"nix":{"flakeRef":"a","attribute":"b"}},' + field.replace("%s", literal) + "}"
    with pytest.raises(DecodeError):
        decode(spec, ProcessSpec)


@pytest.mark.parametrize(("literal", "expected"), [
    ("909.4290778244613", 909.4290778244612), ("1", 1.0), ("9007199254740993", 9007199254740992.0), ("-0", -0.0),
])
def test_the_typed_f64_is_read_as_serde_json_reads_it(literal: str, expected: float) -> None:
    horizon = ',"horizon":{"kind":"Asymptotic","healthyRateThreshold":' + literal + "}"
    spec = decode(overlay_spec("null", horizon), ProcessSpec)
    threshold = spec.classification.horizon.healthy_rate_threshold
    assert threshold == expected
    assert isinstance(threshold, float)
    assert math.copysign(1.0, threshold) == math.copysign(1.0, expected)


def test_the_typed_f64_in_a_pool_template_and_a_process() -> None:
    horizon = '"horizon":{"kind":"Asymptotic","healthyRateThreshold":2e-24}'
    pool = ('{"metadata":{"name":"p"},"spec":{"desiredSize":1,"template":{"aplicacao":{"chartRef":"c","version":"1"},'
            '"classification":{"pointType":"Gate","substrate":"Compute",' + horizon + "}}}}")
    template = decode(pool, EphemeralPool).spec.template
    assert template.classification is not None
    assert template.classification.horizon.healthy_rate_threshold == 2.0000000000000002e-24
    process = '{"metadata":{"name":"p"},"spec":' + overlay_spec("null", "," + horizon) + "}"
    assert decode_process(process).spec.classification.horizon.healthy_rate_threshold == 2.0000000000000002e-24


def test_a_float_serde_json_cannot_hold_is_refused() -> None:
    with pytest.raises(DecodeError, match="number out of range"):
        overlay('{"a":1.7976931348623158e308}')
    assert overlay('{"a":1.7976931348623157e+308}') == {"a": 1.7976931348623157e308}  # what the API server sends


def nested(levels: int) -> str:
    """A spec nesting ``levels`` containers: spec, intent, aplicacao, valuesOverlay, then arrays."""
    return overlay_spec('{"d":' + "[" * (levels - 4) + "]" * (levels - 4) + "}")


def test_nesting_stops_at_the_reference_limit() -> None:
    decode(nested(MAX_NESTING), ProcessSpec)
    with pytest.raises(DecodeError, match="nesting deeper than 127"):
        decode(nested(MAX_NESTING + 1), ProcessSpec)
    with pytest.raises(DecodeError, match="nesting"):
        decode(nested(5000), ProcessSpec)  # msgspec alone would raise RecursionError here


def test_brackets_inside_strings_do_not_count() -> None:
    decode(overlay_spec('{"s":"' + "[" * 500 + '"}'), ProcessSpec)


def test_a_duplicate_struct_key_keeps_the_last() -> None:
    spec = decode('{"classification":{"pointType":"Gate","pointType":"Fork","substrate":"Compute"},'
                  '"intent":{"nix":{"flakeRef":"a","attribute":"b"}}}', ProcessSpec)
    assert spec.classification.point_type.value == "Fork"


@pytest.mark.parametrize("value", ["5", '"s"', "[]", "true"])
def test_free_json_must_be_an_object(value: str) -> None:
    with pytest.raises(DecodeError):
        overlay(value)


@pytest.mark.parametrize(("written", "read"), [
    ("2026-05-19T10:11:12.123456789Z", "2026-05-19T10:11:12.123457Z"),
    ("2026-05-19T10:11:12.100000Z", "2026-05-19T10:11:12.100Z"),
    ("2026-05-19T12:11:12+02:00", "2026-05-19T10:11:12Z"),
    ("2026-05-19t10:11:12z", "2026-05-19T10:11:12Z"),
])
def test_timestamps_are_held_to_the_microsecond(written: str, read: str) -> None:
    doc = '{"artifactHash":"a","intentHash":"i","composedRoot":"x","generation":0,"attestedAt":"' + written + '"}'
    assert format_timestamp(decode(doc, ProcessAttestation).attested_at) == read


def test_the_wire_decoder_raises_what_msgspec_raises() -> None:
    with pytest.raises(msgspec.ValidationError):
        wire_decoder(ProcessSpec).decode(overlay_spec("5"))
    with pytest.raises(msgspec.ValidationError):
        wire_decoder(ProcessSpec).decode(nested(200))
