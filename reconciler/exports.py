"""Export Jobs in Releasing: their names, their manifest, and where each export stands.

Pure: a Process, its cached export Jobs and the receipt ConfigMaps fetched beforehand in, values out.
The behaviour (which exports run, the Job's shape, what counts as finished, a Job deleted by hand):
docs/behaviour.md#releasing; the Job's fields: docs/wire-format.md#export-jobs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Final

import msgspec

from reconciler.boundary import receipt_of
from reconciler.children import ChildRef, ChildState
from reconciler.config import ReconcilerConfig
from reconciler.render import FIELD_MANAGER, owned_metadata, process_label_value
from shared.domain import annotations as ann
from shared.domain import labels
from shared.domain.api.export import ExportSpec
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.receipt import ReceiptEnvelope, ReceiptError
from shared.domain.api.tagged_union import VariantError
from shared.domain.canonical_json import canonical_json
from shared.domain.export_key import export_key
from shared.domain.manifests.batch import (
    Capabilities,
    Container,
    EnvVar,
    Job,
    JobSpec,
    JobWaiting,
    ObservedJob,
    PodSecurityContext,
    PodSpec,
    PodTemplateSpec,
    ResourceRequirements,
    SeccompProfile,
    SecurityContext,
)
from shared.kube import tracing
from shared.kube.meta import ObjectMeta, namespace_of

__all__ = [
    "BACKOFF_LIMIT",
    "TTL_SECONDS_AFTER_FINISHED",
    "ExportJobConfig",
    "ExportRun",
    "ExportState",
    "applicable",
    "count",
    "export_index",
    "export_job",
    "export_job_name",
    "export_runs",
    "gate_of",
    "latest_warning",
    "receipt_config_map_name",
    "receipt_refs",
    "tracing_env_of",
    "with_traceparent",
    "without_pod",
]

BACKOFF_LIMIT: Final = 1
"""``spec.backoffLimit`` of an export Job: one retry."""

TTL_SECONDS_AFTER_FINISHED: Final = 3600
"""``spec.ttlSecondsAfterFinished`` of an export Job: kept an hour after it ends."""

WORKER_COMMAND: Final = ("tatara-export-worker",)
"""The export Job's ``command``: our one image runs every binary, its default command is the reconciler
(docs/divergences.md#releasing-export-jobs)."""

_RESOURCES: Final = ResourceRequirements(requests={"cpu": "10m", "memory": "32Mi"},
                                         limits={"cpu": "200m", "memory": "128Mi"})
_POD_SECURITY: Final = PodSecurityContext(run_as_non_root=True, seccomp_profile=SeccompProfile(type="RuntimeDefault"))
_CONTAINER_SECURITY: Final = SecurityContext(
    allow_privilege_escalation=False, read_only_root_filesystem=True, run_as_non_root=True,
    capabilities=Capabilities(drop=["ALL"]), seccomp_profile=SeccompProfile(type="RuntimeDefault"))
"""An export pod's security contexts: what the Pod Security Standards' ``restricted`` profile requires
(non-root, no privilege escalation, every capability dropped, the runtime's seccomp filter), plus a
read-only root filesystem, as the charts' controller pods have; the worker writes nothing to disk
(docs/divergences.md#export-pod-security)."""
_CONFIG_MAP: Final = ("v1", "ConfigMap")
MAX_JOB_NAME: Final = 63
"""A Job's name is also its pods' ``batch.kubernetes.io/job-name`` label value: at most 63 characters."""
_DIGEST_HEX: Final = 8
"""Hex characters of SHA-256 that keep a cut export Job name unique."""
_P = ProcessPhase


@dataclass(frozen=True)
class ExportJobConfig:
    """``--export-worker-image`` and ``--export-worker-service-account`` (their defaults are the flags')."""

    image: str = ReconcilerConfig.export_worker_image
    service_account: str = ReconcilerConfig.export_worker_service_account


def export_job_name(process: Process, index: int) -> str:
    """``<process>-export-<index>``, at most 63 characters (docs/wire-format.md#export-job-names).

    When that is longer, the Process name is cut so that ``<cut>-<8 hex>-export-<index>`` is 63
    characters, trailing ``-`` / ``.`` removed, the hex being the first 8 of SHA-256 over the full
    Process name: deterministic, so every pass (and the receipt lookup) finds the same Job, and two
    long names with one prefix still differ. A name that fits is the reference's, byte for byte.
    """
    name = process.metadata.name or ""
    suffix = f"-export-{index}"
    if len(name) + len(suffix) <= MAX_JOB_NAME:
        return name + suffix
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST_HEX]
    keep = MAX_JOB_NAME - len(suffix) - _DIGEST_HEX - 1
    return f"{name[:keep].rstrip('-.')}-{digest}{suffix}"


