"""reconciler.exports: the export Job manifest field by field, which exports fire at a gate, and
where each export stands (docs/behaviour.md#releasing, docs/wire-format.md#export-jobs).

Expected values are the spec's (lifetime-pool-allocation §5.6, process-reconciler §10.5), written out
by hand: the ``--spec`` argument is the export's JSON in declaration order, typed defaults included.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from reconciler.children import ChildRef, ChildState
from reconciler.exports import (
    ExportJobConfig,
    ExportState,
    applicable,
    export_job,
    export_job_name,
    export_runs,
    gate_of,
    latest_warning,
    receipt_config_map_name,
    receipt_refs,
    without_pod,
)
from reconciler.render import RenderError
from shared.domain.api.codec import convert
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.api.process import Process
from shared.domain.manifests.batch import JobCondition, JobStatus, JobWaiting, ObservedJob
from shared.kube.meta import ObjectMeta, as_json

CREATED = datetime(2025, 6, 1, 11, 0, tzinfo=UTC)
MARKER: dict[str, Any] = {"source": {"runMarker": {}}, "channel": {"stdout": {}}}
REPORT_HTTP = {"source": {"testReport": {"configmap": "results", "key": "junit.xml", "format": "Junit"}},
               "channel": {"httpEvent": {"endpoint": "http://127.0.0.1:9/ingest", "signalType": "test.report"}},
               "when": "Always"}
ON_FAILED = {"source": {"receipts": {}}, "channel": {"natsSubject": {"subject": "runs.{{run_id}}", "stream": "RUNS"}},
             "when": "OnFailed", "experimentIdOverride": "pr-7"}


def process(exports: list[dict[str, Any]], *, phase: str = "Releasing", gate: str | None = "Attested",
            attestation: bool = True, uid: str = "u-1") -> Process:
    status: dict[str, Any] = {"phase": phase}
    if attestation:
        status["attestation"] = {"artifactHash": "a" * 64, "intentHash": "i" * 64, "composedRoot": "r" * 64,
                                 "generation": 0, "attestedAt": "2025-06-01T11:30:00Z"}
    return convert({
        "metadata": {"name": "pr-7", "namespace": "previews", "uid": uid, "generation": 3,
                     "creationTimestamp": "2025-06-01T11:00:00Z",
                     "annotations": {"tatara.pleme.io/released-from": gate} if gate else {}},
        "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"},
                 "intent": {"flux": {"gitRepository": "repo", "path": "./app"}},
                 "lifetime": {"ephemeral": {"exports": exports}}},
        "status": status,
    }, Process)


def job(index: int, *conditions: tuple[str, str]) -> ObservedJob:
    return ObservedJob(metadata=ObjectMeta(name=f"pr-7-export-{index}", namespace="previews",
                                           labels={"tatara.pleme.io/export-index": str(index)}),
                       status=JobStatus(conditions=[JobCondition(type=t, status=s) for t, s in conditions]))


def receipt(index: int, outcome: str, error: str | None = None, generated: str = "2025-06-01T12:00:00Z",
            key: str = "receipt.yaml") -> dict[ChildRef, ChildState]:
    evidence: dict[str, Any] = {"outcome": outcome, "run_id": "previews/pr-7", "shipped_bytes_len": 10}
    if error is not None:
        evidence["error"] = error
    body = json.dumps({"version": "tatara-receipt/v1", "kind": "tatara.export", "composed_root": "c" * 64,
                       "intent_hash": "i" * 64, "artifact_hash": "a" * 64, "control_hash": "k" * 64,
                       "generated_at": generated, "process_ref": "previews/pr-7", "evidence": evidence})
    ref = ChildRef("v1", "ConfigMap", "previews", f"pr-7-export-{index}-receipt")
    return {ref: ChildState(ref=ref, ready=None, object={"data": {key: body}})}


# ── the Job ─────────────────────────────────────────────────────────────────────


def test_the_export_job_has_every_field_the_spec_lists() -> None:
    p = process([MARKER, REPORT_HTTP])
    (index, export), = [e for e in applicable(p, P.ATTESTED) if e[0] == 1]
    manifest = as_json(export_job(p, index, export, owner_uid="u-1",
                                  config=ExportJobConfig(image="registry.local/worker:1", service_account="exporter")))
    labels = {"tatara.pleme.io/process": "previews.pr-7", "tatara.pleme.io/role": "export",
              "tatara.pleme.io/export-index": "1"}
    assert manifest["apiVersion"] == "batch/v1"
    assert manifest["kind"] == "Job"
    meta = manifest["metadata"]
    assert (meta["name"], meta["namespace"]) == ("pr-7-export-1", "previews")
    assert meta["labels"] == {"tatara.pleme.io/managed-by": "tatara-reconciler", **labels}
    assert meta["ownerReferences"] == [{"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process", "name": "pr-7",
                                        "uid": "u-1", "controller": True, "blockOwnerDeletion": True}]
    assert meta["annotations"]["tatara.pleme.io/managed-by"] == "tatara-reconciler"
    assert meta["annotations"]["tatara.pleme.io/process"] == "previews/pr-7"
    assert meta["annotations"]["tatara.pleme.io/attestation-root"] == "r" * 64
    spec = manifest["spec"]
    assert (spec["backoffLimit"], spec["ttlSecondsAfterFinished"]) == (1, 3600)
    assert spec["template"]["metadata"] == {"labels": labels}
    pod = spec["template"]["spec"]
    assert (pod["restartPolicy"], pod["serviceAccountName"]) == ("Never", "exporter")
    # docs/divergences.md#export-pod-security: the Pod Security Standards' restricted profile, read-only root
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
    assert container["name"] == "worker"
    assert container["image"] == "registry.local/worker:1"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["resources"] == {"requests": {"cpu": "10m", "memory": "32Mi"},
                                      "limits": {"cpu": "200m", "memory": "128Mi"}}
    assert container["command"] == ["tatara-export-worker"]  # our one image's default is the reconciler
    assert "env" not in container
    assert container["args"] == [
        "--spec",
        '{"source":{"testReport":{"configmap":"results","key":"junit.xml","format":"Junit"}},'
        '"channel":{"httpEvent":{"endpoint":"http://127.0.0.1:9/ingest","signalType":"test.report"}},'
        '"when":"Always"}',
        "--process-namespace", "previews",
        "--process-name", "pr-7",
        "--receipt-configmap", "pr-7-export-1-receipt",
        "--previous-root", "r" * 64,
        "--idempotency-key", "tatara-export/u-1/3/1",  # docs/wire-format.md#export-idempotency-keys
    ]


def test_without_an_attestation_there_is_no_previous_root_and_defaults_are_spelled_out() -> None:
    p = process([ON_FAILED], gate="Failed", attestation=False)
    ((index, export),) = applicable(p, P.FAILED)
    args = as_json(export_job(p, index, export, owner_uid="u-1", config=ExportJobConfig()))["spec"]["template"][
        "spec"]["containers"][0]["args"]
    assert args == [
        "--spec",
        '{"source":{"receipts":{}},"channel":{"natsSubject":{"subject":"runs.{{run_id}}","stream":"RUNS"}},'
        '"when":"OnFailed","experimentIdOverride":"pr-7"}',
        "--process-namespace", "previews", "--process-name", "pr-7", "--receipt-configmap", "pr-7-export-0-receipt",
        "--idempotency-key", "tatara-export/u-1/3/0",
    ]


def test_an_export_job_needs_the_process_uid() -> None:
    p = process([MARKER], uid="")
    with pytest.raises(RenderError):
        export_job(p, 0, applicable(p, P.ATTESTED)[0][1], owner_uid="", config=ExportJobConfig())


# ── which exports fire ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(("annotation", "gate", "indices"), [
    ("Attested", P.ATTESTED, [0, 1]),
    ("Failed", P.FAILED, [1, 2]),
    (None, P.ATTESTED, [0, 1]),
    ("attested", P.ATTESTED, [0, 1]),
], ids=[
    "released from Attested runs OnAttested and Always exports",
    "released from Failed runs Always and OnFailed exports, indexed in the full list",
    "a missing released-from reads as Attested",
    "an unknown released-from reads as Attested",
])
def test_which_exports_fire_on_the_gate(annotation: str | None, gate: P, indices: list[int]) -> None:
    p = process([MARKER, REPORT_HTTP, ON_FAILED], gate=annotation)
    assert gate_of(p) is gate
    assert [i for i, _ in applicable(p, gate_of(p))] == indices


# ── where each export stands ───────────────────────────────────────────────────

BAD_CHANNEL: dict[str, Any] = {"source": {"runMarker": {}}, "channel": {"stdout": {}, "httpEvent": {"signalType": "x"}}}
NO_SOURCE: dict[str, Any] = {"source": {}, "channel": {"stdout": {}}}


@pytest.mark.parametrize(("jobs", "receipts", "started", "expected"), [
    ({}, {}, False, [(ExportState.START, "", False)]),
    ({0: job(0)}, {}, True, [(ExportState.RUNNING, "", False)]),
    ({0: job(0, ("FailureTarget", "True"))}, {}, True, [(ExportState.RUNNING, "", False)]),
    ({0: job(0, ("SuccessCriteriaMet", "True"), ("Complete", "True"))}, {}, True,
     [(ExportState.SUCCEEDED, "", False)]),
    ({0: job(0, ("FailureTarget", "True"), ("Failed", "True"))}, {}, True, [(ExportState.FAILED, "", False)]),
    ({0: job(0, ("FailureTarget", "True"), ("Failed", "True"))}, receipt(0, "Rejected", "HTTP 503"), True,
     [(ExportState.FAILED, "HTTP 503", False)]),
    ({}, {}, True, [(ExportState.START, "", True)]),
    ({}, receipt(0, "Shipped"), True, [(ExportState.SUCCEEDED, "", False)]),
    ({}, receipt(0, "Failed", "NATS connect: refused", key="receipt.json"), True,
     [(ExportState.FAILED, "NATS connect: refused", False)]),
    ({}, receipt(0, "Shipped", generated="2025-06-01T10:00:00Z"), True, [(ExportState.START, "", True)]),
], ids=[
    "no Job on the first pass: start it",
    "a Job without a finished condition is running",
    "FailureTarget alone is not finished yet",
    "Complete means succeeded",
    "Failed means failed",
    "a failed Job's receipt gives the error",
    "a Job gone without a receipt was lost: start it again",
    "a Job gone whose receipt says Shipped succeeded",
    "a Job gone whose receipt says Failed failed (receipt.json read too)",
    "a receipt older than the Process is an earlier Process's: start again",
])
def test_the_state_of_one_export(jobs: dict[int, ObservedJob], receipts: dict[ChildRef, ChildState], started: bool,
                                 expected: list[tuple[ExportState, str, bool]]) -> None:
    runs = export_runs(process([MARKER]), P.ATTESTED, jobs, receipts, started=started)
    assert [(r.state, r.detail, r.lost) for r in runs] == expected


@pytest.mark.parametrize(("export", "error"), [
    (BAD_CHANNEL, "vector channel has multiple variants set; exactly one required"),
    (NO_SOURCE, "artifact source has no variant set (one of receipts/testReport/processSnapshot/runMarker required)"),
], ids=["a channel with two variants is invalid", "a source with no variant is invalid"])
def test_an_export_whose_union_does_not_resolve_is_invalid(export: dict[str, Any], error: str) -> None:
    (run,) = export_runs(process([export]), P.ATTESTED, {}, {}, started=False)
    assert (run.state, run.detail) == (ExportState.INVALID, error)


def test_receipts_are_read_for_missing_and_failed_jobs_in_releasing_only() -> None:
    p = process([MARKER, MARKER, MARKER])
    jobs = {0: job(0), 1: job(1, ("FailureTarget", "True"), ("Failed", "True"))}
    names = [r.name for r in receipt_refs(p, jobs)]
    assert names == ["pr-7-export-1-receipt", "pr-7-export-2-receipt"]
    assert receipt_refs(process([MARKER], phase="Attested"), {}) == []



def named(name: str) -> Process:
    return msgspec.structs.replace(process([MARKER] * 12), metadata=ObjectMeta(name=name, namespace="previews"))


def cut_name(name: str, index: int) -> str:
    """The spec's cut, written out independently: 63 characters, 8 hex of SHA-256 over the whole name."""
    suffix = f"-export-{index}"
    keep = 63 - len(suffix) - 9
    return name[:keep].rstrip("-.") + "-" + hashlib.sha256(name.encode()).hexdigest()[:8] + suffix


