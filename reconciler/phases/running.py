"""Running and Attested: wait for every child's Ready and the postconditions, attest, then keep
checking on the heartbeat (docs/behaviour.md#running, docs/behaviour.md#attested,
docs/behaviour.md#spec-changes)."""

from __future__ import annotations

from collections.abc import Sequence

from msgspec import UNSET

from reconciler import lifetime_clock
from reconciler.attestation import attest_process
from reconciler.children import ChildRef, served_api_version
from reconciler.decision import Decision, Observed
from reconciler.phases.checks import cel_events, cel_type_stall, rows_differ
from reconciler.phases.common import (
    EXIT_CHILD_STALLED,
    Deps,
    clock_exit,
    converging_wait,
    fail,
    heartbeat,
    message_write,
    status_message,
    timed_out,
)
from reconciler.reasons import Reason
from reconciler.status_patch import BoundaryPatch, StatusPatch, merged
from reconciler.timing import SHORT, TICK
from reconciler.transitions import phase_write
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import CheckedCondition, FluxResourceRef
from shared.domain.identity import intent_hash
from shared.kube.events import Event

__all__ = ["CHILD_NOT_READY", "decide_attested", "decide_running", "spec_changed"]

_P = ProcessPhase


def spec_changed(observed: Observed) -> Decision | None:
    """→ Reconverging (reason ``SpecChanged``) when ``metadata.generation`` moved past the
    ``status.observedGeneration`` the children were rendered for, as a Flux object reconciles a new
    generation by itself (docs/behaviour.md#spec-changes). None when it did not, when the status
    predates ``observedGeneration``, or, in Attested, when ``spec.intent`` (what the children are
    rendered from) is the one attested: then :func:`reconciler.status.with_fresh_status` only marks the generation
    observed (a pool's bind patches a member's lifetime; routing is repaired in place and the
    postconditions are checked on every heartbeat anyway)."""
    process = observed.process
    status = process.status
    seen = status.observed_generation if status is not None else None
    generation = process.metadata.generation
    if status is None or seen is None or generation is None or seen == generation:
        return None
    if (process.phase is _P.ATTESTED and status.attestation is not None
            and status.attestation.intent_hash == intent_hash(process.spec.intent)):
        return None
    return phase_write(observed, _P.RECONVERGING, f"spec changed: generation {seen} → {generation}",
                       reason=Reason.SPEC_CHANGED, requeue_after=TICK)


def _observe_refs(observed: Observed) -> tuple[list[FluxResourceRef], bool, ChildRef | None]:
    """(refs with fresh ready/message, any changed, first stalled child) from the child cache.

    A ref written at another version of its kind (the reference's ``v1beta2`` OCIRepository) is looked up
    at the version we cache it at, and kept as written: the stored attestation's ``artifactHash`` is over
    the refs' apiVersions (docs/migration.md#v1beta2-refs); the next render writes refs of its own.

    ``lastCheck`` moves only when a ref's readiness or message changes (no write while waiting).
    """
    status = observed.process.status
    refs = list(status.flux_resources) if status is not None else []
    out: list[FluxResourceRef] = []
    changed = False
    stalled: ChildRef | None = None
    for ref in refs:
        served = served_api_version(ref.api_version, ref.kind)
        key = ChildRef(served, ref.kind, ref.namespace, ref.name)
        state = observed.children.get(key)
        message: str | None
        if state is None:
            ready, message = False, "not yet observed"
        else:
            ready = state.ready is True
            message = None if ready else (state.message or "not yet observed")
            if state.stalled and stalled is None:
                stalled = key
        if (ref.ready, ref.message) != (ready, message):
            changed = True
            ref = FluxResourceRef(
                api_version=ref.api_version,
                kind=ref.kind,
                name=ref.name,
                namespace=ref.namespace,
                ready=ready,
                message=message,
                last_check=observed.now,
            )
        out.append(ref)
    return out, changed, stalled


CHILD_NOT_READY = Reason.CHILD_NOT_READY
"""Reason of a Running Process whose child Flux reports ``Ready=False`` (still retried, not stalled)."""


def _failing_child_message(observed: Observed, refs: Sequence[FluxResourceRef]) -> str | None:
    """``<Kind> <ns>/<name> not ready: <reason>: <message>`` for the first child Flux reports ``Ready=False``
    (docs/behaviour.md#running), None when no child has failed (they are only in progress)."""
    for ref in refs:
        state = observed.children.get(ChildRef(ref.api_version, ref.kind, ref.namespace, ref.name))
        if state is not None and state.ready is False:
            detail = ": ".join(part for part in (state.reason, state.message) if part) or "Ready=False"
            return f"{ref.kind} {ref.namespace}/{ref.name} not ready: {detail}"
    return None


