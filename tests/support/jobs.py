"""Finish a Job as the Kubernetes 1.36 Job controller would: the local control plane runs no Job
controller and no Pod, so tests write the ``/status`` it would write, in its order.

1. the Job starts: ``startTime``, ``active: 1``, ``ready: 0``;
2. its pods end: ``active: 0`` and ``succeeded: 1``, or ``failed: backoffLimit + 1``, with the interim
   condition ``SuccessCriteriaMet`` (reason ``CompletionsReached``) or ``FailureTarget`` (reason
   ``BackoffLimitExceeded``);
3. the terminal condition beside it, ``Complete`` (with ``completionTime``) or ``Failed``, same reason
   and message.

The API server validates each write (``pkg/apis/batch/validation``): ``Complete`` needs
``SuccessCriteriaMet``, ``Failed`` needs ``FailureTarget``, a finished Job needs ``startTime``, only a
Complete Job has a ``completionTime``, and it is not before ``startTime``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.domain.resources import JOBS
from shared.kube.client import KubeClient

__all__ = ["finish_job"]

_SUCCESS = ("SuccessCriteriaMet", "Complete", "CompletionsReached", "Reached expected number of succeeded pods")
_FAILURE = ("FailureTarget", "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")


def _condition(type_: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {"type": type_, "status": "True", "reason": reason, "message": message,
            "lastProbeTime": at, "lastTransitionTime": at}


async def finish_job(api: KubeClient, namespace: str, name: str, succeeded: bool) -> dict[str, Any]:
    """Write Job ``namespace/name``'s status through start, pods ended, finished; returns the last
    Job as the API server answered. Raises :class:`shared.kube.errors.NotFound` when it is absent."""
    job = msgspec.json.decode(await api.get(JOBS, name, namespace))
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await api.merge_patch(JOBS, name, {"status": {"startTime": at, "active": 1, "ready": 0}}, namespace,
                          subresource="status")
    interim, terminal, reason, message = _SUCCESS if succeeded else _FAILURE
    counts = {"succeeded": 1} if succeeded else {"failed": int(job["spec"].get("backoffLimit", 6)) + 1}
    first = _condition(interim, reason, message, at)
    await api.merge_patch(JOBS, name, {"status": {"active": 0, "ready": 0, **counts, "conditions": [first]}},
                          namespace, subresource="status")
    final: dict[str, Any] = {"conditions": [first, _condition(terminal, reason, message, at)]}
    if succeeded:
        final["completionTime"] = at
    done: dict[str, Any] = msgspec.json.decode(
        await api.merge_patch(JOBS, name, {"status": final}, namespace, subresource="status"))
    return done
