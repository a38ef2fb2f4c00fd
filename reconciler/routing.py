"""A Process's routing children kept equal to its render, and its standing on the stable names it bids for.

Pure: rendered manifests, cached children and claims in; what to apply, what to delete and the
``StableName`` condition out (docs/behaviour.md#ingress-and-dnsendpoint,
docs/behaviour.md#stable-name-claims).

- :func:`plan_routing`: the owned routing children (Ingress, DNSEndpoint) the current render does not
  produce are deleted (a stable name lost or released, a hostname edited away); the rendered ones of
  the forms asked for are applied again when missing from the cache or when the cached object's
  ``spec`` or labels no longer contain what we render (a hand edit). Annotations are not compared:
  the stamps ``generation`` / ``attestation-root`` move with every attestation.
- :func:`stable_name_condition`: the ``StableName`` condition of a bidder, written only when its
  status, reason or message changes (so its Event is recorded once per change).
- :func:`with_routing`: a phase decision completed with the routing upkeep of its Process (the two above,
  make after break, the claims given up on leaving Running or Attested).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from msgspec import UNSET

from reconciler.children import ChildRef, ChildState, is_flux_resource
from reconciler.claims import ELIGIBLE_PHASES, ClaimStanding, claims_after, holder_keys, process_ref, standing
from reconciler.decision import Decision, Observed
from reconciler.reasons import Reason
from reconciler.render import IntentNotSupported, Manifest, RenderError, manifest_ref
from reconciler.status_patch import StatusPatch, merged
from shared.domain import labels
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import ProcessCondition
from shared.domain.api.tagged_union import VariantError
from shared.domain.manifests.batch import Job
from shared.domain.resources import DNS_ENDPOINTS, INGRESSES
from shared.kube.events import Event
from shared.kube.meta import as_json

__all__ = [
    "INSTANCE",
    "REASON_GRANTED",
    "REASON_HELD",
    "REASON_RELEASED",
    "ROUTING_KINDS",
    "STABLE",
    "STABLE_NAME",
    "RoutingPlan",
    "contains",
    "drift",
    "make_after_break",
    "plan_routing",
    "served_hosts",
    "stable_name_condition",
    "with_routing",
]

STABLE_NAME: Final = "StableName"
"""Condition type: True while the Process holds every stable name it bids for."""

REASON_GRANTED: Final = Reason.STABLE_NAME_GRANTED
REASON_HELD: Final = Reason.STABLE_NAME_HELD
"""Another Process holds a stable name this one bids for (the message names it ``<namespace>/<name>``)."""
REASON_RELEASED: Final = Reason.STABLE_NAME_RELEASED

INSTANCE: Final = "instance"
STABLE: Final = "stable"
"""Values of the ``routing-form`` label."""

ROUTING_KINDS: Final = frozenset({(INGRESSES.api_version, INGRESSES.kind),
                                  (DNS_ENDPOINTS.api_version, DNS_ENDPOINTS.kind)})


@dataclass(frozen=True)
class RoutingPlan:
    """``apply``: rendered routing manifests to server-side apply again, in render order; ``delete``:
    owned routing children no longer rendered; ``drift``: ``"<Kind> <ns>/<name> missing|changed"`` for
    each of ``apply``."""

    apply: tuple[Manifest, ...] = ()
    delete: tuple[ChildRef, ...] = ()
    drift: tuple[str, ...] = ()


def contains(have: object, want: object) -> bool:
    """Whether JSON value ``have`` holds ``want``: every key of an object (recursively; extra keys in
    ``have``, such as server defaults, are allowed), lists of the same length element by element,
    scalars equal by JSON type (``true`` ≠ ``1``, ``1`` = ``1.0``)."""
    if isinstance(want, Mapping):
        return isinstance(have, Mapping) and all(k in have and contains(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return (isinstance(have, list) and len(have) == len(want)
                and all(contains(h, w) for h, w in zip(have, want, strict=True)))
    if isinstance(want, bool) or isinstance(have, bool):
        return have is want
    if isinstance(want, int | float) and isinstance(have, int | float):
        return have == want
    return type(have) is type(want) and have == want


def _section(doc: Mapping[str, object], *path: str) -> object:
    value: object = doc
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if value is not None else {}


def drift(manifest: Manifest, cached: ChildState | None) -> str | None:
    """``"missing"`` when nothing is cached, ``"changed"`` when the cached ``spec`` or labels lack what
    ``manifest`` renders, else None."""
    if cached is None:
        return "missing"
    wanted = as_json(manifest)
    for path in (("spec",), ("metadata", "labels")):
        if not contains(_section(cached.object, *path), _section(wanted, *path)):
            return "changed"
    return None


def _owned_routing(children: Mapping[ChildRef, ChildState], owner_uid: str) -> list[ChildRef]:
    """Cached routing children whose controller ownerReference is ``owner_uid`` (not the objects a
    boundary condition merely names)."""
    out = []
    for ref, state in children.items():
        if (ref.api_version, ref.kind) not in ROUTING_KINDS:
            continue
        owners = _section(state.object, "metadata", "ownerReferences")
        if isinstance(owners, list) and any(isinstance(o, Mapping) and o.get("controller") is True
                                            and o.get("uid") == owner_uid for o in owners):
            out.append(ref)
    return out


def _form(manifest: Manifest) -> str:
    return manifest.metadata.labels.get(labels.ROUTING_FORM, INSTANCE)


def plan_routing(rendered: Sequence[Manifest], children: Mapping[ChildRef, ChildState], owner_uid: str,
                 *, repair: Collection[str] = ()) -> RoutingPlan:
    """What keeps the Process's routing children equal to ``rendered`` (its whole render; intent
    children are ignored).

    Args:
        rendered: the current render, in apply order.
        children: the cached children by ref (owned ones and boundary inputs alike).
        owner_uid: the Process's ``metadata.uid``.
        repair: the ``routing-form`` values (:data:`INSTANCE`, :data:`STABLE`) whose missing or changed
            children are applied again; other forms are only deleted when no longer rendered.
    """
    routes = [m for m in rendered if not is_flux_resource(manifest_ref(m))]
    wanted = {manifest_ref(m) for m in routes}
    apply: list[Manifest] = []
    why: list[str] = []
    for manifest in routes:
        if _form(manifest) not in repair:
            continue
        ref = manifest_ref(manifest)
        found = drift(manifest, children.get(ref))
        if found is not None:
            apply.append(manifest)
            why.append(f"{ref.kind} {ref.namespace}/{ref.name} {found}")
    delete = tuple(ref for ref in _owned_routing(children, owner_uid) if ref not in wanted)
    return RoutingPlan(tuple(apply), delete, tuple(why))


def served_hosts(spec: object) -> list[str]:
    """The host names a routing child's ``spec`` serves: an Ingress's ``rules[].host``, a DNSEndpoint's
    ``endpoints[].dnsName``, in order (anything else serves none)."""
    if not isinstance(spec, Mapping):
        return []
    hosts: list[str] = []
    for field_, entries in (("host", spec.get("rules")), ("dnsName", spec.get("endpoints"))):
        if isinstance(entries, list):
            hosts += [e[field_] for e in entries if isinstance(e, Mapping) and isinstance(e.get(field_), str)]
    return hosts


def make_after_break(manifests: Sequence[Manifest], routes: Mapping[str, frozenset[str]],
                     owner_uid: str) -> tuple[tuple[Manifest, ...], tuple[Manifest, ...]]:
    """``(apply now, wait)`` of ``manifests``: a stable routing child waits while a stable routing child
    of another Process (``routes``: host → UIDs of the Processes whose cached stable Ingress or
    DNSEndpoint serves it) still serves one of its hosts, so the old holder's pair is gone before the
    new holder's appears (docs/behaviour.md#handing-a-stable-name-over); everything else goes now."""
    now: list[Manifest] = []
    wait: list[Manifest] = []
    for manifest in manifests:
        taken = _form(manifest) == STABLE and any(
            routes.get(host, frozenset()) - {owner_uid} for host in served_hosts(_section(as_json(manifest), "spec")))
        (wait if taken else now).append(manifest)
    return tuple(now), tuple(wait)


