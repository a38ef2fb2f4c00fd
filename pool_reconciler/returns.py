"""Member returns: what the pool does with a member its allocation gave back (``return-trigger`` stamped).

The pool's ``returnPolicy`` picks the plan (:func:`plan_return`): Keep frees the member at once (one
guarded patch back to a permanent lifetime, bind annotations stripped); Reset first runs a reset Job
and frees the member once it succeeds (a failed Job falls back to Replace); Replace sends SIGTERM
through the signal annotation, so the member's exports run, and deletes it once it is Failed
(docs/behaviour.md#return-policies).

Also here: how a return is counted once in ``tatara_pool_releases_total`` however often a pass
repeats its patch (:func:`return_mark`, a pure function of what the API server returned).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final, Literal

from msgspec import UNSET

from pool_reconciler.decision import MemberDelete, MemberPatch, MemberWrite, PoolObserved
from pool_reconciler.patches import LifetimePatch, MetadataPatch, ProcessPatch, SpecPatch, annotate
from pool_reconciler.reasons import PoolReason
from shared.domain import annotations as ann
from shared.domain.api.lifetime import PermanentLifetime
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.pool import EphemeralPool, ReturnPolicy
from shared.domain.api.process import Process
from shared.domain.api.signal import ProcessSignal
from shared.domain.group import API_VERSION
from shared.domain.manifests.batch import Container, EnvVar, Job, JobSpec, PodSpec, PodTemplateSpec
from shared.kube.events import Event
from shared.kube.meta import ObjectMeta, OwnerReference

__all__ = [
    "BIND_ANNOTATIONS",
    "DEFAULT_RESET_IMAGE",
    "ReturnMark",
    "ReturnPlan",
    "ReturnWrites",
    "SeenReturns",
    "keep_patch",
    "plan_return",
    "reset_job",
    "reset_job_name",
    "return_mark",
    "return_member",
]

DEFAULT_RESET_IMAGE: Final = "ghcr.io/pleme-io/pool-reset:latest"
"""The reset Job image when none is configured."""

BIND_ANNOTATIONS: Final = (ann.REQUESTOR, ann.REQUESTOR_KIND, ann.ALLOCATION, ann.RETURN_TRIGGER)
"""What a bind (and its release) stamps on a member; a return strips them all."""

_DONE_PHASES: Final = frozenset({ProcessPhase.FAILED, ProcessPhase.ZOMBIE, ProcessPhase.REAPED})
_SIGTERM_UNDER_WAY: Final = frozenset({ProcessPhase.RELEASING, ProcessPhase.EXITING})


@dataclass(frozen=True)
class ReturnPlan:
    """What happens to a returned member: ``DeleteAndRespawn``, ``ResetThenFree`` (with ``image``) or
    ``KeepForInspection``."""

    kind: Literal["DeleteAndRespawn", "ResetThenFree", "KeepForInspection"]
    image: str | None = None


def plan_return(policy: ReturnPolicy, reset_image: str | None = None) -> ReturnPlan:
    """Replace → DeleteAndRespawn; Reset → ResetThenFree(``reset_image`` or the default); Keep → keep."""
    if policy is ReturnPolicy.REPLACE:
        return ReturnPlan("DeleteAndRespawn")
    if policy is ReturnPolicy.RESET:
        return ReturnPlan("ResetThenFree", reset_image or DEFAULT_RESET_IMAGE)
    return ReturnPlan("KeepForInspection")


@dataclass(frozen=True)
class ReturnWrites:
    """What returning one member writes (each part possibly empty)."""

    patch: tuple[MemberPatch, ...] = ()
    delete: tuple[MemberDelete, ...] = ()
    apply: tuple[Job, ...] = ()
    events: tuple[Event, ...] = ()

    def __add__(self, other: ReturnWrites) -> ReturnWrites:
        return ReturnWrites(self.patch + other.patch, self.delete + other.delete, self.apply + other.apply,
                            self.events + other.events)


# ── the writes ───────────────────────────────────────────────────────────────


def keep_patch(process: Process, reason: MemberWrite) -> MemberPatch:
    """Back to Free: a permanent lifetime only, the bind annotations stripped, guarded by the member's
    resourceVersion (a member that changed meanwhile is decided again)."""
    rv = process.metadata.resource_version
    patch = ProcessPatch(
        metadata=MetadataPatch(annotations=dict.fromkeys(BIND_ANNOTATIONS), resource_version=rv or UNSET),
        spec=SpecPatch(lifetime=LifetimePatch(permanent=PermanentLifetime(), ephemeral=None)),
    )
    return MemberPatch(process.metadata.name or "", patch, reason)


def reset_job_name(member: str, allocation: str) -> str:
    """``reset-<16 hex>`` (SHA-256 of ``<member>/<allocation>``): one Job per (member, allocation), short
    enough for the pod's ``job-name`` label."""
    return "reset-" + hashlib.sha256(f"{member}/{allocation}".encode()).hexdigest()[:16]


