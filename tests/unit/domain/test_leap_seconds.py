"""RFC 3339 leap seconds read and written as the reference does (docs/wire-format.md#timestamps).

The attestation vectors (tests/fixtures/timestamps/leap-seconds.json) are derived by hand from chrono's rules
in the format of the golden attestation_json section and run through the same round trip; the receipt cases
check that a leap second a Job writes is accepted from JSON and from YAML and is hashed, in the receipts
export's artifact, with the bytes the reference writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from export_worker.sources import ConfigMap, collect_receipts
from shared.domain.api.codec import DecodeError, decode, format_timestamp, to_wire
from shared.domain.api.process import ProcessAttestation
from shared.domain.api.receipt import parse_either, parse_json, parse_yaml
from shared.kube.meta import ObjectMeta
from tests.unit.domain.test_rust_vectors import check_attestation_json

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "timestamps" / "leap-seconds.json")
                     .read_text())["attestation_json"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_attestation_json(vector: dict[str, Any]) -> None:
    check_attestation_json(vector)


RECEIPT_JSON = ('{"version":"tatara-receipt/v1","kind":"test-suite","composed_root":"r","intent_hash":"i",'
                '"artifact_hash":"a","control_hash":"","generated_at":"2016-12-31T23:59:60Z",'
                '"evidence":{"note":"2016-12-31T23:59:60Z","ran":1.0}}')
RECEIPT_YAML = ("version: tatara-receipt/v1\nkind: test-suite\ncomposed_root: r\nintent_hash: i\nartifact_hash: a\n"
                "control_hash: ''\ngenerated_at: 2016-12-31T23:59:60Z\nevidence:\n  note: 2016-12-31T23:59:60Z\n"
                "  ran: 1.0\n")


@pytest.mark.parametrize(("parse", "text"), [
    (parse_json, RECEIPT_JSON), (parse_yaml, RECEIPT_YAML), (parse_either, RECEIPT_JSON), (parse_either, RECEIPT_YAML),
], ids=["JSON", "YAML", "either, JSON text", "either, YAML text"])
def test_a_receipt_generated_in_a_leap_second_parses_and_writes_back_as_written(parse: Any, text: str) -> None:
    envelope = parse(text)
    wire = to_wire(envelope)
    assert wire["generated_at"] == "2016-12-31T23:59:60Z"
    assert wire["evidence"] == {"note": "2016-12-31T23:59:60Z", "ran": 1.0}, "free text is left as written"


def test_the_receipts_export_hashes_a_leap_second_as_the_reference_writes_it() -> None:
    cm = ConfigMap(metadata=ObjectMeta(name="job-receipt", annotations={"tatara.pleme.io/process": "ns/p"}),
                   data={"receipt.json": RECEIPT_JSON})
    artifact = collect_receipts([cm], "ns/p").artifact()
    assert artifact.data == (b'[{"version":"tatara-receipt/v1","kind":"test-suite","composed_root":"r",'
                             b'"intent_hash":"i","artifact_hash":"a","control_hash":"",'
                             b'"generated_at":"2016-12-31T23:59:60Z","evidence":{"note":"2016-12-31T23:59:60Z",'
                             b'"ran":1.0}}]')


def test_as_an_instant_a_leap_second_is_second_59_and_arithmetic_leaves_it() -> None:
    leap = parse_json(RECEIPT_JSON).generated_at
    plain = datetime(2016, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert leap == plain
    assert hash(leap) == hash(plain)
    assert plain - timedelta(seconds=1) < leap < plain + timedelta(seconds=1)
    assert format_timestamp(leap + timedelta(minutes=1)) == "2017-01-01T00:00:59Z", "no longer a leap second"
    assert format_timestamp(plain) == "2016-12-31T23:59:59Z"


@pytest.mark.parametrize("text", ["2016-12-31T23:59:61Z", "2016-12-31T23:60:00Z", "2016-12-31T24:00:60Z"],
                         ids=["second 61", "minute 60", "hour 24"])
def test_only_second_60_is_a_leap_second(text: str) -> None:
    with pytest.raises(DecodeError):
        decode(json.dumps({"artifactHash": "a", "intentHash": "i", "composedRoot": "x", "generation": 0,
                           "attestedAt": text}), ProcessAttestation)
