"""reconciler.dependencies: self-dependencies, dependsOn cycles and missing parents, table by table
(docs/behaviour.md#dependencies)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.dependencies import DependencyProblem, dependency_problem, parent_problem
from shared.domain.api.codec import convert
from shared.domain.api.process import Process


def proc(ref: str, phase: str | None = "Forking", *, deps: tuple[str, ...] = (), parent: str | None = None,
         pid: str | None = None) -> Process:
    """The Process ``<ns>/<name>`` in ``phase`` (None: no status, i.e. Pending) depending on ``deps``
    (``name`` or ``ns/name``)."""
    ns, name = ref.split("/")
    entries = [{"namespace": d.split("/")[0], "name": d.split("/")[1]} if "/" in d else {"name": d} for d in deps]
    spec: dict[str, Any] = {
        "classification": {"pointType": "Gate", "substrate": "Compute"},
        "intent": {"flux": {"gitRepository": "repo", "path": "./app"}},
        "dependsOn": entries,
    }
    if parent is not None:
        spec["identity"] = {"parent": parent}
    body: dict[str, Any] = {"metadata": {"name": name, "namespace": ns}, "spec": spec}
    if phase is not None:
        body["status"] = {"phase": phase, **({"pid": pid} if pid else {})}
    return convert(body, Process)


def cache(*processes: Process) -> dict[str, Process]:
    return {f"{p.metadata.namespace}/{p.metadata.name}": p for p in processes}


def problem_of(me: Process, *others: Process) -> DependencyProblem | None:
    cached = cache(*others)
    found = {f"{d.namespace or me.metadata.namespace}/{d.name}": None for d in me.spec.depends_on}
    return dependency_problem(me, {ref: cached.get(ref) for ref in found}, cached)


ROWS: list[tuple[Process, tuple[Process, ...], tuple[str, str] | None]] = [
    (proc("ns/a"), (), None),
    (proc("ns/a", deps=("b",)), (proc("ns/b"),), None),
    (proc("ns/a", deps=("b",)), (), None),
    (proc("ns/a", deps=("a",)), (), ("SelfDependency", "ns/a → ns/a")),
    (proc("ns/a", deps=("b", "ns/a")), (proc("ns/b"),), ("SelfDependency", "ns/a → ns/a")),
    (proc("ns/a", deps=("b",)), (proc("ns/b", deps=("a",)),), ("DependencyCycle", "ns/a → ns/b → ns/a")),
    (proc("ns/a", deps=("b",)), (proc("ns/b", None, deps=("a",)),), ("DependencyCycle", "ns/a → ns/b → ns/a")),
    (proc("ns/a", deps=("other/b",)), (proc("other/b", deps=("ns/a",)),),
     ("DependencyCycle", "ns/a → other/b → ns/a")),
    (proc("ns/a", deps=("b",)), (proc("ns/b", deps=("c",)), proc("ns/c", deps=("a",))),
     ("DependencyCycle", "ns/a → ns/b → ns/c → ns/a")),
    (proc("ns/a", deps=("b", "c")), (proc("ns/b", deps=("d",)), proc("ns/d", deps=("a",)), proc("ns/c", deps=("a",))),
     ("DependencyCycle", "ns/a → ns/c → ns/a")),
    (proc("ns/a", deps=("b",)), (proc("ns/b", "Attested", deps=("a",)),), None),
    (proc("ns/a", deps=("b",)), (proc("ns/b", deps=("c",)), proc("ns/c", "Running", deps=("a",))), None),
    (proc("ns/a", deps=("b",)), (proc("ns/b", deps=("c",)), proc("ns/c", deps=("b",))), None),
    (proc("ns/a", deps=("b",)), (proc("ns/b", deps=("b",)),), None),
]


@pytest.mark.parametrize(
    ("me", "others", "expected"),
    ROWS,
    ids=[
        "a process without dependencies has no problem",
        "a dependency that is only waiting itself is no problem",
        "a dependency that does not exist yet is a wait not a problem",
        "a process naming itself is a self-dependency",
        "a self-dependency is found among other entries by its qualified name",
        "two processes waiting on each other are a cycle",
        "a pending process counts as waiting in a cycle",
        "a cycle across namespaces names both namespaces",
        "a three-step cycle reports the whole path",
        "of two cycles the shortest is reported",
        "a dependency that went past forking breaks the cycle",
        "a step that went past forking breaks a longer cycle",
        "a cycle further on that does not come back is the other processes to report",
        "another process depending on itself is not this process's problem",
    ],
)
def test_dependency_problem(me: Process, others: tuple[Process, ...], expected: tuple[str, str] | None) -> None:
    found = problem_of(me, *others)
    if expected is None:
        assert found is None
        return
    assert found is not None
    reason, path = expected
    assert (found.reason, " → ".join(found.path)) == (reason, path)
    assert path in found.message


def test_the_process_itself_is_read_from_the_argument_not_from_a_stale_cache() -> None:
    me = proc("ns/a")  # the cache still holds an older copy that depended on b
    assert problem_of(me, proc("ns/a", deps=("b",)), proc("ns/b", deps=("a",))) is None


def test_a_dependency_resolved_as_missing_is_not_looked_up_again_in_the_cache() -> None:
    me = proc("ns/a", deps=("b",))
    assert dependency_problem(me, {"ns/b": None}, cache(proc("ns/b", deps=("a",)))) is None


PARENT_ROWS: list[tuple[Process, dict[str, Process], str | None]] = [
    (proc("ns/a"), {}, None),
    (proc("ns/a", parent="seph.1"), {"seph.1": proc("ns/p", "Attested", pid="seph.1")}, None),
    (proc("ns/a", parent="seph.1"), {}, "spec.identity.parent seph.1: no Process holds this PID"),
    (proc("ns/a", parent="seph.1"), {"seph.1.1": proc("ns/p", "Attested", pid="seph.1.1")},
     "spec.identity.parent seph.1: no Process holds this PID"),
]


@pytest.mark.parametrize(
    ("me", "holders", "message"),
    PARENT_ROWS,
    ids=[
        "a root process has no parent to find",
        "a parent pid held by a cached process is found",
        "a parent pid nobody holds is not found",
        "a pid that only starts with the parent pid does not hold it",
    ],
)
def test_parent_problem(me: Process, holders: dict[str, Process], message: str | None) -> None:
    found = parent_problem(me, holders)
    if message is None:
        assert found is None
        return
    assert found == DependencyProblem("ParentNotFound", message, ("ns/a",))