def reset_job(pool: EphemeralPool, member: Process, image: str) -> Job:
    """The reset Job of a returned member: runs ``image`` once (2 retries, kept 1 h after it ends) with
    ``POOL``, ``MEMBER``, ``NAMESPACE`` and ``ALLOCATION`` in its environment; annotated with the pool,
    allocation and member, and owned by the member Process, so it goes when the member goes."""
    name = member.metadata.name or ""
    allocation = member.metadata.annotations.get(ann.ALLOCATION, "")
    owners = [OwnerReference(api_version=API_VERSION, kind="Process", name=name, uid=member.metadata.uid,
                             controller=True, block_owner_deletion=True)] if member.metadata.uid else []
    env = {"POOL": pool.metadata.name or "", "MEMBER": name, "NAMESPACE": member.metadata.namespace or "",
           "ALLOCATION": allocation}
    container = Container(name="reset", image=image, env=[EnvVar(name=k, value=v) for k, v in env.items()])
    return Job(
        metadata=ObjectMeta(
            name=reset_job_name(name, allocation),
            namespace=member.metadata.namespace,
            annotations={ann.POOL: pool.metadata.name or "", ann.ALLOCATION: allocation, ann.PROCESS: name},
            owner_references=owners,
        ),
        spec=JobSpec(backoff_limit=2, ttl_seconds_after_finished=3600,
                     template=PodTemplateSpec(spec=PodSpec(restart_policy="Never", containers=[container]))),
    )


# ── one member's return ──────────────────────────────────────────────────────


def _keep(member: Process) -> ReturnWrites:
    name = member.metadata.name or ""
    return ReturnWrites(patch=(keep_patch(member, MemberWrite.RETURN_KEEP),),
                        events=(Event.normal(PoolReason.MEMBER_RETURNED, f"member {name} free again (Keep)"),))


def _reset(obs: PoolObserved, member: Process, image: str) -> ReturnWrites | None:
    """Start the reset Job, wait for it, free the member once it succeeded; None once it failed (replace)."""
    name = member.metadata.name or ""
    job = reset_job_name(name, member.metadata.annotations.get(ann.ALLOCATION, ""))
    if job not in obs.reset_jobs:
        return ReturnWrites(apply=(reset_job(obs.pool, member, image),),
                            events=(Event.normal(PoolReason.RESET_STARTED,
                                                 f"reset Job {job} started for member {name}"),))
    outcome = obs.reset_jobs[job]
    if outcome is None:
        return ReturnWrites()
    if outcome:
        return ReturnWrites(patch=(keep_patch(member, MemberWrite.RETURN_RESET),),
                            events=(Event.normal(PoolReason.MEMBER_RETURNED, f"member {name} reset and free again"),))
    return None


def _replace(member: Process) -> ReturnWrites:
    """SIGTERM once (so exports run while it is Releasing), delete once it is done."""
    name = member.metadata.name or ""
    if member.phase in _DONE_PHASES:
        return ReturnWrites(delete=(MemberDelete(name, "ReturnReplace"),))
    if member.phase in _SIGTERM_UNDER_WAY or ann.SIGNAL in member.metadata.annotations:
        return ReturnWrites()
    sigterm = MemberPatch(name, annotate({ann.SIGNAL: ProcessSignal.SIGTERM.value}), MemberWrite.RETURN_REPLACE)
    return ReturnWrites(patch=(sigterm,),
                        events=(Event.normal(PoolReason.MEMBER_REPLACING,
                                             f"member {name} returned; SIGTERM sent (Replace)"),))


def return_member(obs: PoolObserved, member: Process) -> ReturnWrites:
    """The pool's return policy applied to one member stamped ``return-trigger``."""
    plan = plan_return(obs.pool.spec.return_policy, obs.reset_image)
    if plan.kind == "KeepForInspection":
        return _keep(member)
    if plan.kind == "ResetThenFree":
        reset = _reset(obs, member, plan.image or DEFAULT_RESET_IMAGE)
        if reset is not None:
            return reset
        job = reset_job_name(member.metadata.name or "", member.metadata.annotations.get(ann.ALLOCATION, ""))
        failed = Event.warning(PoolReason.RESET_FAILED,
                               f"reset Job {job} failed; replacing member {member.metadata.name}")
        return ReturnWrites(events=(failed,)) + _replace(member)
    return _replace(member)


# ── counting a return once ───────────────────────────────────────────────────


@dataclass(frozen=True)
class ReturnMark:
    """What identifies one return: a pass that repeats a return patch yields the same mark."""

    key: tuple[str, ...]
    token: str


def return_mark(namespace: str, patch: MemberPatch, stored: ObjectMeta) -> ReturnMark | None:
    """The mark of a return patch, from the member the API server returned for it (``stored``); None when
    ``patch`` is not a return step.

    Replace: the member's uid — a member is replaced once in its life, so a SIGTERM re-sent while the
    Process reconciler is between stripping the signal and writing Exiting is the same return. Keep and
    Reset: the member's resourceVersion — a merge patch that changes nothing (a pass repeated on a
    lagging cache) leaves it as it was, a real return moves it on.
    """
    if patch.reason.return_outcome is None:
        return None
    if patch.reason is MemberWrite.RETURN_REPLACE:
        return ReturnMark(("replaced", stored.uid or ""), "")
    return ReturnMark((namespace, patch.name, patch.reason.value), stored.resource_version or "")


class SeenReturns:
    """The last :data:`capacity` return marks, by key, least recently seen dropped first."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._tokens: OrderedDict[tuple[str, ...], str] = OrderedDict()

    def first_time(self, mark: ReturnMark) -> bool:
        """Record ``mark``; True unless the same mark was the last one recorded for its key."""
        new = self._tokens.get(mark.key) != mark.token
        self._tokens[mark.key] = mark.token
        self._tokens.move_to_end(mark.key)
        while len(self._tokens) > self.capacity:
            self._tokens.popitem(last=False)
        return new
