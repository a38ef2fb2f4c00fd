"""The pure parts of the operator commands (``tatara ps``, ``tatara signal``, the ``up`` table).

No I/O here: the CLI lists Processes and hands their decoded models to these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from shared.domain.api.closed_set import UnknownValueError
from shared.domain.api.process import Process
from shared.domain.api.signal import ProcessSignal

__all__ = ["PsRow", "SignalError", "build_tree", "format_age", "format_ps", "format_table", "parse_signal",
           "ps_rows"]


class SignalError(ValueError):
    """An operator-given signal name that is not one of :class:`ProcessSignal`."""


def parse_signal(text: str) -> ProcessSignal:
    """``HUP``, ``sighup`` or ``SIGHUP`` → :attr:`ProcessSignal.SIGHUP`.

    Raises:
        SignalError: naming the text and the accepted signals.
    """
    try:
        return ProcessSignal.parse(text)
    except UnknownValueError:
        accepted = ", ".join(f"{s.value} ({s.short})" for s in ProcessSignal)
        raise SignalError(f"unknown signal {text!r}; expected one of {accepted}") from None


def format_age(since: datetime | None, now: datetime) -> str:
    """kubectl-style age: ``42s``, ``5m``, ``3h``, ``2d`` (``<unknown>`` without a timestamp)."""
    if since is None:
        return "<unknown>"
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    seconds = max(0, int((now - since).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 2 * 3600:
        return f"{seconds // 60}m"
    if seconds < 2 * 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


@dataclass
class _Node:
    process: Process
    children: list[_Node] = field(default_factory=list)


def _key(process: Process) -> tuple[str, str]:
    return (process.metadata.namespace or "", process.metadata.name or "")


def _pid(process: Process) -> str | None:
    return process.status.pid if process.status is not None and process.status.pid else None


def _parent_pid(process: Process) -> str | None:
    """The PID a Process hangs under: ``status.parent``, else ``spec.identity.parent``, else the
    prefix of its own PID path when that is deeper than a root (``name.seq``)."""
    if process.status is not None and process.status.parent:
        return process.status.parent
    if process.spec.identity.parent:
        return process.spec.identity.parent
    pid = _pid(process)
    if pid is not None and pid.count(".") >= 2:
        return pid.rsplit(".", 1)[0]
    return None


def build_tree(processes: Iterable[Process]) -> list[tuple[int, Process]]:
    """Depth-first ``(depth, process)`` pairs, children under the Process holding their parent PID.

    Roots (no parent, or a parent PID no listed Process holds) come first ordered by PID (Processes
    without a PID last, by namespace/name); siblings likewise. Every Process appears exactly once,
    even if PIDs form a cycle.
    """
    procs = sorted(processes, key=lambda p: (_pid(p) is None, _pid(p) or "", _key(p)))
    by_pid: dict[str, _Node] = {}
    nodes = [_Node(p) for p in procs]
    for node in nodes:
        pid = _pid(node.process)
        if pid is not None and pid not in by_pid:
            by_pid[pid] = node
    roots: list[_Node] = []
    for node in nodes:
        parent = _parent_pid(node.process)
        holder = by_pid.get(parent) if parent is not None else None
        if holder is None or holder is node:
            roots.append(node)
        else:
            holder.children.append(node)
    out: list[tuple[int, Process]] = []
    seen: set[int] = set()

    def walk(node: _Node, depth: int) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        out.append((depth, node.process))
        for child in node.children:
            walk(child, depth + 1)

    for root in roots:
        walk(root, 0)
    for node in nodes:  # members of a parent cycle are reachable from no root
        walk(node, 0)
    return out


@dataclass(frozen=True)
class PsRow:
    """One line of ``tatara ps``."""

    namespace: str
    pid: str
    phase: str
    age: str
    tree: str
    """The Process name indented under its parent, ``\\_ `` like ``ps -ef --forest``."""


def ps_rows(processes: Iterable[Process], now: datetime) -> list[PsRow]:
    """The rows of ``tatara ps`` in tree order (see :func:`build_tree`)."""
    rows = []
    for depth, proc in build_tree(processes):
        name = proc.metadata.name or ""
        tree = name if depth == 0 else "    " * (depth - 1) + " \\_ " + name
        rows.append(PsRow(namespace=proc.metadata.namespace or "", pid=_pid(proc) or "-",
                          phase=proc.phase.value, age=format_age(proc.metadata.creation_timestamp, now), tree=tree))
    return rows


def format_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, the last column unpadded (kubectl style)."""
    all_rows = [list(header), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(header))]
    lines = []
    for row in all_rows:
        cells = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def format_ps(processes: Iterable[Process], now: datetime) -> str:
    """The whole ``tatara ps`` output: NAMESPACE, PID, PHASE, AGE, then the forest of names."""
    rows = ps_rows(processes, now)
    return format_table(("NAMESPACE", "PID", "PHASE", "AGE", "PROCESS"),
                        ((r.namespace, r.pid, r.phase, r.age, r.tree) for r in rows))
