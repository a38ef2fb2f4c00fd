"""The pure phase machine: one decision function per phase and the dispatcher :func:`decide`.

Each ``decide_<phase>(observed, deps) -> Decision`` reads only the snapshot; the executor
performs the result. The behaviour, phase by phase: docs/behaviour.md#phases (deletion runs once
through Exiting → Zombie → Reaped; Failed is reachable; Reaped tears down children; no hot loops:
a wait on a child relies on the child watch, HEARTBEAT is only a safety net).

The rooms: :mod:`~reconciler.phases.common` (the collaborators and the shared writes),
:mod:`~reconciler.phases.checks` (boundary rows), one module per phase group
(:mod:`~reconciler.phases.pending`, :mod:`~reconciler.phases.execing`,
:mod:`~reconciler.phases.running`, :mod:`~reconciler.phases.releasing`,
:mod:`~reconciler.phases.exiting`) and :mod:`~reconciler.phases.dispatch`. The dispatcher completes a
handler's decision with :func:`reconciler.routing.with_routing` and
:func:`reconciler.status.with_fresh_status`; a signal is decided by
:func:`reconciler.signals.decide_signal`.

Requeue constants (docs/behaviour.md#timing, :mod:`reconciler.timing`): TICK 1 s after a phase
change, SHORT 5 s while children drain, HEARTBEAT (``observed.heartbeat_seconds``, 30 s) for every wait.
"""

from __future__ import annotations

from reconciler.phases.common import Deps
from reconciler.phases.dispatch import HANDLERS, decide
from reconciler.phases.execing import decide_execing
from reconciler.phases.exiting import decide_exiting, decide_failed, decide_reaped, decide_zombie
from reconciler.phases.pending import decide_forking, decide_pending, holds_finalizer, pid_granted, pid_refused
from reconciler.phases.releasing import decide_reconverging, decide_releasing
from reconciler.phases.running import decide_attested, decide_running
from reconciler.routing import with_routing
from reconciler.status import with_fresh_status
from reconciler.timing import SHORT, TICK

__all__ = [
    "HANDLERS",
    "SHORT",
    "TICK",
    "Deps",
    "decide",
    "decide_attested",
    "decide_execing",
    "decide_exiting",
    "decide_failed",
    "decide_forking",
    "decide_pending",
    "decide_reaped",
    "decide_reconverging",
    "decide_releasing",
    "decide_running",
    "decide_zombie",
    "holds_finalizer",
    "pid_granted",
    "pid_refused",
    "with_fresh_status",
    "with_routing",
]
