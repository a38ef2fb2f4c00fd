"""reconciler.phases.decide_releasing: Jobs applied, waited on, counted, and the messages and Events
(docs/behaviour.md#releasing; messages from lifetime-pool-allocation §5.6)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.decision import Decision
from reconciler.phases import decide
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.api.process import Process
from shared.domain.manifests.batch import Job, JobCondition, JobStatus, JobWaiting, ObservedJob
from shared.kube.events import Event
from shared.kube.meta import ObjectMeta
from tests.unit.reconciler.test_phases import goes_to, make, obs, sent

MARKER: dict[str, Any] = {"source": {"runMarker": {}}, "channel": {"stdout": {}}}
ON_FAILED: dict[str, Any] = {"source": {"runMarker": {}}, "channel": {"stdout": {}}, "when": "OnFailed"}
INVALID: dict[str, Any] = {"source": {"runMarker": {}}, "channel": {}}
DONE = (("SuccessCriteriaMet", "True"), ("Complete", "True"))
FAILED = (("FailureTarget", "True"), ("Failed", "True"))


def releasing(exports: list[dict[str, Any]], gate: str = "Attested", reason: str | None = None) -> Process:
    status: dict[str, Any] = {}
    if reason is not None:
        status = {"message": "m", "conditions": [{"type": "Ready", "status": "False", "reason": reason,
                                                   "message": "m", "lastTransitionTime": "2025-06-01T11:59:00Z"}]}
    return make("Releasing", spec={"lifetime": {"ephemeral": {"exports": exports}}},
                meta={"annotations": {"tatara.pleme.io/released-from": gate}}, **status)


def job(index: int, conditions: tuple[tuple[str, str], ...] = ()) -> ObservedJob:
    return ObservedJob(metadata=ObjectMeta(name=f"me-export-{index}", namespace="ns"),
                       status=JobStatus(conditions=[JobCondition(type=t, status=s) for t, s in conditions]))


def applied(decision: Decision) -> list[str]:
    return [j.metadata.name or "" for j in decision.apply if isinstance(j, Job)]


def test_the_first_pass_applies_one_job_per_applicable_export_and_waits_on_the_watch() -> None:
    d = decide(obs(releasing([MARKER, ON_FAILED, MARKER]), heartbeat_seconds=30))
    assert applied(d) == ["me-export-0", "me-export-2"]  # index in the full list; OnFailed does not fire
    assert d.transition is None
    assert sent(d)["message"] == "releasing — waiting for 2 export Job(s) (succeeded=0, failed=0)"
    assert sent(d)["conditions"][0]["reason"] == "ExportsRunning"
    assert d.events == ()
    assert d.requeue_after == 30  # the HEARTBEAT safety net; the Job watch wakes it first


def test_waiting_on_running_jobs_writes_nothing_new() -> None:
    message = "releasing — waiting for 1 export Job(s) (succeeded=0, failed=0)"
    p = make("Releasing", spec={"lifetime": {"ephemeral": {"exports": [MARKER]}}},
             meta={"annotations": {"tatara.pleme.io/released-from": "Attested"}}, message=message,
             conditions=[{"type": t, "status": v, "reason": "ExportsRunning", "message": message,
                          "lastTransitionTime": "2025-06-01T11:59:00Z"}
                         for t, v in (("Ready", "False"), ("Reconciling", "True"), ("Stalled", "False"))])
    d = decide(obs(p, export_jobs={0: job(0)}))
    assert (d.apply, d.status, d.events) == ((), None, ())


@pytest.mark.parametrize(("gate", "jobs", "target", "message", "reason"), [
    ("Attested", {0: job(0, DONE), 1: job(1, FAILED)}, P.EXITING,
     "releasing → Exiting — exports complete (succeeded=1, failed=1)", "ExportsFailed"),
    ("Attested", {0: job(0, DONE), 1: job(1, DONE)}, P.EXITING,
     "releasing → Exiting — exports complete (succeeded=2, failed=0)", "ExportsComplete"),
], ids=["a failed export does not block, and is counted", "every export succeeded"])
def test_every_job_finished_leaves_releasing(gate: str, jobs: dict[int, ObservedJob], target: P, message: str,
                                             reason: str) -> None:
    d = decide(obs(releasing([MARKER, MARKER], gate=gate, reason="ExportsRunning"), export_jobs=jobs))
    goes_to(d, P.RELEASING, target, message)
    assert sent(d)["conditions"][0]["reason"] == reason
    warnings = [e for e in d.events if e.type.value == "Warning"]
    if "failed=1" in message:
        assert warnings == [Event.warning("ExportFailed", "export 1 (Job me-export-1) failed")]
    else:
        assert warnings == []


def test_released_from_failed_goes_to_zombie() -> None:
    d = decide(obs(releasing([ON_FAILED], gate="Failed", reason="ExportsRunning"), export_jobs={0: job(0, DONE)}))
    goes_to(d, P.RELEASING, P.ZOMBIE, "releasing → Zombie — exports complete (succeeded=1, failed=0)")


def test_no_applicable_export_leaves_at_once() -> None:
    d = decide(obs(releasing([ON_FAILED])))
    goes_to(d, P.RELEASING, P.EXITING, "releasing → Exiting — no applicable exports")
    assert d.apply == ()


def test_an_invalid_export_is_not_run_counted_failed_and_named_in_a_warning() -> None:
    d = decide(obs(releasing([INVALID])))
    goes_to(d, P.RELEASING, P.EXITING, "releasing → Exiting — exports complete (succeeded=0, failed=1)")
    assert d.apply == ()
    assert Event.warning("InvalidExport", "export 0 not run: vector channel has no variant set "
                                          "(one of httpEvent/natsSubject/stdout required)") in d.events


def test_an_invalid_export_beside_a_valid_one_is_reported_on_the_first_pass() -> None:
    d = decide(obs(releasing([INVALID, MARKER])))
    assert applied(d) == ["me-export-1"]
    assert sent(d)["message"] == "releasing — waiting for 1 export Job(s) (succeeded=0, failed=1)"
    assert [e.reason for e in d.events] == ["InvalidExport"]


def test_a_job_deleted_before_it_finished_is_applied_again_with_a_warning() -> None:
    d = decide(obs(releasing([MARKER, MARKER], reason="ExportsRunning"), export_jobs={1: job(1)}))
    assert applied(d) == ["me-export-0"]
    assert sent(d)["conditions"][0]["reason"] == "ExportJobLost"
    assert d.events == (Event.warning("ExportJobLost", "export 0: Job me-export-0 was deleted before it finished; "
                                                       "starting it again"),)


# ── a Job without a pod says why (docs/behaviour.md#releasing) ──────────────────

FORBIDDEN = ('Error creating: pods "me-export-0-" is forbidden: error looking up service account ns/exporter: '
             'serviceaccount "exporter" not found')
BASE = "releasing — waiting for 1 export Job(s) (succeeded=0, failed=0)"
WAITING = f'{BASE}; export 0 (Job me-export-0): FailedCreate: {FORBIDDEN}'


def podless(**status: Any) -> ObservedJob:
    """A Job the Job controller handled (``startTime``) that has no pod: what a missing ServiceAccount leaves."""
    return ObservedJob(metadata=ObjectMeta(name="me-export-0", namespace="ns", uid="job-uid"),
                       status=JobStatus(start_time="2025-06-01T11:59:00Z", **status))


def stored(message: str, reason: str) -> Process:
    return make("Releasing", spec={"lifetime": {"ephemeral": {"exports": [MARKER]}}},
                meta={"annotations": {"tatara.pleme.io/released-from": "Attested"}}, message=message,
                conditions=[{"type": t, "status": v, "reason": reason, "message": message,
                             "lastTransitionTime": "2025-06-01T11:59:00Z"}
                            for t, v in (("Ready", "False"), ("Reconciling", "True"), ("Stalled", "False"))])


def test_a_job_without_a_pod_puts_its_controller_s_warning_on_the_process_with_one_event() -> None:
    warning = JobWaiting(reason="FailedCreate", message=FORBIDDEN)
    d = decide(obs(stored(BASE, "ExportsRunning"), export_jobs={0: podless()}, export_job_warnings={0: warning},
                   heartbeat_seconds=3600))
    assert d.transition is None
    assert sent(d)["message"] == WAITING
    ready = sent(d)["conditions"][0]
    assert (ready["type"], ready["status"], ready["reason"], ready["message"]) == (
        "Ready", "False", "ExportJobWaiting", WAITING)
    assert d.events == (Event.warning("ExportJobWaiting", f"export 0 (Job me-export-0): FailedCreate: {FORBIDDEN}"),)
    assert d.requeue_after == 10  # the Warning's retries do not touch the Job, so nothing else wakes it

    again = decide(obs(stored(WAITING, "ExportJobWaiting"), export_jobs={0: podless()},
                       export_job_warnings={0: warning}, heartbeat_seconds=3600))
    assert (again.status, again.events, again.apply) == (None, (), ())


def test_a_job_whose_pod_came_goes_back_to_exports_running() -> None:
    d = decide(obs(stored(WAITING, "ExportJobWaiting"), export_jobs={0: podless(active=1)}, heartbeat_seconds=3600))
    assert sent(d)["message"] == BASE
    assert sent(d)["conditions"][0]["reason"] == "ExportsRunning"
    assert (d.events, d.requeue_after) == ((), 3600)


def test_a_job_without_a_pod_and_no_warning_yet_is_looked_at_again_soon() -> None:
    d = decide(obs(stored(BASE, "ExportsRunning"), export_jobs={0: podless()}, heartbeat_seconds=3600))
    assert (d.status, d.events, d.requeue_after) == (None, (), 10)


def test_a_suspended_job_says_so_from_its_own_condition() -> None:
    suspended = ObservedJob(metadata=ObjectMeta(name="me-export-0", namespace="ns", uid="job-uid"), status=JobStatus(
        conditions=[JobCondition(type="Suspended", status="True", reason="JobSuspended", message="Job suspended")]))
    d = decide(obs(stored(BASE, "ExportsRunning"), export_jobs={0: suspended}))
    assert sent(d)["message"] == f"{BASE}; export 0 (Job me-export-0): JobSuspended: Job suspended"
    assert [e.reason for e in d.events] == ["ExportJobWaiting"]


def test_a_job_waiting_still_counts_as_started_so_a_deleted_one_is_lost() -> None:
    d = decide(obs(stored(WAITING, "ExportJobWaiting"), export_jobs={}))
    assert applied(d) == ["me-export-0"]
    assert sent(d)["conditions"][0]["reason"] == "ExportJobLost"
