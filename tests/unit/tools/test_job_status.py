"""What the Job runner stand-in writes on a Job's status, step by step (the 1.36 Job controller's shapes)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.kube.events import EventType
from tools.standins.job_status import Verdict, after_exit, is_finished, retry_delay, started

NOW = "2026-12-01T10:00:00Z"
LATER = "2026-12-01T10:00:05Z"


def cond(kind: str, reason: str, message: str, at: str = LATER) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastProbeTime": at, "lastTransitionTime": at, "reason": reason,
            "message": message}


SCM = cond("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods")
COMPLETE = cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
TARGET = cond("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
FAILED = cond("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
RUNNING = {"startTime": NOW, "active": 1, "ready": 1, "terminating": 0}


@pytest.mark.parametrize(("status", "backoff_limit", "exit_code", "patches", "verdict", "event"), [
    pytest.param(RUNNING, 1, 0,
                 ({"active": 0, "ready": 0, "succeeded": 1, "conditions": [SCM]},
                  {"conditions": [SCM, COMPLETE], "completionTime": LATER}),
                 Verdict.COMPLETE, (EventType.NORMAL, "Completed", "Job completed"),
                 id="a run that exits 0 writes SuccessCriteriaMet, then Complete with completionTime"),
    pytest.param(RUNNING, 1, 1, ({"active": 0, "ready": 0, "failed": 1},), Verdict.RETRY, None,
                 id="a first failure within backoffLimit 1 counts it and retries"),
    pytest.param({**RUNNING, "failed": 1}, 1, 1,
                 ({"active": 0, "ready": 0, "failed": 2, "conditions": [TARGET]},
                  {"conditions": [TARGET, FAILED]}),
                 Verdict.FAILED,
                 (EventType.WARNING, "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
                 id="failures past backoffLimit write FailureTarget, then Failed, and no completionTime"),
    pytest.param(RUNNING, 0, -15,
                 ({"active": 0, "ready": 0, "failed": 1, "conditions": [TARGET]}, {"conditions": [TARGET, FAILED]}),
                 Verdict.FAILED,
                 (EventType.WARNING, "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
                 id="a killed run with backoffLimit 0 fails the Job at once"),
    pytest.param({**RUNNING, "failed": 1}, 1, 0,
                 ({"active": 0, "ready": 0, "succeeded": 1, "conditions": [SCM]},
                  {"conditions": [SCM, COMPLETE], "completionTime": LATER}),
                 Verdict.COMPLETE, (EventType.NORMAL, "Completed", "Job completed"),
                 id="a retry that succeeds completes the Job and keeps the failure count"),
])
def test_after_exit(status: dict[str, Any], backoff_limit: int, exit_code: int,
                    patches: tuple[dict[str, Any], ...], verdict: Verdict,
                    event: tuple[EventType, str, str] | None) -> None:
    step = after_exit(status, backoff_limit, exit_code, LATER)
    assert step.patches == patches
    assert step.verdict is verdict
    assert (None if step.event is None else (step.event.type, step.event.reason, step.event.message)) == event


@pytest.mark.parametrize(("status", "expected"), [
    pytest.param({}, {"startTime": NOW, "active": 1, "ready": 0, "terminating": 0}, id="a first run sets startTime"),
    pytest.param({"startTime": "2026-01-01T00:00:00Z", "failed": 1},
                 {"startTime": "2026-01-01T00:00:00Z", "active": 1, "ready": 0, "terminating": 0},
                 id="a retry keeps startTime, which is immutable once set"),
])
def test_started(status: dict[str, Any], expected: dict[str, Any]) -> None:
    assert started(status, NOW) == expected


@pytest.mark.parametrize(("conditions", "expected"), [
    pytest.param([], False, id="no condition: unfinished"),
    pytest.param([SCM], False, id="SuccessCriteriaMet alone: not finished yet"),
    pytest.param([TARGET], False, id="FailureTarget alone: not finished yet"),
    pytest.param([SCM, COMPLETE], True, id="Complete: finished"),
    pytest.param([TARGET, FAILED], True, id="Failed: finished"),
    pytest.param([{**COMPLETE, "status": "False"}], False, id="Complete=False: unfinished"),
])
def test_is_finished(conditions: list[dict[str, Any]], expected: bool) -> None:
    assert is_finished({"conditions": conditions}) is expected


@pytest.mark.parametrize(("failed", "seconds"), [
    pytest.param(1, 10.0, id="10 s after the first failure"),
    pytest.param(2, 20.0, id="doubling after the second"),
    pytest.param(8, 600.0, id="capped at 10 minutes"),
])
def test_retry_delay_is_the_controllers_pod_failure_backoff(failed: int, seconds: float) -> None:
    assert retry_delay(failed) == seconds