def _wanted(standing: ClaimStanding, phase: ProcessPhase,
            previous: ProcessCondition | None) -> tuple[str, str, str] | None:
    """(status, reason, message) of the condition, or None to leave it as it is."""
    if phase in ELIGIBLE_PHASES:
        if standing.lost:
            held = "; ".join(f"stable name {key} is held by {holder}" for key, holder in standing.lost)
            mine = f"; holds {', '.join(standing.held)}" if standing.held else ""
            return "False", REASON_HELD, held + mine
        if standing.held and not standing.unsettled:
            return "True", REASON_GRANTED, f"holds stable name {', '.join(standing.held)}"
        return None  # not arbitrated yet
    if previous is not None and previous.status == "True" and not standing.held:
        return "False", REASON_RELEASED, f"stable name released: {phase.value} is not Running or Attested"
    return None


def stable_name_condition(standing: ClaimStanding, phase: ProcessPhase, previous: ProcessCondition | None,
                          generation: int | None, now: datetime) -> ProcessCondition | None:
    """The new ``StableName`` condition of a bidder, or None when it stays as it is.

    In Running or Attested: ``False``/:data:`REASON_HELD` naming each holder when another Process
    holds one of its keys; ``True``/:data:`REASON_GRANTED` when it holds every key; unchanged while a
    key has no record yet. In any other phase a ``True`` condition turns ``False``/
    :data:`REASON_RELEASED` once the claims no longer name it. ``lastTransitionTime`` is kept while the
    status does not change.
    """
    wanted = _wanted(standing, phase, previous)
    if wanted is None:
        return None
    status, reason, message = wanted
    if previous is not None and (previous.status, previous.reason, previous.message) == wanted:
        return None
    since = previous.last_transition_time if previous is not None and previous.status == status else now
    return ProcessCondition(type_=STABLE_NAME, status=status, last_transition_time=since, reason=reason,
                            message=message, observed_generation=generation)


