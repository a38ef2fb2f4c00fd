"""``batch/v1`` Jobs: the manifest a reconciler server-side applies, and the status it reads back.

:class:`Job` is what is sent: ``apiVersion``/``kind`` (from :mod:`shared.domain.resources`) always
present, every unset optional field left out, so a server-side apply claims only the fields we set.
It carries what a one-shot worker needs — a container with image, command, args and plain
environment values, the pod's service account and security context, restart policy, labels/annotations on the pod
template, and the Job's retry, deadline and TTL knobs — and nothing else. The pool reconciler's
reset Job and the Process reconciler's export Jobs use it.

:class:`ObservedJob` is the other direction: a Job as an informer caches it, metadata and the status
fields that say how it ended (:meth:`JobStatus.outcome`).

Source: the Kubernetes API reference, "Job v1 batch" (``JobSpec``, ``JobStatus``, ``JobCondition``)
and "Pod v1 core" (``PodSpec``, ``Container``, ``EnvVar``, ``SecurityContext``, ``PodSecurityContext``).
"""

from __future__ import annotations

from typing import ClassVar, Final

import msgspec

from shared.domain.api.wire import WireStruct
from shared.domain.resources import JOBS
from shared.kube.client import Resource
from shared.kube.meta import ObjectMeta

__all__ = [
    "Capabilities",
    "Container",
    "EnvVar",
    "Job",
    "JobCondition",
    "JobSpec",
    "JobStatus",
    "JobWaiting",
    "ObservedJob",
    "PodSecurityContext",
    "PodSpec",
    "PodTemplateSpec",
    "ResourceRequirements",
    "SeccompProfile",
    "SecurityContext",
]

class EnvVar(WireStruct):
    """``env[]`` of a container: a plain ``name``/``value`` pair."""

    name: str
    value: str


class ResourceRequirements(WireStruct):
    """``resources`` of a container: quantities by resource name (``cpu: 10m``, ``memory: 32Mi``)."""

    requests: dict[str, str] | None = None
    limits: dict[str, str] | None = None


class SeccompProfile(WireStruct):
    """``seccompProfile``: ``RuntimeDefault`` (the container runtime's default filter), ``Localhost`` or
    ``Unconfined``."""

    type: str


class Capabilities(WireStruct):
    """``securityContext.capabilities``: Linux capabilities added to or dropped from the runtime's default set."""

    add: list[str] | None = None
    drop: list[str] | None = None


class SecurityContext(WireStruct):
    """A container's ``securityContext`` (the fields the Pod Security Standards' ``restricted`` profile checks,
    and a read-only root filesystem)."""

    allow_privilege_escalation: bool | None = None
    read_only_root_filesystem: bool | None = None
    run_as_non_root: bool | None = None
    capabilities: Capabilities | None = None
    seccomp_profile: SeccompProfile | None = None


class PodSecurityContext(WireStruct):
    """A pod's ``securityContext``: what applies to every container unless a container says otherwise."""

    run_as_non_root: bool | None = None
    seccomp_profile: SeccompProfile | None = None


class Container(WireStruct):
    """One container: ``image``, optionally ``command`` (replaces the entrypoint) and ``args``."""

    name: str
    image: str
    command: list[str] | None = None
    args: list[str] | None = None
    env: list[EnvVar] | None = None
    image_pull_policy: str | None = None
    """``Always``, ``IfNotPresent`` or ``Never``; unset: the API server's default for the image tag."""
    resources: ResourceRequirements | None = None
    security_context: SecurityContext | None = None


class PodSpec(WireStruct):
    """``spec.template.spec``: the containers and how the pod runs them."""

    containers: list[Container]
    restart_policy: str = "Never"
    """A Job's pods may only use ``Never`` or ``OnFailure``."""
    service_account_name: str | None = None
    security_context: PodSecurityContext | None = None


class PodTemplateSpec(WireStruct):
    """``spec.template``: pod metadata (labels, annotations) and the pod spec."""

    metadata: ObjectMeta | None = None
    spec: PodSpec


