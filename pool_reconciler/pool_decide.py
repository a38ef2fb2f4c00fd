"""The pure EphemeralPool decision: member states, both sizing modes, return policies, status.

``pool_decide(observed) -> PoolDecision`` is the whole pass; the smaller functions are the
spec's decision tables (spec/pool-reconciler.md §7.1, §7.2, §7.5–§7.8) with the corrections
of DESIGN §2.10 (each one a row in docs/divergences.md).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

import msgspec

from pool_reconciler.decision import Event, MemberCreate, MemberDelete, MemberPatch, PoolDecision, PoolObserved
from shared.domain import annotations as ann
from shared.domain import finalizers
from shared.domain.api.codec import format_timestamp, to_wire
from shared.domain.api.lifetime import Lifetime, PermanentLifetime
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.pool import EphemeralPool, MemberState, PoolPhase, ReplacementPolicy, ReturnPolicy
from shared.domain.api.process import Process
from shared.domain.api.signal import ProcessSignal
from shared.domain.duration import DurationError, parse_duration
from shared.domain.group import API_VERSION
from shared.domain.identity import member_process_name
from shared.kube.meta import ObjectMeta, OwnerReference
from shared.kube.patch import annotations_patch

__all__ = [
    "DEFAULT_RESET_IMAGE",
    "ConvergenceAction",
    "LedgerEntry",
    "LegacyDecision",
    "MemberSnapshot",
    "ReturnPlan",
    "belongs_to_pool",
    "decide_pool_convergence",
    "decide_pool_reconcile",
    "member_document",
    "member_state",
    "plan_return",
    "pool_decide",
    "pool_phase",
    "reset_job_name",
]

DEFAULT_RESET_IMAGE: Final = "ghcr.io/pleme-io/pool-reset:latest"
"""The reset Job image when none is configured (spec §7.8)."""

_HEALTHY: Final = frozenset({ProcessPhase.RUNNING, ProcessPhase.ATTESTED})
_FAILED: Final = frozenset({ProcessPhase.FAILED, ProcessPhase.ZOMBIE, ProcessPhase.REAPED})
_STARTING: Final = frozenset(
    {ProcessPhase.PENDING, ProcessPhase.FORKING, ProcessPhase.EXECING, ProcessPhase.RECONVERGING}
)
"""Phases that lead (back) to Attested: counted as supply in desired mode (D3 corrected)."""
_BIND_ANNOTATIONS: Final = (ann.REQUESTOR, ann.REQUESTOR_KIND, ann.ALLOCATION, ann.RETURN_TRIGGER)


# ── membership and member state (§7.5, §7.7) ─────────────────────────────────


def belongs_to_pool(process: Process, pool_name: str) -> bool:
    """True iff the ``tatara.pleme.io/pool`` annotation equals ``pool_name`` exactly (§7.7)."""
    return process.metadata.annotations.get(ann.POOL) == pool_name


def _returning(process: Process) -> bool:
    """Leaving or being returned: deletion started, or the allocation stamped ``return-trigger``."""
    return process.metadata.deletion_timestamp is not None or ann.RETURN_TRIGGER in process.metadata.annotations


def member_state(process: Process) -> MemberState:
    """The member state of a Process (§4.2 / §7.5), plus: a deleting member or one carrying
    ``return-trigger`` is Returning (it is neither free nor supply)."""
    phase = process.phase if process.status is not None else None
    if phase in (ProcessPhase.FAILED, ProcessPhase.REAPED):
        return MemberState.FAILED
    if _returning(process) or phase in (ProcessPhase.EXITING, ProcessPhase.ZOMBIE):
        return MemberState.RETURNING
    if phase is ProcessPhase.ATTESTED:
        return MemberState.ALLOCATED if process.spec.lifetime.is_ephemeral else MemberState.FREE
    return MemberState.SPAWNING


# ── pool phase (§7.6) ────────────────────────────────────────────────────────


def pool_phase(pool: EphemeralPool, states: Sequence[MemberState]) -> PoolPhase:
    """§7.6, with the target taken from the active mode: ``desired`` (supply counts Allocated
    members too, as the desired loop does) or legacy ``desiredSize`` (supply = Free + Spawning)."""
    spec = pool.spec
    if pool.metadata.deletion_timestamp is not None:
        return PoolPhase.DRAINING
    if not states:
        return PoolPhase.INITIALIZING
    counted = {MemberState.FREE, MemberState.SPAWNING}
    if spec.desired > 0:
        counted.add(MemberState.ALLOCATED)
    supply = sum(1 for s in states if s in counted)
    target = spec.desired if spec.desired > 0 else spec.desired_size
    if spec.min_size > 0 and supply < spec.min_size:
        return PoolPhase.DEGRADED
    if supply < target:
        return PoolPhase.SCALING_UP
    if supply > target:
        return PoolPhase.SCALING_DOWN
    return PoolPhase.STEADY


# ── return plan (§7.8) ───────────────────────────────────────────────────────


@dataclass(frozen=True)
class ReturnPlan:
    """What happens to a released member (§7.8): ``DeleteAndRespawn``, ``ResetThenFree`` (with
    ``image``) or ``KeepForInspection``."""

    kind: Literal["DeleteAndRespawn", "ResetThenFree", "KeepForInspection"]
    image: str | None = None


def plan_return(policy: ReturnPolicy, reset_image: str | None = None) -> ReturnPlan:
    """§7.8: Replace → DeleteAndRespawn; Reset → ResetThenFree(image or the default); Keep → keep."""
    if policy is ReturnPolicy.REPLACE:
        return ReturnPlan("DeleteAndRespawn")
    if policy is ReturnPolicy.RESET:
        return ReturnPlan("ResetThenFree", reset_image or DEFAULT_RESET_IMAGE)
    return ReturnPlan("KeepForInspection")


# ── legacy sizing (§7.1) ─────────────────────────────────────────────────────


@dataclass(frozen=True)
class LedgerEntry:
    """One member as the legacy decision sees it (§4.2)."""

    name: str
    state: MemberState
    entered_state_at: datetime


@dataclass(frozen=True)
class LegacyDecision:
    """§7.1 output: ``NoOp``, ``Spawn(count)``, ``ReapExcess(count)``, ``ReplaceMembers(names)`` or ``Drain``."""

    kind: Literal["NoOp", "Spawn", "ReapExcess", "ReplaceMembers", "Drain"]
    count: int = 0
    names: tuple[str, ...] = ()


def _duration_or_zero(text: str) -> float:
    try:
        return parse_duration(text).total_seconds()
    except DurationError:
        return 0.0


def decide_pool_reconcile(
    *,
    deleting: bool,
    desired_size: int,
    min_size: int,
    max_size: int,
    free_ttl: str,
    ledger: Sequence[LedgerEntry],
    now: datetime,
) -> LegacyDecision:
    """The legacy decision table (§7.1), first matching rule wins; counts never go negative."""
    counts = Counter(e.state for e in ledger)
    free, spawning = counts[MemberState.FREE], counts[MemberState.SPAWNING]
    active = len(ledger) - counts[MemberState.FAILED]
    ttl = _duration_or_zero(free_ttl)
    stale = tuple(
        e.name
        for e in ledger
        if ttl > 0 and e.state is MemberState.FREE and (now - e.entered_state_at).total_seconds() > ttl
    )
    failed = tuple(e.name for e in ledger if e.state is MemberState.FAILED)
    budget = max(desired_size - spawning, 0)
    if deleting:
        return LegacyDecision("Drain")
    if failed:
        return LegacyDecision("ReplaceMembers", names=failed)
    if stale:
        return LegacyDecision("ReplaceMembers", names=stale)
    if min_size > 0 and active < min_size:
        return LegacyDecision("Spawn", count=min_size - active)
    if max_size > 0 and active > max_size:
        return LegacyDecision("ReapExcess", count=active - max_size)
    if free + spawning < desired_size:
        return LegacyDecision("Spawn", count=desired_size - (free + spawning))
    if free > budget:
        return LegacyDecision("ReapExcess", count=free - budget)
    return LegacyDecision("NoOp")


# ── desired-count sizing (§7.2, D3 corrected) ────────────────────────────────


@dataclass(frozen=True)
class MemberSnapshot:
    """One member as the desired-count decision sees it (§7.2).

    ``bound``: held by an allocation (or being returned to Free): counted, never scaled down.
    ``leaving``: deletion or a Replace return is under way: not counted, never acted on.
    """

    name: str
    phase: ProcessPhase
    created_at: datetime
    bound: bool = False
    leaving: bool = False

    @property
    def healthy(self) -> bool:
        return self.phase in _HEALTHY

    @property
    def failed(self) -> bool:
        return self.phase in _FAILED

    @property
    def starting(self) -> bool:
        return self.phase in _STARTING


class ConvergenceAction(msgspec.Struct, frozen=True):
    """§7.2 output item: ``CreateMember``, ``SignalSigterm(name)``, ``ReapFailed(name)`` or ``Pause(reason)``."""

    kind: Literal["CreateMember", "SignalSigterm", "ReapFailed", "Pause"]
    name: str = ""
    reason: str = ""


def decide_pool_convergence(
    desired: int, policy: ReplacementPolicy, members: Sequence[MemberSnapshot]
) -> list[ConvergenceAction]:
    """The desired-count decision (§7.2), corrected (D3): members still starting count toward
    ``desired``, so there is no overshoot; scale-down never touches a bound member and removes
    free ones first (oldest first), then starting ones (newest first)."""
    present = [m for m in members if not m.leaving]
    failed = [m for m in present if m.failed]
    if policy.pauses_on_failure and failed:
        return [
            ConvergenceAction("Pause", reason=f"{len(failed)} member(s) reached Failed/Zombie/Reaped; policy=PausePool")
        ]
    actions = [ConvergenceAction("ReapFailed", m.name) for m in failed] if policy.replaces_failed else []
    live = [m for m in present if m.healthy or m.starting]
    if len(live) < desired:
        actions += [ConvergenceAction("CreateMember")] * (desired - len(live))
    elif len(live) > desired:
        free = sorted((m for m in live if m.healthy and not m.bound), key=lambda m: m.created_at)
        starting = sorted((m for m in live if m.starting and not m.bound), key=lambda m: m.created_at, reverse=True)
        victims = (free + starting)[: len(live) - desired]
        actions += [ConvergenceAction("SignalSigterm", m.name) for m in victims]
    return actions


# ── member document (§4.6, §4.7) ─────────────────────────────────────────────


def member_document(pool: EphemeralPool, slot: int) -> dict[str, Any]:
    """The member Process for ``slot`` (§4.7): the template lowered with a permanent lifetime,
    annotations ``pool``/``pool-slot``, one controller ownerReference to the pool.

    Raises ``ValueError`` when the pool has no name or namespace.
    """
    name, namespace, uid = pool.metadata.name, pool.metadata.namespace, pool.metadata.uid
    if not name or not namespace:
        raise ValueError("pool has no metadata.name / metadata.namespace")
    spec = msgspec.structs.replace(
        pool.spec.template.to_process_spec(), lifetime=Lifetime(permanent=PermanentLifetime())
    )
    owners = (
        [
            OwnerReference(
                api_version=API_VERSION,
                kind="EphemeralPool",
                name=name,
                uid=uid,
                controller=True,
                block_owner_deletion=True,
            )
        ]
        if uid
        else []
    )
    meta = ObjectMeta(
        name=member_process_name(name, uid, slot),
        namespace=namespace,
        annotations={ann.POOL: name, ann.POOL_SLOT: str(slot)},
        owner_references=owners,
    )
    doc: dict[str, Any] = to_wire(Process(metadata=meta, spec=spec))
    return doc


def reset_job_name(member: str, allocation: str) -> str:
    """``reset-<16 hex>``: one Job per (member, allocation), short enough for the pod label."""
    return "reset-" + hashlib.sha256(f"{member}/{allocation}".encode()).hexdigest()[:16]


def _reset_job(pool: EphemeralPool, member: Process, image: str) -> dict[str, Any]:
    """The reset Job for a returned member (§4.11 Reset): runs ``image`` with the member's
    identity in the environment; owned by the member Process, so it goes when the member goes."""
    name = member.metadata.name or ""
    allocation = member.metadata.annotations.get(ann.ALLOCATION, "")
    owners = []
    if member.metadata.uid:
        owners.append(
            {
                "apiVersion": API_VERSION,
                "kind": "Process",
                "name": name,
                "uid": member.metadata.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        )
    env = {
        "POOL": pool.metadata.name or "",
        "MEMBER": name,
        "NAMESPACE": member.metadata.namespace or "",
        "ALLOCATION": allocation,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": reset_job_name(name, allocation),
            "namespace": member.metadata.namespace,
            "annotations": {ann.POOL: pool.metadata.name, ann.ALLOCATION: allocation, ann.PROCESS: name},
            "ownerReferences": owners,
        },
        "spec": {
            "backoffLimit": 2,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "reset", "image": image, "env": [{"name": k, "value": v} for k, v in env.items()]}
                    ],
                }
            },
        },
    }


# ── the pass ─────────────────────────────────────────────────────────────────


def _guarded(process: Process, patch: dict[str, Any], reason: str) -> MemberPatch:
    rv = process.metadata.resource_version
    body = {**patch, "metadata": {**patch.get("metadata", {}), **({"resourceVersion": rv} if rv else {})}}
    return MemberPatch(name=process.metadata.name or "", patch=body, reason=reason, resource_version=rv)


def _keep_patch(process: Process, reason: str) -> MemberPatch:
    """Back to Free (§4.11 Keep): permanent lifetime only, bind annotations stripped."""
    patch = {
        "metadata": annotations_patch(dict.fromkeys(_BIND_ANNOTATIONS))["metadata"],
        "spec": {"lifetime": {"permanent": {}, "ephemeral": None}},
    }
    return _guarded(process, patch, reason)


@dataclass
class _Effects:
    patch: list[MemberPatch]
    delete: list[MemberDelete]
    apply: list[dict[str, Any]]
    events: list[Event]


def _return_member(obs: PoolObserved, m: Process, fx: _Effects) -> None:
    """Apply the pool's return policy to one member stamped ``return-trigger`` (§4.11, D5 corrected)."""
    name = m.metadata.name or ""
    plan = plan_return(obs.pool.spec.return_policy, obs.reset_image)
    if plan.kind == "ResetThenFree":
        job = reset_job_name(name, m.metadata.annotations.get(ann.ALLOCATION, ""))
        if job not in obs.reset_jobs:
            fx.apply.append(_reset_job(obs.pool, m, plan.image or DEFAULT_RESET_IMAGE))
            fx.events.append(Event("Normal", "ResetStarted", f"reset Job {job} started for member {name}"))
            return
        outcome = obs.reset_jobs[job]
        if outcome is None:
            return
        if outcome:
            fx.patch.append(_keep_patch(m, "ReturnReset"))
            fx.events.append(Event("Normal", "MemberReturned", f"member {name} reset and free again"))
            return
        fx.events.append(Event("Warning", "ResetFailed", f"reset Job {job} failed; replacing member {name}"))
    elif plan.kind == "KeepForInspection":
        fx.patch.append(_keep_patch(m, "ReturnKeep"))
        fx.events.append(Event("Normal", "MemberReturned", f"member {name} free again (Keep)"))
        return
    # Replace (or a failed reset): SIGTERM so exports run in Releasing; delete once finished.
    if m.phase in _FAILED:
        fx.delete.append(MemberDelete(name, "ReturnReplace"))
    elif m.phase not in (ProcessPhase.RELEASING, ProcessPhase.EXITING) and ann.SIGNAL not in m.metadata.annotations:
        fx.patch.append(
            MemberPatch(name, annotations_patch({ann.SIGNAL: ProcessSignal.SIGTERM.value}), "ReturnReplace")
        )
        fx.events.append(Event("Normal", "MemberReplacing", f"member {name} returned; SIGTERM sent (Replace)"))