def decide_running(observed: Observed, deps: Deps) -> Decision:
    """Deploy and verify: TTL → Exiting; a new generation → Reconverging (:func:`spec_changed`); a stalled
    child or the boundary timeout → Failed; wait for every child's Ready and the postconditions;
    then attest → Attested."""
    process = observed.process
    fired = lifetime_clock.evaluate(process, _P.RUNNING, observed.now)
    if fired is not None:
        return phase_write(observed, _P.EXITING, fired, reason=Reason.LIFETIME_EXPIRED, requeue_after=TICK)
    changed_spec = spec_changed(observed)
    if changed_spec is not None:
        return changed_spec

    refs, changed, stalled = _observe_refs(observed)
    if stalled is not None:
        state = observed.children[stalled]
        detail = state.message or state.reason or "terminal failure"
        return fail(
            observed,
            f"{stalled.kind} {stalled.namespace}/{stalled.name} failed: {detail}",
            reason=Reason.CHILD_STALLED,
            exit_code=EXIT_CHILD_STALLED,
        )
    late = timed_out(observed)
    if late is not None:
        return late

    fresh = StatusPatch(flux_resources=refs) if changed else None
    wait = converging_wait(observed, min(observed.heartbeat_seconds, heartbeat(observed)))
    if not all(r.ready for r in refs):
        failing = _failing_child_message(observed, refs)
        if failing is None or failing == status_message(process):
            return Decision(status=fresh, requeue_after=wait)
        status = merged(message_write(observed, failing, reason=CHILD_NOT_READY), fresh)
        return Decision(status=status, events=(Event.warning(CHILD_NOT_READY, failing),), requeue_after=wait)

    post = process.spec.boundary.postconditions
    rows: tuple[CheckedCondition, ...] = ()
    if post:
        result = deps.evaluate(post, observed)
        old = process.status.boundary.postconditions if process.status is not None else []
        rows = result.rows
        if not result.satisfied:
            typed = cel_type_stall(observed, "postconditions", old, rows, requeue_after=wait, extra=fresh)
            if typed is not None:
                return typed
            if rows_differ(old, rows) or status_message(process) != "waiting on postconditions":
                waiting = message_write(observed, "waiting on postconditions", reason=Reason.POSTCONDITIONS_UNMET)
                status = merged(waiting, StatusPatch(boundary=BoundaryPatch(postconditions=list(rows))))
                events = cel_events("postconditions", old, rows)
                return Decision(status=merged(status, fresh), events=events, requeue_after=wait)
            return Decision(status=fresh, requeue_after=wait)

    attestation = attest_process(process, now=observed.now, children=refs)
    attested = StatusPatch(
        attestation=attestation,
        boundary=BoundaryPatch(deadline=None, postconditions=list(rows) if rows else UNSET),
    )
    # Our own status write does not requeue us (status-only updates are filtered), so when the
    # teardown policy fires on Attested, come back at TICK rather than a HEARTBEAT later.
    tears_down = lifetime_clock.evaluate(process, _P.ATTESTED, observed.now) is not None
    return phase_write(
        observed,
        _P.ATTESTED,
        f"attested generation {attestation.generation}",
        reason=Reason.ATTESTED,
        requeue_after=TICK if tears_down else heartbeat(observed),
        extra=merged(fresh or StatusPatch(), attested),
    )


def decide_attested(observed: Observed, deps: Deps) -> Decision:
    """The heartbeat: lifetime clock → Releasing/Exiting; a new generation (:func:`spec_changed`), a
    child not Ready or a postcondition no longer holding → Reconverging; otherwise no writes (routing
    children are repaired in place by :func:`reconciler.routing.with_routing`)."""
    process = observed.process
    fired = lifetime_clock.evaluate(process, _P.ATTESTED, observed.now)
    if fired is not None:
        return clock_exit(observed, fired, _P.ATTESTED, _P.EXITING)
    changed_spec = spec_changed(observed)
    if changed_spec is not None:
        return changed_spec
    refs, _, _ = _observe_refs(observed)
    if not all(r.ready for r in refs):
        return phase_write(
            observed,
            _P.RECONVERGING,
            "flux resource drift detected",
            reason=Reason.DRIFT,
            requeue_after=SHORT,
            extra=StatusPatch(flux_resources=refs),
        )
    post = process.spec.boundary.postconditions
    if post:
        result = deps.evaluate(post, observed)
        if not result.satisfied:
            failing = "; ".join(f"{r.kind.value}: {r.message}" for r in result.rows if not r.satisfied)
            return phase_write(
                observed,
                _P.RECONVERGING,
                f"postcondition drift detected: {failing}",
                reason=Reason.DRIFT,
                requeue_after=SHORT,
                extra=StatusPatch(boundary=BoundaryPatch(postconditions=list(result.rows))),
            )
    return Decision(requeue_after=heartbeat(observed))
