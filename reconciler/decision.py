"""The contract between the pure phase machine and the executor that performs its I/O.

Every phase handler is a pure function ``(Observed) -> Decision`` (DESIGN §3 "Pure
decisions, thin effects"): it reads only the snapshot it is given — the Process, its
children and related objects from the informer caches, ``now`` — and returns what to
write. :mod:`reconciler.executor` turns a :class:`Decision` into API calls in a fixed
order: finalizer add → PID allocation → child applies/deletes → signals to child
Processes → annotation patch → status patch (phase transition last, so a crash
before it repeats the step rather than skipping it) → Events → finalizer removal →
self-delete → requeue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.signal import ProcessSignal


@dataclass(frozen=True)
class Event:
    """A core/v1 Event about the Process: ``type`` Normal or Warning, a CamelCase ``reason``, a sentence."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class ChildRef:
    """One rendered child by apiVersion, kind, namespace and name."""

    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass(frozen=True)
class ChildState:
    """What the reconciler knows of one owned child (Flux object, Job, Ingress…) from the cache.

    ``ready``: the ``Ready`` condition's status (True/False), None when absent or Unknown;
    ``stalled``: Flux reports a terminal failure (e.g. ``Stalled=True``, or ``Ready=False`` with a
    terminal reason); ``reason`` / ``message`` from that condition; ``object``: the cached document.
    """

    ref: ChildRef
    ready: bool | None
    stalled: bool = False
    reason: str = ""
    message: str = ""
    object: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Observed:
    """The snapshot a phase decision reads. Everything comes from caches; nothing is fetched.

    Attributes:
        process: the Process being reconciled.
        now: the current instant (UTC), injected.
        children: owned children (rendered objects) by ref.
        child_processes: Processes whose ``spec.identity.parent`` equals this Process's ``status.pid``.
        dependencies: ``spec.dependsOn`` entries resolved to their Process ("<ns>/<name>" → Process or None).
        processes_by_ref: every cached Process by "<ns>/<name>" (a read-only view of the informer cache),
            for boundary conditions that name other Processes.
        prometheus: PromQL query → scalar result already fetched by the executor (None: not configured/failed).
        heartbeat_seconds: the Attested heartbeat / poll interval (spec/process-reconciler.md §0.2 HEARTBEAT).
    """

    process: Process
    now: datetime
    children: dict[ChildRef, ChildState] = field(default_factory=dict)
    child_processes: tuple[Process, ...] = ()
    dependencies: dict[str, Process | None] = field(default_factory=dict)
    processes_by_ref: Mapping[str, Process] = field(default_factory=dict)
    prometheus: dict[str, float | None] = field(default_factory=dict)
    heartbeat_seconds: float = 30.0


@dataclass(frozen=True)
class Decision:
    """What one reconcile writes. Empty fields mean "nothing"; an all-default Decision writes nothing.

    Attributes:
        status: JSON merge patch for ``/status`` with wire (camelCase) keys, ``None`` values delete keys.
        transition: (from, to) when ``status.phase`` changes — recorded as an Event, the
            ``tatara_process_phase_transitions_total{from,to}`` counter and the time-in-phase histogram.
        apply: child documents to server-side apply (apiVersion, kind, metadata.name/namespace set).
        delete: children to delete.
        annotations: merge patch of the Process's own annotations (None strips, e.g. the one-shot signal).
        add_finalizer / remove_finalizer: the Process finalizer.
        allocate_pid: allocate a PID from the ProcessTable before writing ``status``; the executor puts
            it into ``status.pid`` (and ``status.parent``).
        signal_children: (namespace, name, signal) to send to child Processes (the SIGTERM cascade).
        delete_self: delete the Process object (an ephemeral Process after Reaped).
        suspended: set ``spec.suspended`` (SIGSTOP/SIGCONT, ``startSuspended``) in the same
            main-resource merge patch as ``annotations``, so the signal is stripped in the write
            that applies it.
        signal: ``(signal, outcome)`` for ``tatara_signals_total``; outcome is ``applied``,
            ``ignored`` or ``invalid`` (signal is the raw annotation value when invalid).
        events: Events to record.
        requeue_after: seconds until the next reconcile (None: wait for the next watch event).
    """

    status: dict[str, Any] | None = None
    transition: tuple[ProcessPhase, ProcessPhase] | None = None
    apply: tuple[dict[str, Any], ...] = ()
    delete: tuple[ChildRef, ...] = ()
    annotations: dict[str, str | None] | None = None
    add_finalizer: bool = False
    remove_finalizer: bool = False
    allocate_pid: bool = False
    signal_children: tuple[tuple[str, str, ProcessSignal], ...] = ()
    delete_self: bool = False
    suspended: bool | None = None
    signal: tuple[str, str] | None = None
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