def _free_slots(pool: EphemeralPool, taken: set[str], count: int) -> list[tuple[int, str]]:
    """The first ``count`` slots whose member name is not held by a current member (§4.6)."""
    out: list[tuple[int, str]] = []
    slot = 0
    while len(out) < count:
        name = member_process_name(pool.metadata.name or "", pool.metadata.uid, slot)
        if name not in taken:
            out.append((slot, name))
        slot += 1
    return out


def _entered_at(m: Process, now: datetime) -> datetime:
    """The Process's ``phaseSince``, else its creation time (stable, unlike ``now``: D2), else now."""
    if m.status is not None and m.status.phase_since is not None:
        return m.status.phase_since
    return m.metadata.creation_timestamp or now


def _status_patch(
    obs: PoolObserved, members: Sequence[Process], states: Sequence[MemberState], message: str | None
) -> dict[str, Any] | None:
    """``{"status": …}`` (§4.8) when anything differs from the stored status, else None (D2)."""
    pool, now = obs.pool, obs.now
    phase = pool_phase(pool, states)
    old = pool.status
    counts = Counter(states)
    rows = []
    for m, s in zip(members, states, strict=True):
        row: dict[str, Any] = {
            "processName": m.metadata.name,
            "state": s.value,
            "enteredStateAt": format_timestamp(_entered_at(m, now)),
        }
        alloc = m.metadata.annotations.get(ann.ALLOCATION)
        if alloc and s in (MemberState.ALLOCATED, MemberState.RETURNING):
            row["allocationRef"] = {"name": alloc, "namespace": m.metadata.namespace}
        rows.append(row)
    ready = phase is PoolPhase.STEADY
    reason = phase.value
    old_cond = next((c for c in (old.conditions if old else []) if c.type_ == "Ready"), None)
    cond_status = "True" if ready else "False"
    cond_msg = message or f"pool is {phase.value}"
    transition = (
        old_cond.last_transition_time
        if old_cond is not None and old_cond.status == cond_status and old_cond.reason == reason
        else now
    )
    body: dict[str, Any] = {
        "phase": phase.value,
        "readyCount": counts[MemberState.FREE],
        "allocatedCount": counts[MemberState.ALLOCATED],
        "spawningCount": counts[MemberState.SPAWNING],
        "returningCount": counts[MemberState.RETURNING],
        "members": rows,
        "message": message,
        "conditions": [
            {
                "type": "Ready",
                "status": cond_status,
                "reason": reason,
                "message": cond_msg,
                "lastTransitionTime": format_timestamp(transition),
            }
        ],
    }
    current = to_wire(old) if old is not None else {}
    current.setdefault("message", None)
    if old is not None and all(current.get(k) == v for k, v in body.items()):
        return None
    same_phase = old is not None and old.phase is phase and old.phase_since is not None
    body["phaseSince"] = format_timestamp(old.phase_since if same_phase and old and old.phase_since else now)
    return {"status": body}