LONG_56 = "preview-" + "p" * 48


@pytest.mark.parametrize(("name", "index", "expected"), [
    ("pr-7", 0, "pr-7-export-0"),
    ("p" * 54, 0, "p" * 54 + "-export-0"),
    ("p" * 53, 10, "p" * 53 + "-export-10"),
    ("p" * 55, 0, cut_name("p" * 55, 0)),
    ("p" * 54, 10, cut_name("p" * 54, 10)),
    (LONG_56, 0, cut_name(LONG_56, 0)),
    ("a" * 44 + "-.b" + "c" * 30, 3, "a" * 44 + "-" + hashlib.sha256(("a" * 44 + "-.b" + "c" * 30).encode())
     .hexdigest()[:8] + "-export-3"),
    ("x" * 253, 1, cut_name("x" * 253, 1)),
], ids=["a short name is the reference's", "a 63-character name is the reference's",
        "a 63-character name with a two-digit index is the reference's",
        "64 characters are cut and hashed", "a two-digit index is cut one shorter",
        "the 56-character name of the report", "a cut ending in '-.' drops them", "the longest Process name"])
def test_an_export_job_name_always_fits_a_label_value(name: str, index: int, expected: str) -> None:
    got = export_job_name(named(name), index)
    assert got == expected
    assert len(got) <= 63
    assert receipt_config_map_name(named(name), index) == expected + "-receipt"


