"""Dependency problems against the real API server (docs/behaviour.md#dependencies): a dependsOn cycle and
a missing parent PID stall the Process (``Stalled=True`` with the reason and the path, one Warning Event),
and the stall ends by itself when the cause is fixed — woken by watches, not by HEARTBEAT."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.domain.resources import PROCESSES
from shared.kube.client import EVENTS, KubeClient
from tests.integration.reconciler.conftest import NO_HEARTBEAT, reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, read
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio


def depending(name: str, *on: str) -> dict[str, Any]:
    doc = flux_process(name)
    doc["spec"]["dependsOn"] = [{"name": dep, "mustReach": "Attested"} for dep in on]
    return doc


async def stalled(kc: KubeClient, ns: str, name: str) -> tuple[str, str, str] | None:
    """``(status, reason, message)`` of the Process's ``Stalled`` condition, None before it has one."""
    conditions = (await read(kc, PROCESSES, name, ns)).get("status", {}).get("conditions") or []
    for c in conditions:
        if c["type"] == "Stalled":
            return c["status"], c.get("reason", ""), c.get("message", "")
    return None


async def warnings(kc: KubeClient, ns: str, name: str, reason: str) -> int:
    """How many times a Warning Event ``reason`` was recorded about ``name`` (repeats fold into ``count``)."""
    events = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    return sum(e.get("count") or 1 for e in events
               if e["type"] == "Warning" and e["reason"] == reason and e["involvedObject"]["name"] == name)


async def test_two_processes_depending_on_each_other_stall_as_a_cycle_and_attest_once_it_is_broken(
    kc: KubeClient, namespace: str
) -> None:
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT):
        await kc.create(PROCESSES, depending("a", "b"), namespace)
        await kc.create(PROCESSES, depending("b", "a"), namespace)
        paths = {"a": f"{namespace}/a → {namespace}/b → {namespace}/a",
                 "b": f"{namespace}/b → {namespace}/a → {namespace}/b"}

        async def both_stalled() -> bool:
            for name, path in paths.items():
                found = await stalled(kc, namespace, name)
                if found is None or found[:2] != ("True", "DependencyCycle") or path not in found[2]:
                    return False
            return True

        await wait_for(both_stalled, timeout=30, what="a and b Stalled with reason DependencyCycle naming the path")
        for name in paths:
            process = await read(kc, PROCESSES, name, namespace)
            assert process["status"]["phase"] == "Forking"
            assert "pid" not in process["status"]  # no PID is allocated for a Process that can never run

        await kc.merge_patch(PROCESSES, "b", {"spec": {"dependsOn": []}}, namespace)

        async def both_attested() -> bool:
            for name in paths:
                status = (await read(kc, PROCESSES, name, namespace)).get("status", {})
                if status.get("phase") != "Attested":
                    return False
            return True

        await wait_for(both_attested, timeout=60, what="b, then a, to reach Attested once the cycle is broken")
        for name in paths:
            assert await stalled(kc, namespace, name) == ("False", "Attested", "attested generation 0")
            assert await warnings(kc, namespace, name, "DependencyCycle") == 1


async def test_a_child_naming_a_parent_pid_nobody_holds_stalls_until_a_process_holds_it(
    kc: KubeClient, namespace: str
) -> None:
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT):
        # The future parent is suspended before its first pass, so it never forks; its PID is written
        # by hand below, as the parent getting its PID would.
        holder = flux_process("holder")
        holder["spec"]["suspended"] = True
        await kc.create(PROCESSES, holder, namespace)
        child = flux_process("child")
        child["spec"]["identity"] = {"parent": "fam.1"}
        await kc.create(PROCESSES, child, namespace)
        message = "spec.identity.parent fam.1: no Process holds this PID"

        await wait_for(lambda: _is(stalled(kc, namespace, "child"), ("True", "ParentNotFound", message)),
                       timeout=30, what="child Stalled with reason ParentNotFound")
        assert "pid" not in (await read(kc, PROCESSES, "child", namespace))["status"]

        await kc.merge_patch(PROCESSES, "holder", {"status": {"phase": "Forking", "pid": "fam.1"}}, namespace,
                             subresource="status")

        async def child_attested_under_the_parent() -> str | None:
            status = (await read(kc, PROCESSES, "child", namespace)).get("status", {})
            return status.get("pid") if status.get("phase") == "Attested" else None

        pid = await wait_for(child_attested_under_the_parent, timeout=60, what="child Attested with a PID under fam.1")
        assert pid.startswith("fam.1.")
        assert (await stalled(kc, namespace, "child") or ("",))[0] == "False"
        assert await warnings(kc, namespace, "child", "ParentNotFound") == 1


async def _is(awaitable: Any, expected: Any) -> bool:
    return bool(await awaitable == expected)