def receipt_config_map_name(process: Process, index: int) -> str:
    """``<export Job name>-receipt``: the ConfigMap the worker writes its receipt into (at most 71
    characters, a legal ConfigMap name)."""
    return f"{export_job_name(process, index)}-receipt"


def gate_of(process: Process) -> ProcessPhase:
    """The gate the Process was released from: Failed when ``released-from`` is exactly ``Failed``,
    Attested otherwise (missing or unknown included)."""
    return _P.FAILED if process.metadata.annotations.get(ann.RELEASED_FROM) == "Failed" else _P.ATTESTED


def applicable(process: Process, gate: ProcessPhase) -> list[tuple[int, ExportSpec]]:
    """``(index in the full exports list, export)`` for each export whose ``when`` fires on ``gate``."""
    eph = process.spec.lifetime.ephemeral
    return eph.applicable_exports(gate) if eph is not None else []


def export_job(process: Process, index: int, export: ExportSpec, *, owner_uid: str,
               config: ExportJobConfig) -> Job:
    """The ``batch/v1`` Job that runs export ``index`` of ``process`` (docs/wire-format.md#export-jobs).

    Raises:
        reconciler.render.RenderError: no ``owner_uid`` or no Process name.
    """
    ns, name = namespace_of(process), process.metadata.name or ""
    pod_labels = {
        labels.PROCESS: process_label_value(ns, name),
        labels.ROLE: labels.ROLE_EXPORT,
        labels.EXPORT_INDEX: str(index),
    }
    metadata = owned_metadata(process, owner_uid, export_job_name(process, index),
                              labels={labels.MANAGED_BY: FIELD_MANAGER, **pod_labels})
    args = [
        "--spec", canonical_json(export.to_json()).decode(),
        "--process-namespace", ns,
        "--process-name", name,
        "--receipt-configmap", receipt_config_map_name(process, index),
    ]
    attestation = process.status.attestation if process.status is not None else None
    if attestation is not None:
        args += ["--previous-root", attestation.composed_root]
    args += ["--idempotency-key", export_key(owner_uid, process.metadata.generation, index)]
    return Job(
        metadata=metadata,
        spec=JobSpec(
            backoff_limit=BACKOFF_LIMIT,
            ttl_seconds_after_finished=TTL_SECONDS_AFTER_FINISHED,
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=pod_labels),
                spec=PodSpec(
                    restart_policy="Never",
                    service_account_name=config.service_account,
                    security_context=_POD_SECURITY,
                    containers=[Container(name="worker", image=config.image, image_pull_policy="IfNotPresent",
                                          command=list(WORKER_COMMAND), resources=_RESOURCES, args=args,
                                          security_context=_CONTAINER_SECURITY)],
                ),
            ),
        ),
    )


def with_traceparent(job: Job, traceparent: str | None, forwarded: Mapping[str, str] | None = None) -> Job:
    """``job`` with env ``TRACEPARENT=traceparent`` on its container (``traceparent`` None: without it), the
    W3C trace context its worker continues, after the ``forwarded`` variables (the reconciler's own
    ``OTEL_*`` settings, :func:`shared.kube.tracing.forwarded_env`, so the worker exports where it does;
    docs/runtime.md#traces).

    The decision never renders it: the executor adds it when tracing is on, to the Job it creates, so the
    Job of a given Process generation stays one manifest whatever reconcile applies it
    (:meth:`reconciler.executor.Executor.execute` keeps an existing Job's value)."""
    container = job.spec.template.spec.containers[0]
    names = {tracing.TRACEPARENT, *(forwarded or {})}
    env = [e for e in container.env or () if e.name not in names]
    env += [EnvVar(name=name, value=value) for name, value in sorted((forwarded or {}).items())]
    if traceparent is not None:
        env.append(EnvVar(name=tracing.TRACEPARENT, value=traceparent))
    traced = msgspec.structs.replace(container, env=env or None)
    pod = msgspec.structs.replace(job.spec.template.spec,
                                  containers=[traced, *job.spec.template.spec.containers[1:]])
    template = msgspec.structs.replace(job.spec.template, spec=pod)
    return msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, template=template))