def test_cut_names_of_two_long_processes_with_one_prefix_differ() -> None:
    a, b = "q" * 60 + "-a", "q" * 60 + "-b"
    assert export_job_name(named(a), 0) != export_job_name(named(b), 0)


def test_a_long_named_process_s_export_runs_under_the_cut_name() -> None:
    long = msgspec.structs.replace(process([MARKER]), metadata=ObjectMeta(name=LONG_56, namespace="previews"))
    (run,) = export_runs(long, P.ATTESTED, {}, {}, started=False)
    assert (run.state, run.detail) == (ExportState.START, "")
    job_ = export_job(long, 0, run.export, owner_uid="u-1", config=ExportJobConfig())
    assert job_.metadata.name == cut_name(LONG_56, 0)
    args = job_.spec.template.spec.containers[0].args or []
    assert args[args.index("--receipt-configmap") + 1] == cut_name(LONG_56, 0) + "-receipt"


def event(uid: str, reason: str, message: str, *, type_: str = "Warning", **stamps: Any) -> dict[str, Any]:
    return {"type": type_, "reason": reason, "message": message,
            "involvedObject": {"kind": "Job", "name": "pr-7-export-0", "uid": uid}, **stamps}


@pytest.mark.parametrize(("events", "expected"), [
    ([], None),
    ([event("j", "FailedCreate", "Error creating: x", lastTimestamp="2025-06-01T11:00:00Z")],
     JobWaiting(reason="FailedCreate", message="Error creating: x")),
    ([event("j", "FailedCreate", "old", lastTimestamp="2025-06-01T11:00:00Z"),
      event("j", "FailedCreate", "new", lastTimestamp="2025-06-01T11:05:00Z"),
      event("j", "FailedCreate", "middle", lastTimestamp="2025-06-01T11:02:00Z")],
     JobWaiting(reason="FailedCreate", message="new")),
    ([event("j", "FailedCreate", "by series", eventTime="2025-06-01T11:00:00.000000Z",
            series={"count": 3, "lastObservedTime": "2025-06-01T11:09:00.000000Z"}),
      event("j", "FailedCreate", "by last", lastTimestamp="2025-06-01T11:05:00Z")],
     JobWaiting(reason="FailedCreate", message="by series")),
    ([event("other", "FailedCreate", "an earlier Job of the same name", lastTimestamp="2025-06-01T11:05:00Z"),
      event("j", "SuccessfulCreate", "Created pod", type_="Normal", lastTimestamp="2025-06-01T11:06:00Z")], None),
    ([event("j", "FailedCreate", "micro, later in the same second", eventTime="2025-06-01T11:00:00.500000Z"),
      event("j", "FailedCreate", "whole second", lastTimestamp="2025-06-01T11:00:00Z")],
     JobWaiting(reason="FailedCreate", message="micro, later in the same second")),
    ([event("j", "FailedCreate", "dated", lastTimestamp="2025-06-01T11:00:00Z"),
      event("j", "FailedCreate", "unparseable", lastTimestamp="yesterday")],
     JobWaiting(reason="FailedCreate", message="dated")),
], ids=["no Event", "one Warning", "the newest of three", "a series counts by its last observation",
        "another Job's Warning and a Normal Event are not reasons",
        "a MicroTime half a second into a second is newer than the whole second",
        "a stamp that does not parse is the oldest"])
