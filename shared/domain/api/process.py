"""The ``Process`` kind: spec, status and the status sub-types.

— docs/wire-format.md#processspec and docs/wire-format.md#processstatus.
"""

from __future__ import annotations

from typing import ClassVar

from shared.domain.api.boundary import Boundary, ConditionKind
from shared.domain.api.classification import Classification
from shared.domain.api.compliance import ComplianceSpec
from shared.domain.api.encapsulates import EncapsulatesSpec
from shared.domain.api.grammar import ParentPid
from shared.domain.api.intent import Intent
from shared.domain.api.lifetime import Lifetime
from shared.domain.api.phase import MustReachPhase, ProcessPhase
from shared.domain.api.routing import RoutingSpec
from shared.domain.api.signal import ProcessSignal, SignalPolicy
from shared.domain.api.wire import FreeObject, Int32, Timestamp, UInt32, UInt64, WireStruct
from shared.domain.group import API_VERSION
from shared.kube.meta import ObjectMeta

__all__ = [
    "BoundaryStatus",
    "CheckedCondition",
    "ComplianceStatus",
    "DependsOn",
    "FluxResourceRef",
    "Identity",
    "IdentitySpec",
    "Process",
    "ProcessAttestation",
    "ProcessCondition",
    "ProcessSpec",
    "ProcessStatus",
]

# ── spec ──────────────────────────────────────────────────────────────────────


class IdentitySpec(WireStruct):
    """Where the Process sits in the PID tree and the name it goes by (``spec.identity``)."""

    parent: ParentPid | None = None
    """PID path of the parent Process; absent (or empty) → a root."""
    name_override: str | None = None
    """Human name used instead of the content hash; trimmed, empty → absent."""


class DependsOn(WireStruct):
    """``spec.dependsOn[]``: another Process that must reach a phase first."""

    name: str
    """``metadata.name`` of the Process waited for."""
    namespace: str | None = None
    """Absent → this Process's namespace."""
    must_reach: MustReachPhase = MustReachPhase.ATTESTED


class ProcessSpec(WireStruct):
    """``spec`` of a Process. Field order is the content-hash order.

    ``lifetime`` is left out on output when both its slots are unset.
    """

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"lifetime"})

    identity: IdentitySpec = IdentitySpec()
    classification: Classification
    intent: Intent
    boundary: Boundary = Boundary()
    compliance: ComplianceSpec = ComplianceSpec()
    depends_on: list[DependsOn] = []
    """Processes that must reach a phase before this one leaves Forking. Default: none."""
    signals: SignalPolicy = SignalPolicy()
    lifetime: Lifetime = Lifetime()
    routing: RoutingSpec | None = None
    encapsulates: EncapsulatesSpec | None = None
    suspended: bool = False
    """Paused as by SIGSTOP; part of the content hash."""

    def problems(self) -> list[str]:
        """Union errors found in this spec, each prefixed with its field path.

        E.g. ``spec.intent: intent has multiple variants set; exactly one required``.
        Empty when every tagged union resolves.
        """
        found: list[str] = []

        def note(path: str, err: str | None) -> None:
            if err is not None:
                found.append(f"{path}: {err}")

        note("spec.intent", self.intent.check())
        note("spec.lifetime", self.lifetime.check())
        if self.encapsulates is not None:
            note("spec.encapsulates.kind", self.encapsulates.kind.check())
        if self.lifetime.ephemeral is not None:
            for i, export in enumerate(self.lifetime.ephemeral.exports):
                note(f"spec.lifetime.ephemeral.exports[{i}].source", export.source.check())
                note(f"spec.lifetime.ephemeral.exports[{i}].channel", export.channel.check())
        return found


# ── status ────────────────────────────────────────────────────────────────────


class Identity(WireStruct, rename=None):
    """``status.identity`` — the one type with **snake_case** keys."""

    name: str
    """Name used in PID paths: the override, else the content hash."""
    content_hash: str
    """26 lower-case Crockford base32 characters."""
    name_override: bool
    """True when ``name`` came from ``spec.identity.nameOverride``."""


class ProcessAttestation(WireStruct):
    """``status.attestation``; hashes are 64 lower-case hex."""

    artifact_hash: str
    """Hash of the rendered resources, or ``""`` when nothing was rendered."""
    control_hash: str | None = None
    """Hash of the compliance controls; absent when there are no compliance bindings."""
    intent_hash: str
    """Hash of the intent's canonical JSON (64 lower-case hex)."""
    composed_root: str
    """Hash combining the artifact, control, intent and previous hashes (64 lower-case hex)."""
    generation: UInt64
    """0 for the first attestation, +1 each cycle."""
    previous_root: str | None = None
    """``composedRoot`` of the previous attestation; absent at generation 0."""
    attested_at: Timestamp
    """When this attestation was written (RFC 3339)."""


