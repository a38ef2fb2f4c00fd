"""The pure parts of what `tatara up` adds for exports: JetStream subjects, endpoint retargeting, Job and
receipt states on screen."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from tools.up_exports import (
    PortTaken,
    check_ports_free,
    has_exports,
    job_state,
    nats_streams,
    rbac_documents,
    receipt_outcome,
    retarget_exports,
    stream_subjects,
)


def process(*channels: dict[str, Any]) -> dict[str, Any]:
    exports = [{"source": {"runMarker": {}}, "channel": c} for c in channels]
    return {"kind": "Process", "metadata": {"name": "p"},
            "spec": {"lifetime": {"ephemeral": {"ttl": "1m", "exports": exports}}}}


@pytest.mark.parametrize(("subject", "captured"), [
    pytest.param("tatara.receipts.{{run_id}}", "tatara.receipts.>", id="a run-id subject captures everything past it"),
    pytest.param("tatara.events", "tatara.events", id="a fixed subject is captured as it is"),
])
def test_stream_subjects(subject: str, captured: str) -> None:
    assert stream_subjects(subject) == captured


def test_nats_streams_gathers_every_nats_export_by_stream() -> None:
    docs = [process({"natsSubject": {"subject": "a.{{run_id}}", "stream": "S"}}, {"stdout": {}}),
            process({"natsSubject": {"subject": "b", "stream": "S"}}),
            {"kind": "Process", "spec": {}}]
    assert nats_streams(docs) == {"S": {"a.>", "b"}}


def test_retarget_moves_only_the_default_local_endpoints() -> None:
    doc = process({"httpEvent": {"endpoint": "http://127.0.0.1:18090/events", "signalType": "t"}},
                  {"natsSubject": {"url": "nats://127.0.0.1:14222", "subject": "s", "stream": "S"}},
                  {"httpEvent": {"endpoint": "http://collector.example:8080", "signalType": "t"}},
                  {"natsSubject": {"subject": "s", "stream": "S"}})
    moved = retarget_exports(doc, "nats://127.0.0.1:5000", "http://127.0.0.1:6000")
    channels = [e["channel"] for e in moved["spec"]["lifetime"]["ephemeral"]["exports"]]
    assert channels == [{"httpEvent": {"endpoint": "http://127.0.0.1:6000/events", "signalType": "t"}},
                        {"natsSubject": {"url": "nats://127.0.0.1:5000", "subject": "s", "stream": "S"}},
                        {"httpEvent": {"endpoint": "http://collector.example:8080", "signalType": "t"}},
                        {"natsSubject": {"subject": "s", "stream": "S"}}]
    original = doc["spec"]["lifetime"]["ephemeral"]["exports"][0]["channel"]["httpEvent"]["endpoint"]
    assert original == "http://127.0.0.1:18090/events", "the input document is not changed"


@pytest.mark.parametrize(("status", "state"), [
    pytest.param({}, "Pending", id="not started"),
    pytest.param({"active": 1}, "Running", id="a run is active"),
    pytest.param({"conditions": [{"type": "Complete", "status": "True"}]}, "Complete", id="complete"),
    pytest.param({"conditions": [{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]},
                 "Failed", id="failed"),
])
def test_job_state(status: dict[str, Any], state: str) -> None:
    assert job_state(status) == state


@pytest.mark.parametrize(("data", "outcome"), [
    pytest.param({"receipt.yaml": "kind: tatara.export\nevidence:\n  outcome: Shipped\n"}, "Shipped", id="yaml"),
    pytest.param({"receipt.json": '{"evidence": {"outcome": "Rejected"}}'}, "Rejected", id="json"),
    pytest.param({"receipt.yaml": "kind: [unclosed"}, "?", id="unparsable"),
    pytest.param({}, "?", id="no receipt key"),
])
def test_receipt_outcome(data: dict[str, str], outcome: str) -> None:
    assert receipt_outcome({"data": data}) == outcome


@pytest.mark.parametrize(("doc", "expected"), [
    pytest.param(process({"stdout": {}}), True, id="an ephemeral Process with an export"),
    pytest.param({"spec": {"lifetime": {"ephemeral": {"ttl": "1m"}}}}, False, id="an ephemeral Process without"),
    pytest.param({"spec": {"lifetime": {"permanent": {}}}}, False, id="a permanent Process"),
])
def test_has_exports(doc: dict[str, Any], expected: bool) -> None:
    assert has_exports(doc) is expected


def test_rbac_documents_are_picked_subject_first_then_roles_then_bindings() -> None:
    rendered = [
        {"kind": "RoleBinding", "metadata": {"name": "b"}},
        {"kind": "Deployment", "metadata": {"name": "d"}},
        {"kind": "ClusterRole", "metadata": {"name": "r"}},
        {"kind": "ServiceAccount", "metadata": {"name": "s"}},
        None,
    ]
    assert [d["kind"] for d in rbac_documents(rendered)] == ["ServiceAccount", "ClusterRole", "RoleBinding"]


def test_a_taken_port_is_named_with_the_flag_that_moves_it() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with pytest.raises(PortTaken, match=rf"{taken} \(NATS, --nats-port\)"):
            check_ports_free({"NATS, --nats-port": taken})
    check_ports_free({"NATS, --nats-port": taken})  # free again once released