def test_the_latest_warning_of_a_job(events: list[dict[str, Any]], expected: JobWaiting | None) -> None:
    assert latest_warning(events, "j") == expected


PODLESS = JobStatus(start_time="2025-06-01T11:00:00Z")


@pytest.mark.parametrize(("status", "expected"), [
    (PODLESS, True),
    (JobStatus(), False),
    (JobStatus(start_time="2025-06-01T11:00:00Z", active=1), False),
    (JobStatus(start_time="2025-06-01T11:00:00Z", failed=1), False),
    (JobStatus(start_time="2025-06-01T11:00:00Z", succeeded=1), False),
    (JobStatus(start_time="2025-06-01T11:00:00Z",
               conditions=[JobCondition(type="Failed", status="True")]), False),
], ids=["handled, no pod", "not handled by a Job controller yet", "a pod is active",
        "a pod failed (a retry is on its way)", "a pod succeeded", "finished"])
def test_which_jobs_have_no_pod(status: JobStatus, expected: bool) -> None:
    assert status.without_pod() is expected
    p = process([MARKER])
    jobs = {0: ObservedJob(metadata=ObjectMeta(name="pr-7-export-0", namespace="previews", uid="j"), status=status)}
    assert list(without_pod(p, jobs)) == ([0] if expected else [])
    assert without_pod(process([MARKER], phase="Attested"), jobs) == {}


def test_a_running_export_says_why_its_job_has_no_pod() -> None:
    jobs = {0: ObservedJob(metadata=ObjectMeta(name="pr-7-export-0", uid="j"), status=PODLESS),
            1: ObservedJob(metadata=ObjectMeta(name="pr-7-export-1", uid="k"),
                           status=JobStatus(start_time="2025-06-01T11:00:00Z", active=1))}
    warnings = {i: JobWaiting(reason="FailedCreate", message="Error creating: nope") for i in (0, 1)}
    runs = export_runs(process([MARKER, MARKER]), P.ATTESTED, jobs, {}, started=True, warnings=warnings)
    assert [(r.state, r.detail) for r in runs] == [(ExportState.RUNNING, "FailedCreate: Error creating: nope"),
                                                   (ExportState.RUNNING, "")]
