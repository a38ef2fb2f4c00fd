"""``lifetime.ephemeral.maxConcurrent`` against the real API server with the reconciler running
(docs/behaviour.md#maxconcurrent): a second Process of the same group waits in Pending, with the
message, until the first is Reaped and deleted; then it runs.

HEARTBEAT is far beyond every wait: the waiting Process can only have been woken by the watch event
of its sibling leaving."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from shared.domain.resources import PROCESSES
from shared.kube.client import KubeClient
from tests.integration.reconciler.conftest import NO_HEARTBEAT, reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, phase_of, read
from tests.integration.reconciler.test_releasing import events_of, gone
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio


def preview(name: str, cap: int = 1) -> dict[str, Any]:
    """An ephemeral Process in group ``name:preview`` that stays Attested (teardownPolicy Never, 1 h TTL)."""
    process = flux_process(name)
    process["spec"]["identity"] = {"nameOverride": "preview"}
    process["spec"]["lifetime"] = {"ephemeral": {"ttl": "1h", "teardownPolicy": "Never", "maxConcurrent": cap}}
    return process


async def test_the_second_process_waits_until_the_first_is_gone(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT):
        await kc.create(PROCESSES, preview("first"), namespace)

        async def first_attested() -> bool:
            return await phase_of(kc, namespace, "first") == "Attested"

        await wait_for(first_attested, timeout=60, what="first to attest")
        await kc.create(PROCESSES, preview("second"), namespace)
        expected = f"waiting: 1 of maxConcurrent=1 running: {namespace}/first"

        async def second_waits() -> bool:
            status = (await read(kc, PROCESSES, "second", namespace)).get("status") or {}
            return status.get("message") == expected

        await wait_for(second_waits, timeout=30, what="second to say it waits for first")
        status = (await read(kc, PROCESSES, "second", namespace))["status"]
        assert status["phase"] == "Pending"
        assert "pid" not in status
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "MaxConcurrent")
        reconciling = next(c for c in status["conditions"] if c["type"] == "Reconciling")
        assert reconciling["status"] == "True"
        assert [e["message"] for e in await events_of(kc, namespace, "second") if e["reason"] == "MaxConcurrent"] == [
            expected]

        await kc.delete(PROCESSES, "first", namespace)
        await wait_for(lambda: gone(kc, PROCESSES, "first", namespace), timeout=60, what="first to be reaped and gone")

        async def second_attested() -> bool:
            return await phase_of(kc, namespace, "second") == "Attested"

        await wait_for(second_attested, timeout=60, what="second to run once first left")


async def test_two_waiting_processes_start_one_at_a_time_oldest_first(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT):
        await kc.create(PROCESSES, preview("holder"), namespace)
        await wait_for(lambda: _phase_is(kc, namespace, "holder", "Attested"), timeout=60, what="holder to attest")
        await kc.create(PROCESSES, preview("older"), namespace)
        await kc.create(PROCESSES, preview("younger"), namespace)
        for name in ("older", "younger"):
            await wait_for(functools.partial(_message_starts, kc, namespace, name, "waiting: 1 of maxConcurrent=1"),
                           timeout=30, what=f"{name} to wait")

        await kc.delete(PROCESSES, "holder", namespace)
        await wait_for(lambda: _phase_is(kc, namespace, "older", "Attested"), timeout=60, what="older to run")
        # older holds the one slot now; younger is still Pending and says so.
        await wait_for(lambda: _message_starts(kc, namespace, "younger",
                                               f"waiting: 1 of maxConcurrent=1 running: {namespace}/older"),
                       timeout=30, what="younger to wait for older")
        assert await phase_of(kc, namespace, "younger") in (None, "Pending")


async def _phase_is(kc: KubeClient, ns: str, name: str, phase: str) -> bool:
    return await phase_of(kc, ns, name) == phase


async def _message_starts(kc: KubeClient, ns: str, name: str, prefix: str) -> bool:
    status = (await read(kc, PROCESSES, name, ns)).get("status") or {}
    return str(status.get("message", "")).startswith(prefix)
