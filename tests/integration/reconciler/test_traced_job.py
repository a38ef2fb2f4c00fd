"""An export Job applied with tracing on, against the real API server: the reconcile that creates it gives it
its ``TRACEPARENT``; a later reconcile that applies it again (the Job cache had not shown it) leaves it the Job
it was, although a pod template is immutable and the API server refuses the new value (docs/runtime.md#traces)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from opentelemetry import trace

from reconciler.executor import apply_traced_job
from reconciler.exports import ExportJobConfig, applicable, export_job, with_traceparent
from reconciler.render import FIELD_MANAGER
from shared.domain.api.phase import ProcessPhase as P
from shared.domain.manifests.batch import Job
from shared.domain.resources import JOBS
from shared.kube import tracing
from shared.kube.client import KubeClient
from shared.kube.errors import Invalid
from shared.kube.patch import apply
from tests.unit.reconciler.test_exports import MARKER, process

pytestmark = pytest.mark.anyio

FIRST = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
LATER = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
ENDPOINT = "http://127.0.0.1:4318"


def rendered(namespace: str) -> Job:
    """The export Job the decision renders, in ``namespace`` and without its owner (no Process exists here: the
    garbage collector would delete an orphan)."""
    p = process([MARKER])
    index, export = applicable(p, P.ATTESTED)[0]
    job = export_job(p, index, export, owner_uid="u-1", config=ExportJobConfig())
    metadata = msgspec.structs.replace(job.metadata, namespace=namespace, owner_references=None)
    return msgspec.structs.replace(job, metadata=metadata)


def env_of(stored: bytes) -> list[dict[str, Any]]:
    job = msgspec.json.decode(stored)
    return list(job["spec"]["template"]["spec"]["containers"][0].get("env") or [])


async def apply_in(traceparent: str, kc: KubeClient, job: Job) -> bytes:
    ctx = tracing.context_from_traceparent(traceparent)
    with trace.use_span(trace.get_current_span(ctx)):
        return await apply_traced_job(kc, JOBS, job)


async def test_a_traced_job_keeps_the_context_of_its_creation(
        kc: KubeClient, namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "enabled", True)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ENDPOINT)
    job = rendered(namespace)
    created = env_of(await apply_in(FIRST, kc, job))
    assert created == [{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": ENDPOINT},
                       {"name": "TRACEPARENT", "value": FIRST}]
    # the API server refuses the other value outright (what the executor works around)
    with pytest.raises(Invalid, match="immutable"):
        await apply(kc, JOBS, with_traceparent(job, LATER, {"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}),
                    field_manager=FIELD_MANAGER)
    again = env_of(await apply_in(LATER, kc, job))
    assert again == created


async def test_a_job_created_with_tracing_off_gains_nothing_when_tracing_is_on(
        kc: KubeClient, namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    job = rendered(namespace)
    await apply(kc, JOBS, job, field_manager=FIELD_MANAGER)  # tracing off: the manifest as rendered
    monkeypatch.setattr(tracing, "enabled", True)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ENDPOINT)
    assert env_of(await apply_in(LATER, kc, job)) == []
