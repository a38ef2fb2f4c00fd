"""The ``batch/v1`` Job status the Kubernetes 1.36 Job controller writes, as pure functions (STAND-IN).

The Job runner stand-in (:mod:`tools.standins.jobs`) runs a Job's container as a local process instead of
a pod; these functions say what the Job controller (``pkg/controller/job`` of Kubernetes v1.36) would
write on the Job's ``/status`` at each step, so the API server's Job-status validation (strict since the
``JobManagedBy`` gate went GA in 1.35) accepts every write and clients see the shapes they know
(docs/architecture.md#the-job-runner-stand-in):

- a run starts: ``startTime`` (set once, immutable afterwards), ``active: 1``, ``ready: 0``,
  ``terminating: 0``; the process is up: ``ready: 1``;
- it exits 0: ``succeeded + 1``, ``active: 0`` with the interim ``SuccessCriteriaMet`` condition (reason
  ``CompletionsReached``, message ``Reached expected number of succeeded pods``), then ``Complete`` with
  the same reason and message plus ``completionTime``;
- it exits non-zero: ``failed + 1``, ``active: 0``; while ``failed <= backoffLimit`` the Job is retried
  after the controller's pod-failure backoff (10 s, doubling, capped at 10 min); once ``failed >
  backoffLimit``: the interim ``FailureTarget`` condition (reason ``BackoffLimitExceeded``, message ``Job
  has reached the specified backoff limit``), then ``Failed`` with the same reason and message (no
  ``completionTime``: the API server refuses one without ``Complete``).

Each step is a list of merge patches for ``/status``, applied in order; conditions carry
``lastProbeTime`` and ``lastTransitionTime`` as the controller's ``newCondition`` does. Times are RFC 3339
strings in UTC with whole seconds (``metav1.Time``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.kube.events import Event
from shared.kube.ratelimit import Backoff

__all__ = [
    "BACKOFF_LIMIT_EXCEEDED",
    "COMPLETIONS_REACHED",
    "POD_FAILURE_BACKOFF",
    "POD_FAILURE_BACKOFF_CAP",
    "Step",
    "Verdict",
    "after_exit",
    "condition_true",
    "is_finished",
    "retry_delay",
    "running",
    "started",
]

COMPLETIONS_REACHED = "CompletionsReached"
"""Reason of ``SuccessCriteriaMet`` and ``Complete`` (``batch.JobReasonCompletionsReached``)."""
COMPLETIONS_MESSAGE = "Reached expected number of succeeded pods"
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
"""Reason of ``FailureTarget`` and ``Failed`` (``batch.JobReasonBackoffLimitExceeded``)."""
BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"

POD_FAILURE_BACKOFF = 10.0
"""Seconds before the first retry of a failed run (``DefaultJobPodFailureBackOff``)."""
POD_FAILURE_BACKOFF_CAP = 600.0
"""Longest wait before a retry, seconds (``MaxJobPodFailureBackOff``)."""


class Verdict(enum.Enum):
    """Where a Job stands after a step."""

    RETRY = "retry"
    """The run failed within the backoff limit: run it again after :func:`retry_delay`."""
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True)
class Step:
    """The status merge patches of one step, in order, the verdict, and the Event the controller records."""

    patches: tuple[dict[str, Any], ...]
    verdict: Verdict
    event: Event | None = None


def condition_true(status: Mapping[str, Any], kind: str) -> bool:
    """Whether ``status.conditions`` holds a ``kind`` condition with status ``True``."""
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or ())


def is_finished(status: Mapping[str, Any]) -> bool:
    """A Job with ``Complete=True`` or ``Failed=True`` is finished: it is never run again."""
    return condition_true(status, "Complete") or condition_true(status, "Failed")


def _condition(kind: str, reason: str, message: str, now: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}


def started(status: Mapping[str, Any], now: str) -> dict[str, Any]:
    """The patch when a run starts (the controller has created its pod): ``startTime`` kept once set."""
    return {"startTime": status.get("startTime") or now, "active": 1, "ready": 0, "terminating": 0}


def running() -> dict[str, Any]:
    """The patch once the run's process is up (its pod would be Ready)."""
    return {"ready": 1}


def after_exit(status: Mapping[str, Any], backoff_limit: int, exit_code: int, now: str) -> Step:
    """The step after a run ended with ``exit_code`` (0: succeeded), given the Job's current ``status``.

    A run that was lost (the stand-in stopped while the Job was ``active``) is a failed run, as a pod that
    disappears is for the controller.
    """
    conditions = list(status.get("conditions") or ())
    if exit_code == 0:
        criteria = _condition("SuccessCriteriaMet", COMPLETIONS_REACHED, COMPLETIONS_MESSAGE, now)
        complete = _condition("Complete", COMPLETIONS_REACHED, COMPLETIONS_MESSAGE, now)
        return Step(
            ({"active": 0, "ready": 0, "succeeded": int(status.get("succeeded") or 0) + 1,
              "conditions": [*conditions, criteria]},
             {"conditions": [*conditions, criteria, complete], "completionTime": now}),
            Verdict.COMPLETE, Event.normal("Completed", "Job completed"))
    failed = int(status.get("failed") or 0) + 1
    counts = {"active": 0, "ready": 0, "failed": failed}
    if failed <= backoff_limit:
        return Step((counts,), Verdict.RETRY)
    target = _condition("FailureTarget", BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE, now)
    final = _condition("Failed", BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE, now)
    return Step(({**counts, "conditions": [*conditions, target]}, {"conditions": [*conditions, target, final]}),
                Verdict.FAILED, Event.warning(BACKOFF_LIMIT_EXCEEDED, BACKOFF_LIMIT_MESSAGE))


def retry_delay(failed: int, base: float = POD_FAILURE_BACKOFF, cap: float = POD_FAILURE_BACKOFF_CAP) -> float:
    """Seconds to wait before the run after the ``failed``-th failure: ``base · 2^(failed−1)``, at most ``cap``."""
    return Backoff(initial=base, factor=2.0, cap=cap).delay(max(failed - 1, 0))