def _decision_state(obs: PoolObserved, m: Process, state: MemberState) -> MemberState:
    """Legacy decisions see a member being returned to Free (Keep/Reset) as Spawning: it will be
    supply again, so no replacement is spawned for it."""
    if (
        state is MemberState.RETURNING
        and m.metadata.deletion_timestamp is None
        and ann.RETURN_TRIGGER in m.metadata.annotations
        and obs.pool.spec.return_policy.keeps_process
    ):
        return MemberState.SPAWNING
    return state


def pool_decide(obs: PoolObserved) -> PoolDecision:
    """One EphemeralPool pass (spec §4.1, corrected per DESIGN §2.10).

    Finalizer first; on deletion every member is deleted and the finalizer released once none
    remain (both modes; D4, D14). Otherwise members stamped ``return-trigger`` follow the return
    policy, then the active sizing mode (desired-count §7.2 when ``spec.desired > 0``, else legacy
    §7.1) yields creates/deletes. Status is written only when it changes.
    """
    pool, now = obs.pool, obs.now
    pool_name = pool.metadata.name or ""
    members = sorted((m for m in obs.members if belongs_to_pool(m, pool_name)), key=lambda m: m.metadata.name or "")
    states = [member_state(m) for m in members]
    deleting = pool.metadata.deletion_timestamp is not None
    has_finalizer = finalizers.POOL in pool.metadata.finalizers
    fx = _Effects([], [], [], [])
    creates: list[MemberCreate] = []
    message: str | None = None
    counts = {s.value: sum(1 for x in states if x is s) for s in MemberState.all()}

    if deleting:
        for m in members:
            if m.metadata.deletion_timestamp is None:
                fx.delete.append(MemberDelete(m.metadata.name or "", "Drain"))
        done = not members
        status = _status_patch(obs, members, states, None) if not done else None
        return PoolDecision(
            delete=tuple(fx.delete),
            status=status,
            remove_finalizer=done and has_finalizer,
            events=(Event("Normal", "Draining", f"deleting {len(fx.delete)} member(s)"),) if fx.delete else (),
            member_counts=counts,
            requeue_after=None if done else obs.heartbeat_seconds,
        )

    problems = pool.spec.template.to_process_spec().problems()
    for m in members:
        if ann.RETURN_TRIGGER in m.metadata.annotations and m.metadata.deletion_timestamp is None:
            _return_member(obs, m, fx)

    spawn = 0
    if pool.spec.desired > 0:
        snapshots = [_snapshot(obs, m) for m in members]
        for action in decide_pool_convergence(pool.spec.desired, pool.spec.replacement_policy, snapshots):
            if action.kind == "CreateMember":
                spawn += 1
            elif action.kind == "Pause":
                message = action.reason
            else:
                fx.delete.append(
                    MemberDelete(action.name, "ScaleDown" if action.kind == "SignalSigterm" else "ReplaceFailed")
                )
    else:
        ledger = [
            LedgerEntry(m.metadata.name or "", _decision_state(obs, m, s), _entered_at(m, now))
            for m, s in zip(members, states, strict=True)
        ]
        legacy = decide_pool_reconcile(
            deleting=False,
            desired_size=pool.spec.desired_size,
            min_size=pool.spec.min_size,
            max_size=pool.spec.max_size,
            free_ttl=pool.spec.free_ttl,
            ledger=ledger,
            now=now,
        )
        by_name = {m.metadata.name: m for m in members}
        if legacy.kind == "Spawn":
            spawn = legacy.count
        elif legacy.kind == "ReplaceMembers":
            fx.delete += [
                MemberDelete(n, "Replace") for n in legacy.names if by_name[n].metadata.deletion_timestamp is None
            ]
        elif legacy.kind == "ReapExcess":
            free = [e.name for e in ledger if e.state is MemberState.FREE]
            fx.delete += [MemberDelete(n, "ScaleDown") for n in free[: legacy.count]]

    if spawn and problems:
        message = "invalid template: " + "; ".join(problems)
        fx.events.append(Event("Warning", "InvalidTemplate", message))
    elif spawn:
        taken = {m.metadata.name or "" for m in members}
        for slot, name in _free_slots(pool, taken, spawn):
            creates.append(MemberCreate(slot, name, member_document(pool, slot)))
        fx.events.append(Event("Normal", "MembersCreated", f"creating {spawn} member(s)"))
    if message and not problems:
        fx.events.append(Event("Warning", "Paused", message))
    scale = [d.name for d in fx.delete if d.reason in ("ScaleDown", "Replace", "ReplaceFailed")]
    if scale:
        fx.events.append(Event("Normal", "MembersDeleted", "deleting " + ", ".join(scale)))

    deletes = tuple({d.name: d for d in fx.delete}.values())
    gone = {d.name for d in deletes}
    return PoolDecision(
        create=tuple(creates),
        patch=tuple(p for p in fx.patch if p.name not in gone),
        delete=deletes,
        apply=tuple(fx.apply),
        status=_status_patch(obs, members, states, message),
        add_finalizer=not has_finalizer,
        events=tuple(fx.events),
        member_counts=counts,
        requeue_after=obs.heartbeat_seconds,
    )


def _snapshot(obs: PoolObserved, m: Process) -> MemberSnapshot:
    """The §7.2 snapshot of a member, with ``bound`` / ``leaving`` from its annotations."""
    triggered = ann.RETURN_TRIGGER in m.metadata.annotations
    keeps = obs.pool.spec.return_policy.keeps_process
    leaving = m.metadata.deletion_timestamp is not None or (triggered and not keeps)
    bound = m.spec.lifetime.is_ephemeral or ann.ALLOCATION in m.metadata.annotations
    return MemberSnapshot(
        name=m.metadata.name or "",
        phase=m.phase if m.status is not None else ProcessPhase.PENDING,
        created_at=m.metadata.creation_timestamp or obs.now,
        bound=bound,
        leaving=leaving,
    )
