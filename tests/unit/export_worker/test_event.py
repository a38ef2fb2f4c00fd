"""export_worker/event.py: run id, signal type, subject expansion and payload rules, case by case."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import pytest

from export_worker.event import build_event, expand_subject, parse_json_value, resolve_run_id, signal_type_of
from shared.domain.api.export import (
    ArtifactSource,
    ExportSpec,
    HttpEventChannel,
    NatsSubjectChannel,
    ReportFormat,
    RunMarkerSource,
    StdoutChannel,
    TestReportSource,
    VectorChannel,
)

NOW = datetime(2026, 5, 19, 12, tzinfo=UTC)
MARKER = ArtifactSource(run_marker=RunMarkerSource())


def spec(override: str | None) -> ExportSpec:
    return ExportSpec(source=MARKER, channel=VectorChannel(stdout=StdoutChannel()), experiment_id_override=override)


@pytest.mark.parametrize(("override", "want"), [(None, "ns/n"), ("", "ns/n"), ("exp-7", "exp-7")],
                         ids=["no override: namespace/name", "an empty override is ignored", "an override wins"])
def test_run_id(override: str | None, want: str) -> None:
    assert resolve_run_id(spec(override), "ns", "n") == want


@pytest.mark.parametrize(("channel", "want"), [
    (VectorChannel(http_event=HttpEventChannel(signal_type="deploy")), "deploy"),
    (VectorChannel(nats_subject=NatsSubjectChannel(subject="a.{{run_id}}.done", stream="S")), "done"),
    (VectorChannel(nats_subject=NatsSubjectChannel(subject="flat", stream="S")), "flat"),
    (VectorChannel(nats_subject=NatsSubjectChannel(subject="a.{{run_id}}", stream="S")), "{{run_id}}"),
    (VectorChannel(stdout=StdoutChannel()), "event"),
    (VectorChannel(), "event"),
    (VectorChannel(http_event=HttpEventChannel(signal_type="h"), nats_subject=NatsSubjectChannel(subject="x.y",
                                                                                                 stream="S")), "h"),
], ids=["http: its signalType", "nats: after the last dot", "nats without a dot: the whole subject",
        "nats: the unexpanded subject", "stdout: event", "no channel: event", "http comes before nats"])
def test_signal_type(channel: VectorChannel, want: str) -> None:
    assert signal_type_of(channel) == want


def test_every_run_id_placeholder_is_expanded() -> None:
    assert expand_subject("a.{{run_id}}.b.{{run_id}}", "r") == "a.r.b.r"


def report(fmt: ReportFormat) -> TestReportSource:
    return TestReportSource(configmap="cm", key="k", format=fmt)


@pytest.mark.parametrize(("fmt", "artifact", "payload"), [
    (ReportFormat.RAW, b"\x00\xffbin", {"raw_b64": base64.b64encode(b"\x00\xffbin").decode()}),
    (ReportFormat.TAP_V13, b"ok 1", {"raw_b64": "b2sgMQ=="}),
    (ReportFormat.JUNIT, b"", {"raw_b64": ""}),
    (ReportFormat.ND_JSON, b'1\n"s"\n\n[]\nNaN\n{"a":-0}\n', {"ndjson": [1, "s", [], {"a": -0.0}]}),
    (ReportFormat.ND_JSON, b"\xff\n2", {"ndjson": [2]}),
], ids=["raw bytes are base64 with padding", "TAP is opaque", "an empty report is an empty string",
        "NdJson keeps the lines that parse (NaN does not)", "a line that is not UTF-8 is skipped"])
def test_test_report_payload(fmt: ReportFormat, artifact: bytes, payload: Any) -> None:
    event = build_event(report(fmt), artifact, run_id="r", signal_type="s", now=NOW)
    assert event.payload == payload
    assert event.format is fmt
    assert event.labels == {"run_id": "r", "configmap": "cm", "key": "k"}


def test_big_integers_and_floats_read_as_serde_json_reads_them() -> None:
    assert parse_json_value(b"18446744073709551615") == 2**64 - 1
    assert parse_json_value(b"18446744073709551616") == 1.8446744073709552e19
    with pytest.raises(ValueError, match="Infinity"):
        parse_json_value(b"Infinity")
    with pytest.raises(ValueError, match="Extra data"):
        parse_json_value(b"1 2")
