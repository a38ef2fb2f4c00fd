"""The contract between the pure phase machine and the executor that performs its writes.

Every phase handler is a pure function ``(Observed) -> Decision``: it reads only the snapshot it is
given — the Process, its children and related Processes from the informer caches, ``now`` — and
returns what to write, as typed values: a :class:`~reconciler.status_patch.StatusPatch`, rendered
manifests, :class:`~shared.kube.events.Event` values. :mod:`reconciler.controller` gathers the
snapshot and :mod:`reconciler.executor` performs the decision (docs/architecture.md#one-reconcile).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from reconciler.cel import CelResult
from reconciler.children import ChildRef, ChildState
from reconciler.concurrency import Sibling
from reconciler.render import Manifest
from reconciler.status_patch import StatusPatch
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.signal import ProcessSignal
from shared.domain.api.table import ClaimRecord
from shared.domain.manifests.batch import Job, JobWaiting, ObservedJob
from shared.kube.events import Event

__all__ = ["ChildSignal", "Decision", "Observed", "SignalCount", "Transition"]


@dataclass(frozen=True)
class Observed:
    """The snapshot a phase decision reads. Everything comes from caches or was fetched before deciding.

    Attributes:
        process: the Process being reconciled.
        now: the current instant (UTC), injected.
        children: owned children (rendered objects) by ref, plus the objects boundary conditions name.
        child_processes: Processes whose ``spec.identity.parent`` equals this Process's ``status.pid``.
        dependencies: ``spec.dependsOn`` entries resolved to their Process ("<ns>/<name>" → Process or None).
        processes_by_ref: every cached Process by "<ns>/<name>" (a read-only view of the informer cache),
            for boundary conditions that name other Processes and the dependency cycle check
            (docs/behaviour.md#dependencies).
        processes_by_pid: every cached Process that holds a PID, by its ``status.pid`` (a read-only view
            of the informer's PID index), for the parent check (docs/behaviour.md#dependencies).
        prometheus: PromQL query → scalar result already fetched (None: the query failed).
        claims: ``ProcessTable.status.claims`` from the table cache (key ``<cluster>/<app>`` → record),
            empty without a table (docs/behaviour.md#stable-name-claims).
        routes: stable host name → UIDs of the Processes whose cached stable Ingress or DNSEndpoint
            serves it (the routing caches), so a new holder's pair waits for the old one's to go
            (docs/behaviour.md#handing-a-stable-name-over).
        heartbeat_seconds: the Attested heartbeat / poll interval (HEARTBEAT, docs/behaviour.md#timing).
        export_jobs: this Process's export Jobs from the cache, by export index (docs/behaviour.md#releasing);
            in Releasing, ``children`` also holds the receipt ConfigMaps :func:`reconciler.exports.receipt_refs` names.
        export_job_warnings: in Releasing, the latest Warning Event of each export Job that has no pod
            (:func:`reconciler.exports.without_pod`), by export index.
        siblings: the other Processes sharing this one's ``maxConcurrent`` group, read in Pending
            (docs/behaviour.md#maxconcurrent).
        cel: the results of the phase's ``Cel`` expressions, evaluated beforehand in a bounded worker
            (:class:`reconciler.cel_runner.CelRunner`), by expression text; None: evaluate in place
            (pure callers and tests; docs/behaviour.md#cel-conditions).
        sequence_holders: the other cached Processes whose own PID ends in this one's sequence number: the
            Rust reference's duplicates, which we report and never renumber (docs/migration.md#duplicate-pids).
    """

    process: Process
    now: datetime
    children: Mapping[ChildRef, ChildState] = field(default_factory=dict)
    child_processes: tuple[Process, ...] = ()
    dependencies: Mapping[str, Process | None] = field(default_factory=dict)
    processes_by_ref: Mapping[str, Process] = field(default_factory=dict)
    processes_by_pid: Mapping[str, Process] = field(default_factory=dict)
    prometheus: Mapping[str, float | None] = field(default_factory=dict)
    claims: Mapping[str, ClaimRecord] = field(default_factory=dict)
    routes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    heartbeat_seconds: float = 30.0
    export_jobs: Mapping[int, ObservedJob] = field(default_factory=dict)
    export_job_warnings: Mapping[int, JobWaiting] = field(default_factory=dict)
    siblings: tuple[Sibling, ...] = ()
    cel: Mapping[str, CelResult] | None = None
    sequence_holders: tuple[Process, ...] = ()


@dataclass(frozen=True)
class Transition:
    """A phase change: recorded in ``tatara_process_phase_transitions_total{from,to}`` and, when the
    source phase's start is known, ``tatara_process_phase_seconds{phase}`` (``seconds_in_source``)."""

    source: ProcessPhase
    target: ProcessPhase
    seconds_in_source: float | None = None


@dataclass(frozen=True)
class ChildSignal:
    """A signal to send to a child Process (by its signal annotation): the SIGTERM/SIGKILL cascade."""

    namespace: str
    name: str
    signal: ProcessSignal


@dataclass(frozen=True)
class SignalCount:
    """One ``tatara_signals_total{signal,outcome}`` increment; ``signal`` is the raw annotation value
    when ``invalid``."""

    signal: str
    outcome: Literal["applied", "ignored", "invalid"]


@dataclass(frozen=True)
class Decision:
    """What one reconcile writes. Empty fields mean "nothing"; an all-default Decision writes nothing.

    Attributes:
        status: merge patch of ``/status`` (None: no status write).
        transition: the phase change the status patch writes, if any.
        passed: the phase changes a folded decision made before ``transition``, earliest first: phases
            the Process passed through within this one pass and that its status write does not show
            (docs/behaviour.md#folded-phases); each is recorded as a transition too.
        apply: child manifests (and export Jobs) to server-side apply, in order.
        delete: children to delete.
        annotations: merge patch of the Process's own annotations (None strips a key, e.g. the signal).
        suspended: set ``spec.suspended`` (SIGSTOP/SIGCONT, ``startSuspended``) in the same merge patch
            as ``annotations``, so the signal is stripped by the write that applies it.
        allocate_pid: this decision needs a PID from the ProcessTable before its status is written
            (its status write is then guarded by the resourceVersion it was decided on; see
            :mod:`reconciler.controller`).
        signal_children: signals to send to child Processes.
        signal: the signal this pass consumed, for ``tatara_signals_total``.
        events: Events to record, in order.
        released: the Process holds nothing any more (Reaped): its finalizer may go.
        release_claims: the phase this decision leaves the Process in (not Running or Attested) when
            ``ProcessTable.status.claims`` names it: its claims are given up after the deletes and
            before any other write (docs/behaviour.md#handing-a-stable-name-over).
        delete_self: delete the Process object (an ephemeral Process after Reaped).
        requeue_after: seconds until the next reconcile (None: wait for the next watch event).
    """

    status: StatusPatch | None = None
    transition: Transition | None = None
    passed: tuple[Transition, ...] = ()
    apply: tuple[Manifest | Job, ...] = ()
    delete: tuple[ChildRef, ...] = ()
    annotations: Mapping[str, str | None] | None = None
    suspended: bool | None = None
    allocate_pid: bool = False
    signal_children: tuple[ChildSignal, ...] = ()
    signal: SignalCount | None = None
    events: tuple[Event, ...] = ()
    released: bool = False
    release_claims: ProcessPhase | None = None
    delete_self: bool = False
    requeue_after: float | None = None

    @property
    def transitions(self) -> tuple[Transition, ...]:
        """Every phase change this decision records, in order: :attr:`passed`, then :attr:`transition`."""
        return (*self.passed, self.transition) if self.transition is not None else self.passed