# ── the upkeep of one decision ─────────────────────────────────────────────

_P = ProcessPhase

_ROUTED = frozenset(ProcessPhase) - {_P.PENDING, _P.FORKING}
"""Phases in which a Process may have routing children (Reaped deletes every child itself; its claims
and condition are still settled here)."""

_REPAIR: dict[ProcessPhase, frozenset[str]] = {_P.ATTESTED: frozenset({INSTANCE, STABLE}),
                                               _P.RUNNING: frozenset({STABLE})}
"""The routing forms applied again in place when missing or changed (Running: only the stable pair,
whose claim can be granted there; its instance pair was applied by Execing a moment ago)."""


def _claim_events(condition: ProcessCondition) -> Event:
    message = condition.message or ""
    if condition.reason == REASON_HELD:
        return Event.warning(REASON_HELD, message)
    return Event.normal(condition.reason or STABLE_NAME, message)


def _is_stable(manifest: Manifest | Job) -> bool:
    return isinstance(manifest, Manifest) and manifest.metadata.labels.get(labels.ROUTING_FORM) == STABLE


def with_routing(observed: Observed, decision: Decision, *, render: Callable[[Observed], list[Manifest]],
                 fleet_cluster: str) -> Decision:
    """``decision`` plus the routing upkeep of a Process with ``spec.routing`` or named by a claim
    (docs/behaviour.md#ingress-and-dnsendpoint, docs/behaviour.md#stable-name-claims), for the phase the
    decision leaves it in (its transition's target, else its phase):

    - out of Running and Attested, the claims naming it are given up in this very step
      (``release_claims``, performed before the status write) and its stable pair is neither applied
      nor kept: the stable children are deleted first (break before make,
      docs/behaviour.md#handing-a-stable-name-over);
    - owned routing children the current render does not produce are deleted (a stable name lost);
    - a stable pair (in the decision's applies or the repair) waits while another Process's stable
      Ingress or DNSEndpoint still serves its host (:func:`reconciler.routing.make_after_break`);
    - in Attested every rendered routing child, in Running the stable ones, is applied again when
      missing from the cache or changed (Attested records a Normal Event ``RoutingDrift`` naming them,
      except for a stable pair whose name is granted in this very pass); not when the decision
      changes the phase;
    - the ``StableName`` condition follows the claims as they stand after the step
      (:func:`reconciler.routing.stable_name_condition`), with an Event once per change.

    ``render`` is the phase machine's (:class:`reconciler.phases.Deps`); ``fleet_cluster`` completes a
    claims key whose hostname names no cluster. A render that fails is left to Execing to report: no
    routing child is applied or deleted then.
    """
    process = observed.process
    uid = process.metadata.uid
    after = decision.transition.target if decision.transition is not None else process.phase
    ref = process_ref(process)
    mine = holder_keys(observed.claims, ref)
    if (process.spec.routing is None and not mine) or process.phase not in _ROUTED or not uid:
        return decision
    claims = claims_after(observed.claims, ref, after)
    leaving = len(claims) != len(observed.claims)
    view = dataclasses.replace(observed, claims=claims) if leaving else observed
    applies = decision.apply if after in ELIGIBLE_PHASES else tuple(m for m in decision.apply if not _is_stable(m))
    try:
        docs = render(view) if process.spec.routing is not None else []
    except (IntentNotSupported, RenderError, VariantError):
        docs = None
    # make after break: a stable pair waits while another Process's still serves its host
    ours = tuple(m for m in applies if isinstance(m, Manifest))
    _, waiting = make_after_break(ours, observed.routes, uid)
    applies = tuple(m for m in applies if not any(m is w for w in waiting))
    extra: list[tuple[Manifest, str]] = []
    deletes: tuple[ChildRef, ...] = ()
    if docs is not None:
        repair = _REPAIR.get(process.phase, frozenset()) if decision.transition is None else frozenset()
        plan = plan_routing(docs, observed.children, uid, repair=repair)
        applied = {manifest_ref(m) for m in applies}
        now, _ = make_after_break(plan.apply, observed.routes, uid)
        extra = [(m, why) for m, why in zip(plan.apply, plan.drift, strict=True)
                 if manifest_ref(m) not in applied and any(m is n for n in now)]
        deletes = tuple(ref for ref in plan.delete if ref not in decision.delete)

    status = process.status
    conditions = list(status.conditions) if status is not None else []
    previous = next((c for c in conditions if c.type_ == STABLE_NAME), None)
    condition = (stable_name_condition(standing(claims, process, fleet_cluster), after, previous,
                                       process.metadata.generation, observed.now)
                 if process.spec.routing is not None or previous is not None else None)
    granted = condition is not None and condition.status == "True"
    events = list(decision.events)
    drifted = [why for m, why in extra
               if process.phase is _P.ATTESTED and not (granted and _is_stable(m))]
    if drifted:
        events.append(Event.normal(Reason.ROUTING_DRIFT, f"routing drift corrected: {'; '.join(drifted)}"))
    patch = decision.status
    if condition is not None:
        base = decision.status.conditions if decision.status is not None else UNSET
        current = base if isinstance(base, list) else conditions
        wanted = [c for c in current if c.type_ != STABLE_NAME] + [condition]
        patch = merged(decision.status or StatusPatch(), StatusPatch(conditions=wanted))
        events.append(_claim_events(condition))
    if not extra and not deletes and condition is None and not leaving and applies == decision.apply:
        return decision
    return dataclasses.replace(decision, status=patch, apply=(*applies, *(m for m, _ in extra)),
                               delete=(*decision.delete, *deletes), events=tuple(events),
                               release_claims=after if leaving else None)
