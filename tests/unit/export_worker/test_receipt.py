"""export_worker/receipt.py: what the receipt's evidence says about the sink (docs/wire-format.md#export-receipts):
the bytes it took, a duplicate it reported, the key it was sent. Expected values are written out or hashed here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from blake3 import blake3

from export_worker.outcome import ExportOutcome
from export_worker.receipt import export_receipt
from shared.domain.api.codec import wire_decoder
from shared.domain.api.export import ExportSpec

SPEC = wire_decoder(ExportSpec).decode('{"source":{"runMarker":{}},"channel":{"stdout":{}}}')
EVENT = b'{"signal_type":"event","run_id":"ns/p","timestamp":"2026-05-19T12:00:01Z","labels":{},"payload":null}'
FIRST = EVENT.replace(b"12:00:01", b"12:00:00")
KEY = "tatara-export/u-1/3/0"


def receipt(outcome: ExportOutcome, key: str | None = None) -> tuple[dict[str, Any], str]:
    envelope = export_receipt(spec=SPEC, event_bytes=EVENT, outcome=outcome, previous_root=None, run_id="ns/p",
                              process_ref="ns/p", now=datetime(2026, 5, 19, 12, 0, 2, tzinfo=UTC),
                              idempotency_key=key)
    assert isinstance(envelope.evidence, dict)
    return envelope.evidence, envelope.artifact_hash


@pytest.mark.parametrize(("outcome", "length"), [
    (ExportOutcome.shipped(), len(EVENT)),
    (ExportOutcome.rejected("HTTP 500 Internal Server Error"), 0),
    (ExportOutcome.failed("NATS connect: nats: no servers available for connection"), 0),
    (ExportOutcome.failed("NATS ack: nats: timeout"), 0),
], ids=["shipped", "rejected", "failed to connect", "no acknowledgement"])
def test_shipped_bytes_len_counts_only_what_the_sink_took(outcome: ExportOutcome, length: int) -> None:
    evidence, artifact = receipt(outcome)
    assert evidence["shipped_bytes_len"] == length
    assert artifact == blake3(EVENT).hexdigest(), "the artifact pillar is still the event that was built"


def test_a_duplicate_says_so_and_attests_the_bytes_the_sink_kept() -> None:
    evidence, artifact = receipt(ExportOutcome.shipped(duplicate=True, stored=FIRST), KEY)
    assert evidence == {"duplicate": True, "idempotency_key": KEY, "outcome": "Shipped", "run_id": "ns/p",
                        "shipped_bytes_len": len(FIRST)}
    assert artifact == blake3(FIRST).hexdigest()


def test_a_duplicate_whose_message_cannot_be_read_back_attests_this_runs_bytes() -> None:
    evidence, artifact = receipt(ExportOutcome.shipped(duplicate=True), KEY)
    assert (evidence["duplicate"], evidence["shipped_bytes_len"]) == (True, len(EVENT))
    assert artifact == blake3(EVENT).hexdigest()


def test_without_a_key_or_a_duplicate_the_evidence_has_the_references_keys_only() -> None:
    evidence, _ = receipt(ExportOutcome.failed("x"))
    assert sorted(evidence) == ["error", "outcome", "run_id", "shipped_bytes_len"]