def tracing_env_of(stored_job: bytes) -> tuple[str | None, dict[str, str]]:
    """The ``TRACEPARENT`` and the forwarded ``OTEL_*`` variables (:data:`shared.kube.tracing.FORWARDED`) a stored
    Job's first container holds (JSON as the API server returns it): what :func:`with_traceparent` takes to
    render that Job again."""
    stored = msgspec.json.decode(stored_job, type=_StoredJob)
    containers = stored.spec.template.spec.containers
    env = {v.name: v.value or "" for v in (containers[0].env if containers else ())
           if v.name == tracing.TRACEPARENT or v.name in tracing.FORWARDED}
    return env.pop(tracing.TRACEPARENT, None), env


class _StoredEnv(msgspec.Struct):
    name: str
    value: str | None = None


class _StoredContainer(msgspec.Struct):
    env: list[_StoredEnv] = []


class _StoredPodSpec(msgspec.Struct):
    containers: list[_StoredContainer] = []


class _StoredTemplate(msgspec.Struct):
    spec: _StoredPodSpec = msgspec.field(default_factory=_StoredPodSpec)


class _StoredJobSpec(msgspec.Struct):
    template: _StoredTemplate = msgspec.field(default_factory=_StoredTemplate)


class _StoredJob(msgspec.Struct):
    spec: _StoredJobSpec = msgspec.field(default_factory=_StoredJobSpec)


def export_index(job: ObservedJob) -> int | None:
    """The ``export-index`` label of a cached export Job, or None when absent or not a decimal."""
    value = job.metadata.labels.get(labels.EXPORT_INDEX, "")
    return int(value) if value.isdecimal() else None


# ── where each export stands ────────────────────────────────────────────────────


class ExportState(Enum):
    """One applicable export in Releasing."""

    INVALID = "Invalid"
    """Its ``source`` or ``channel`` union has zero or several variants: not run, counted failed."""
    START = "Start"
    """No Job (and no receipt of a finished run): its Job is to be applied."""
    RUNNING = "Running"
    """Its Job exists and has not finished (``detail``: why it has no pod, when it says)."""
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class ExportRun:
    """An applicable export, its state, and why (a union error, the receipt's ``evidence.error``)."""

    index: int
    export: ExportSpec
    state: ExportState
    detail: str = ""
    """Why it is invalid or failed; for a running one, why its Job has no pod (:class:`JobWaiting` text)."""
    lost: bool = False
    """Its Job is gone without a receipt of a finished run (deleted by hand): it is started again."""


def _union_error(export: ExportSpec) -> str | None:
    try:
        export.source.kind()
        export.channel.kind()
    except VariantError as err:
        return str(err)
    return None


def _receipt(process: Process, index: int, fetched: Mapping[ChildRef, ChildState]) -> ReceiptEnvelope | None:
    """The receipt of export ``index`` when its ConfigMap was fetched, parses, and was written after the
    Process was created (an older one belongs to an earlier Process of the same name)."""
    state = fetched.get(ChildRef(*_CONFIG_MAP, namespace_of(process), receipt_config_map_name(process, index)))
    if state is None:
        return None
    try:
        receipt = receipt_of(state)
    except ReceiptError:
        return None
    created = process.metadata.creation_timestamp
    if created is not None and receipt.generated_at < created:
        return None
    return receipt


def _evidence(receipt: ReceiptEnvelope | None, key: str) -> str:
    evidence = receipt.evidence if receipt is not None else None
    value = evidence.get(key) if isinstance(evidence, dict) else None
    return value if isinstance(value, str) else ""


