"""What a schema cannot catch in ``spec.dependsOn`` and ``spec.identity.parent``, found from the caches.

Pure functions of the Process and the cached Processes (docs/behaviour.md#dependencies):

- :func:`dependency_problem`: a ``dependsOn`` entry naming the Process itself (``SelfDependency``),
  or a cycle of ``dependsOn`` edges back to it (``DependencyCycle``) through Processes that are
  themselves still waiting on their dependencies (Pending or Forking) — such a wait can never end;
- :func:`parent_problem`: a ``spec.identity.parent`` PID that no cached Process holds
  (``ParentNotFound``).

The phase machine turns a problem into ``Stalled=True`` with the reason and the message, in Forking
(:func:`reconciler.phases.decide_forking`); the divergence: docs/divergences.md#dependency-problems.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from reconciler.reasons import Reason
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process

__all__ = [
    "ARROW",
    "DependencyProblem",
    "dependency_problem",
    "depends_on_refs",
    "parent_problem",
    "process_ref",
]

ARROW: Final = " → "
"""Between the ``<ns>/<name>`` steps of a reported path."""

_GATED: Final = frozenset({ProcessPhase.PENDING, ProcessPhase.FORKING})
"""Phases whose Process still waits on its ``dependsOn`` (checked in Forking only): a cycle is a
deadlock only while every other member is in one of them."""

Problem = Literal[Reason.SELF_DEPENDENCY, Reason.DEPENDENCY_CYCLE, Reason.PARENT_NOT_FOUND]


@dataclass(frozen=True)
class DependencyProblem:
    """Why a Process can never leave Forking by waiting: ``reason`` (the condition reason and the
    Warning Event's), ``message`` (a sentence naming the path), ``path`` (the ``<ns>/<name>`` steps,
    first and last the Process itself for a cycle; the Process alone for a missing parent)."""

    reason: Problem
    message: str
    path: tuple[str, ...]


def process_ref(process: Process) -> str:
    """``<namespace>/<name>`` of ``process`` (namespace ``default`` when unset)."""
    return f"{process.metadata.namespace or 'default'}/{process.metadata.name or ''}"


def depends_on_refs(process: Process) -> list[str]:
    """``<ns>/<name>`` of each ``spec.dependsOn`` entry, in order (namespace defaults to the Process's)."""
    ns = process.metadata.namespace or "default"
    return [f"{dep.namespace or ns}/{dep.name}" for dep in process.spec.depends_on]


def dependency_problem(process: Process, dependencies: Mapping[str, Process | None],
                       processes: Mapping[str, Process]) -> DependencyProblem | None:
    """A self-dependency, else the shortest ``dependsOn`` cycle back to ``process``, else None.

    ``dependencies`` are ``process``'s own ``dependsOn`` entries resolved (``Observed.dependencies``),
    ``processes`` maps ``<ns>/<name>`` to every cached Process (``Observed.processes_by_ref``), read
    for the steps further away; ``process`` itself is read from the argument, never from either.

    The cycle is searched breadth-first in ``dependsOn`` order, so the reported path is the shortest
    and the same on every pass. A step other than ``process`` is followed only while that Process is
    Pending or Forking: one that went past Forking no longer waits, so it breaks the cycle.
    Self-dependencies and cycles that do not pass through ``process`` are the other Processes' to
    report.
    """
    me = process_ref(process)
    refs = depends_on_refs(process)
    for i, ref in enumerate(refs):
        if ref == me:
            message = f"spec.dependsOn[{i}] names the Process itself: {me}{ARROW}{me}"
            return DependencyProblem(Reason.SELF_DEPENDENCY, message, (me, me))
    came_from: dict[str, str] = {}
    queue: deque[str] = deque()
    for ref in refs:
        if ref not in came_from:
            came_from[ref] = me
            queue.append(ref)
    while queue:
        ref = queue.popleft()
        target = dependencies.get(ref) if ref in dependencies else processes.get(ref)
        if target is None or target.phase not in _GATED:
            continue
        for nxt in depends_on_refs(target):
            if nxt == me:
                path = _path(came_from, ref, me)
                return DependencyProblem(Reason.DEPENDENCY_CYCLE, f"dependency cycle: {ARROW.join(path)}", path)
            if nxt not in came_from:
                came_from[nxt] = ref
                queue.append(nxt)
    return None


def _path(came_from: Mapping[str, str], last: str, me: str) -> tuple[str, ...]:
    """``me → … → last → me`` from the breadth-first predecessors."""
    steps = [me, last]
    while steps[-1] != me:
        steps.append(came_from[steps[-1]])
    return tuple(reversed(steps))


def parent_problem(process: Process, holders: Mapping[str, Process]) -> DependencyProblem | None:
    """``ParentNotFound`` when ``spec.identity.parent`` is set and no Process in ``holders`` (cached
    Processes by their own ``status.pid``) holds it; None for a root or a found parent."""
    parent = process.spec.identity.parent
    if not parent or parent in holders:
        return None
    return DependencyProblem(Reason.PARENT_NOT_FOUND, f"spec.identity.parent {parent}: no Process holds this PID",
                             (process_ref(process),))