class JobSpec(WireStruct):
    """``spec`` of a Job. Unset fields take the API server's defaults (``backoffLimit`` 6, no TTL, no deadline)."""

    template: PodTemplateSpec
    backoff_limit: int | None = None
    """Pod retries before the Job is Failed."""
    active_deadline_seconds: int | None = None
    """Seconds the Job may run, retries included, before it is Failed."""
    ttl_seconds_after_finished: int | None = None
    """Seconds after completion or failure before the Job (and its pods) are deleted."""


class Job(WireStruct):
    """A Job manifest: ``metadata`` (name, namespace, annotations, ownerReferences) and ``spec``.

    ``to_json()`` is the JSON the API server receives; ``shared.kube.patch.apply`` sends it as is.
    """

    RESOURCE: ClassVar[Resource] = JOBS

    api_version: str = JOBS.api_version
    kind: str = JOBS.kind
    metadata: ObjectMeta
    spec: JobSpec


# ── what comes back ──────────────────────────────────────────────────────────


class JobCondition(msgspec.Struct, frozen=True, kw_only=True):
    """``status.conditions[]``: ``type`` (``Complete``, ``Failed``, ``SuccessCriteriaMet``, ``Suspended``…),
    ``status``, and the controller's ``reason`` and ``message``."""

    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


_RUN_CONDITIONS: Final = frozenset({"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"})
"""Condition types that say how a run ends; any other True condition (``Suspended``) holds the Job back."""


class JobWaiting(msgspec.Struct, frozen=True, kw_only=True):
    """Why a Job has no pod: a condition holding it back, or the Job controller's latest Warning Event on it
    (``FailedCreate``: ``Error creating: pods "<job>-" is forbidden: …``)."""

    reason: str
    message: str = ""

    def text(self) -> str:
        """``<reason>: <message>`` (the reason alone when there is no message)."""
        return f"{self.reason}: {self.message}" if self.message else self.reason


class JobStatus(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """``status`` of a Job, the fields that say how it ended or that it has no pod yet."""

    conditions: list[JobCondition] | None = None
    succeeded: int | None = None
    """Pods that completed successfully."""
    failed: int | None = None
    """Pods that failed (a Job with ``backoffLimit: 1`` fails for good after two)."""
    active: int | None = None
    """Pods pending or running."""
    start_time: str | None = None
    """When the Job controller first handled the Job (RFC 3339); absent before, and while suspended."""

    def outcome(self) -> bool | None:
        """True once the Job succeeded (``Complete=True``, or a succeeded pod), False once it failed for good
        (``Failed=True``), None while it runs. The first finished condition decides."""
        for condition in self.conditions or ():
            if condition.status == "True" and condition.type == "Complete":
                return True
            if condition.status == "True" and condition.type == "Failed":
                return False
        return True if (self.succeeded or 0) > 0 else None

    def held(self) -> JobWaiting | None:
        """The first True condition other than those of a run's end (:data:`_RUN_CONDITIONS`), e.g.
        ``Suspended`` (its reason, else its type, and its message); None when there is none."""
        for condition in self.conditions or ():
            if condition.status == "True" and condition.type not in _RUN_CONDITIONS:
                return JobWaiting(reason=condition.reason or condition.type, message=condition.message)
        return None

    def without_pod(self) -> bool:
        """The Job controller has handled the Job (``startTime``) but it has no pod and none has ended:
        not finished, ``active`` 0, no pod succeeded or failed. Its pods are not being created; the
        Job's Warning Events say why."""
        return (self.outcome() is None and self.start_time is not None and not self.active
                and not self.failed and not self.succeeded)


class ObservedJob(msgspec.Struct, frozen=True, kw_only=True):
    """A Job as an informer caches it: metadata and status only (the spec is ours, and not read back)."""

    metadata: ObjectMeta = ObjectMeta()
    status: JobStatus = JobStatus()