class FluxResourceRef(WireStruct):
    """``status.fluxResources[]``: an object the Process rendered."""

    api_version: str
    """``apiVersion`` of the object, e.g. ``helm.toolkit.fluxcd.io/v2``."""
    kind: str
    """``kind`` of the object, e.g. ``HelmRelease``."""
    name: str
    """Name of the object."""
    namespace: str
    """Namespace of the object."""
    ready: bool = False
    """Whether the object reports Ready. Default false."""
    message: str | None = None
    """The object's own readiness message, or ``not yet observed``."""
    last_check: Timestamp | None = None
    """When the readiness was last read (RFC 3339)."""


class CheckedCondition(WireStruct):
    """``status.boundary.pre/postconditions[]``: a Condition plus its result."""

    _write_null: ClassVar[frozenset[str]] = frozenset({"params"})

    kind: ConditionKind
    params: FreeObject | None = None
    """The condition's parameters, as in the spec (null when it has none)."""
    satisfied: bool
    """Whether the condition held at the last check."""
    last_check: Timestamp | None = None
    """When the condition was last checked (RFC 3339)."""
    message: str | None = None
    """Why the condition is not satisfied, or what the check found."""


class BoundaryStatus(WireStruct):
    """Results of the boundary checks and the boundary deadline (``status.boundary``)."""

    preconditions: list[CheckedCondition] = []
    """Result of each ``spec.boundary.preconditions`` entry, in order."""
    postconditions: list[CheckedCondition] = []
    """Result of each ``spec.boundary.postconditions`` entry, in order."""
    deadline: Timestamp | None = None
    """When the boundary timeout runs out (RFC 3339): past it, the Process goes Failed (exit code 124)."""


class ComplianceStatus(WireStruct):
    """``status.compliance``; the three counters are required inside the object."""

    baseline: str | None = None
    """The compliance baseline checked against (``spec.compliance.baseline``)."""
    satisfied: UInt32
    """Number of controls satisfied."""
    violated: UInt32
    """Number of controls violated."""
    total: UInt32
    """Number of controls checked."""
    violations: list[str] = []
    """The violated controls, one text each."""


class ProcessCondition(WireStruct):
    """``status.conditions[]``, the metav1.Condition shape."""

    type_: str
    """Condition type: ``Ready``, ``Reconciling``, ``Stalled`` (kstatus), or ``StableName`` for a stable-name bidder."""
    status: str
    """``"True"``, ``"False"`` or ``"Unknown"``."""
    last_transition_time: Timestamp
    """When ``status`` last changed (RFC 3339)."""
    reason: str | None = None
    """One CamelCase word saying why, e.g. ``InvalidSpec``."""
    message: str | None = None
    """What happened, in words."""
    observed_generation: int | None = None
    """Not in the reference; we add it for kstatus (docs/divergences.md). Omitted when unset.

    Why: docs/divergences.md#processcondition. (The first paragraph is this field's CRD description.)"""


class ProcessStatus(WireStruct):
    """``status`` of a Process. Every field is optional."""

    pid: str | None = None
    """Hierarchical PID path, e.g. ``seph.1.7``."""
    parent: str | None = None
    """PID path of the parent Process, copied from ``spec.identity.parent``; absent for a root."""
    children: list[str] = []
    """PID paths of the child Processes."""
    identity: Identity | None = None
    phase: ProcessPhase = ProcessPhase.PENDING
    phase_since: Timestamp | None = None
    """When the Process entered its current phase (RFC 3339)."""
    attestation: ProcessAttestation | None = None
    flux_resources: list[FluxResourceRef] = []
    """The Flux objects (Kustomization, HelmRelease, OCIRepository) this Process rendered, with their readiness."""
    boundary: BoundaryStatus = BoundaryStatus()
    compliance: ComplianceStatus = ComplianceStatus(satisfied=0, violated=0, total=0)
    signal_queue: list[ProcessSignal] = []
    """Signals waiting to be delivered, oldest first (signals are handled at once, so usually empty)."""
    conditions: list[ProcessCondition] = []
    """kstatus conditions ``Ready``, ``Reconciling`` and ``Stalled``, rewritten on every phase change."""
    message: str | None = None
    """What the reconciler last said about the Process, in words."""
    exit_code: Int32 | None = None
    """Why the Process ended: 2 invalid spec, 1 a stalled child, 124 boundary timeout, 137 SIGKILL."""
    observed_generation: int | None = None
    """The ``metadata.generation`` the status was last written for. Not in the reference (docs/divergences.md).

    Why: docs/divergences.md#status-observedgeneration. (The first paragraph is this field's CRD description.)"""


class Process(WireStruct):
    """A ``tatara.pleme.io/v1alpha1`` ``Process`` object. Namespaced."""

    api_version: str = API_VERSION
    kind: str = "Process"
    metadata: ObjectMeta = ObjectMeta()
    spec: ProcessSpec
    status: ProcessStatus | None = None

    @property
    def phase(self) -> ProcessPhase:
        """``status.phase``, Pending when there is no status."""
        return self.status.phase if self.status is not None else ProcessPhase.PENDING