def export_runs(process: Process, gate: ProcessPhase, jobs: Mapping[int, ObservedJob],
                receipts: Mapping[ChildRef, ChildState], *, started: bool,
                warnings: Mapping[int, JobWaiting] | None = None) -> list[ExportRun]:
    """Every applicable export of ``process`` at ``gate``, in list order, with its state.

    Args:
        jobs: cached export Jobs of this Process by export index.
        receipts: receipt ConfigMaps fetched beforehand (:func:`receipt_refs`), by ref.
        started: an earlier Releasing pass applied the Jobs, so a missing one was deleted (``lost``).
        warnings: the latest Warning Event of each Job :func:`without_pod` names, fetched beforehand.

    A running export's ``detail`` says why its Job has no pod: a condition holding the Job back
    (:meth:`JobStatus.held`, e.g. ``Suspended``), else, for a Job without a pod, its latest Warning Event
    (``FailedCreate: Error creating: pods "<job>-" is forbidden: …``); empty otherwise.

    A Job finishes on its ``Complete`` / ``Failed`` condition (:meth:`JobStatus.outcome`), not on
    ``status.failed > 0``: with ``backoffLimit: 1`` one failed pod is followed by a retry. A missing
    Job whose receipt says it finished counts as the receipt says (``evidence.outcome`` ``Shipped``:
    succeeded); a missing Job without one is started (again).
    """
    out: list[ExportRun] = []
    for index, export in applicable(process, gate):
        error = _union_error(export)
        if error is not None:
            out.append(ExportRun(index, export, ExportState.INVALID, error))
            continue
        job = jobs.get(index)
        if job is None:
            receipt = _receipt(process, index, receipts)
            if receipt is None:
                out.append(ExportRun(index, export, ExportState.START, lost=started))
            elif _evidence(receipt, "outcome") == "Shipped":
                out.append(ExportRun(index, export, ExportState.SUCCEEDED))
            else:
                out.append(ExportRun(index, export, ExportState.FAILED, _evidence(receipt, "error")))
            continue
        outcome = job.status.outcome()
        if outcome is None:
            waiting = job.status.held() or ((warnings or {}).get(index) if job.status.without_pod() else None)
            out.append(ExportRun(index, export, ExportState.RUNNING, waiting.text() if waiting else ""))
        elif outcome:
            out.append(ExportRun(index, export, ExportState.SUCCEEDED))
        else:
            out.append(ExportRun(index, export, ExportState.FAILED,
                                 _evidence(_receipt(process, index, receipts), "error")))
    return out


def receipt_refs(process: Process, jobs: Mapping[int, ObservedJob]) -> list[ChildRef]:
    """The receipt ConfigMaps Releasing reads: those of applicable exports whose Job is missing (did it
    finish before it was deleted?) or failed (``evidence.error`` for the Warning Event)."""
    if process.phase is not _P.RELEASING:
        return []
    out = []
    for index, _ in applicable(process, gate_of(process)):
        job = jobs.get(index)
        if job is None or job.status.outcome() is False:
            out.append(ChildRef(*_CONFIG_MAP, namespace_of(process), receipt_config_map_name(process, index)))
    return out


def count(runs: Sequence[ExportRun], *states: ExportState) -> int:
    """How many of ``runs`` are in one of ``states``."""
    return sum(1 for r in runs if r.state in states)


def without_pod(process: Process, jobs: Mapping[int, ObservedJob]) -> dict[int, ObservedJob]:
    """In Releasing, the cached Jobs of applicable exports that have no pod (:meth:`JobStatus.without_pod`)
    and no condition holding them back: their Warning Events say why (docs/behaviour.md#releasing)."""
    if process.phase is not _P.RELEASING:
        return {}
    out = {}
    for index, _ in applicable(process, gate_of(process)):
        job = jobs.get(index)
        if job is not None and job.metadata.uid and job.status.without_pod() and job.status.held() is None:
            out[index] = job
    return out


_OLDEST: Final = datetime.min.replace(tzinfo=UTC)


def _instant(text: str) -> datetime | None:
    """An RFC 3339 ``Time`` (``2025-06-01T11:00:00Z``) or ``MicroTime`` (six fractional digits) as an aware
    instant; None when it does not parse."""
    try:
        instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return instant if instant.tzinfo is not None else instant.replace(tzinfo=UTC)


def latest_warning(events: Sequence[Mapping[str, object]], job_uid: str) -> JobWaiting | None:
    """The reason and message of the newest Warning Event in ``events`` about the Job ``job_uid`` (by
    ``involvedObject.uid``; newest by ``series.lastObservedTime``, ``lastTimestamp``, ``eventTime``, then
    ``firstTimestamp``: RFC 3339 Time or MicroTime, compared as instants, since ``…:00Z`` sorts after
    ``…:00.5Z`` as text); None when there is none. A stamp that does not parse counts as the oldest."""
    best: tuple[datetime, JobWaiting] | None = None
    for event in events:
        involved = event.get("involvedObject")
        if event.get("type") != "Warning" or not isinstance(involved, Mapping) or involved.get("uid") != job_uid:
            continue
        series = event.get("series")
        stamps = [series.get("lastObservedTime") if isinstance(series, Mapping) else None,
                  event.get("lastTimestamp"), event.get("eventTime"), event.get("firstTimestamp")]
        when = next((parsed for t in stamps if isinstance(t, str) and (parsed := _instant(t)) is not None),
                    _OLDEST)
        reason, message = event.get("reason"), event.get("message")
        found = JobWaiting(reason=reason if isinstance(reason, str) and reason else "Warning",
                           message=message if isinstance(message, str) else "")
        if best is None or when >= best[0]:
            best = (when, found)
    return best[1] if best is not None else None
