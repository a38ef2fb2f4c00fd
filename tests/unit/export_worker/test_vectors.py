"""The export event and receipt bytes against hand-derived vectors (tests/fixtures/export_worker/vectors.json).

Expected hashes are computed here from the vector's own strings with BLAKE3 and the attestation-root formula
(docs/wire-format.md#attestation-root), never from the code under test."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3

from export_worker.event import build_event, expand_subject, resolve_run_id, signal_type_of
from export_worker.outcome import ExportOutcome
from export_worker.receipt import export_receipt, intent_hash, receipt_yaml
from shared.domain.api.codec import wire_decoder
from shared.domain.api.export import ExportSpec
from shared.domain.api.receipt import parse_either

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "export_worker" / "vectors.json")
                     .read_text())["vectors"]


def hexdigest(text: str | bytes) -> str:
    return str(blake3(text.encode() if isinstance(text, str) else text).hexdigest())


def root(artifact: str, control: str, intent: str, previous: str | None) -> str:
    return hexdigest(f"tatara-process/v1alpha1\n{artifact}\n{control}\n{intent}\n{previous or ''}")


def outcome_of(wire: Any) -> ExportOutcome:
    if wire == "shipped":
        return ExportOutcome.shipped()
    ((kind, message),) = wire.items()
    return ExportOutcome.rejected(message) if kind == "rejected" else ExportOutcome.failed(message)


def now_of(vector: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(vector["now"].replace("Z", "+00:00"))


def event_of(vector: dict[str, Any], spec: ExportSpec) -> bytes:
    run_id = resolve_run_id(spec, vector["namespace"], vector["name"])
    event = build_event(spec.source.variant(), vector["artifact"].encode(), run_id=run_id,
                        signal_type=signal_type_of(spec.channel), now=now_of(vector))
    return event.compact()


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_event_bytes_run_id_and_signal_type_are_the_derived_ones(vector: dict[str, Any]) -> None:
    spec = wire_decoder(ExportSpec).decode(vector["spec"])
    expect = vector["expect"]
    assert resolve_run_id(spec, vector["namespace"], vector["name"]) == expect["run_id"]
    assert signal_type_of(spec.channel) == expect["signal_type"]
    if "subject" in expect:
        assert spec.channel.nats_subject is not None
        assert expand_subject(spec.channel.nats_subject.subject, expect["run_id"]) == expect["subject"]
    assert event_of(vector, spec).decode() == expect["event"]
    if "event_pretty" in expect:
        event = build_event(spec.source.variant(), vector["artifact"].encode(), run_id=expect["run_id"],
                            signal_type=expect["signal_type"], now=now_of(vector))
        assert event.pretty().decode() == expect["event_pretty"]
        assert json.loads(expect["event_pretty"]) == json.loads(expect["event"]), "the vector agrees with itself"


@pytest.mark.parametrize("vector", VECTORS, ids=[v["id"] for v in VECTORS])
def test_receipt_yaml_is_the_derived_text_and_its_root_verifies(vector: dict[str, Any]) -> None:
    spec = wire_decoder(ExportSpec).decode(vector["spec"])
    expect = vector["expect"]
    pillars = {"intent_hash": hexdigest(expect["intent_json"]), "artifact_hash": hexdigest(expect["event"]),
               "control_hash": hexdigest(expect["control_json"])}
    pillars["composed_root"] = root(pillars["artifact_hash"], pillars["control_hash"], pillars["intent_hash"],
                                    vector["previous_root"])
    # shipped_bytes_len counts what the sink took: the event when shipped, nothing otherwise
    # (docs/divergences.md#export-shipped-bytes)
    shipped = len(expect["event"].encode()) if vector["outcome"] == "shipped" else 0
    want = expect["receipt_yaml"].format(shipped_bytes_len=shipped, **pillars)
    assert intent_hash(spec) == pillars["intent_hash"]
    envelope = export_receipt(spec=spec, event_bytes=event_of(vector, spec), outcome=outcome_of(vector["outcome"]),
                              previous_root=vector["previous_root"], run_id=expect["run_id"],
                              process_ref=f"{vector['namespace']}/{vector['name']}", now=now_of(vector),
                              skipped_receipts=vector["skipped_receipts"])
    assert receipt_yaml(envelope) == want
    read_back = parse_either(want)
    assert read_back.kind == "tatara.export"
    assert read_back.verify_root(vector["previous_root"])
