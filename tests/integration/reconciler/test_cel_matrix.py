"""A CEL postcondition gates attestation, and the example env matrix compiles into Processes the API
server accepts and the reconciler attests (docs/behaviour.md#cel-conditions, docs/lisp.md#tatara-compile)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from shared.domain.api.codec import wire_decoder
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process, ProcessStatus
from shared.domain.resources import PROCESSES
from shared.kube.client import KubeClient
from shared.kube.informer import Informer, WatchEventType
from tests.integration.reconciler.conftest import reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, phase_of, read
from tests.integration.reconciler.test_releasing import events_of
from tests.support.kube import wait_for
from tests.unit.reconciler.test_cel_runner import EXPONENTIAL
from tools.opscli import compile_lisp

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "lisp" / "echo-sweep.lisp"
GATE = 'process.metadata.annotations["example.tatara.pleme.io/gate"] == "open"'


async def test_a_cel_postcondition_gates_attestation(kc: KubeClient, namespace: str) -> None:
    process = flux_process("gated")
    process["metadata"]["annotations"] = {"example.tatara.pleme.io/gate": "closed"}
    process["spec"]["boundary"] = {"postconditions": [{"kind": "Cel", "params": {"expression": GATE}}]}
    async with reconciler_running(kc, namespace, heartbeat_seconds=1):
        await kc.create(PROCESSES, process, namespace)

        async def waiting() -> dict[str, Any] | None:
            status: dict[str, Any] = (await read(kc, PROCESSES, "gated", namespace)).get("status") or {}
            rows = status.get("boundary", {}).get("postconditions", [])
            return status if rows and status.get("message") == "waiting on postconditions" else None

        status = await wait_for(waiting, timeout=60, what="gated to wait on its CEL postcondition")
        assert status["phase"] == "Running"
        (row,) = status["boundary"]["postconditions"]
        assert row["satisfied"] is False
        assert row["message"] == f"CEL expression {GATE!r} is false"

        await kc.merge_patch(
            PROCESSES, "gated", {"metadata": {"annotations": {"example.tatara.pleme.io/gate": "open"}}}, namespace
        )

        async def attested() -> bool:
            return await phase_of(kc, namespace, "gated") == "Attested"

        await wait_for(attested, timeout=60, what="gated to attest once its gate is open")
        status = (await read(kc, PROCESSES, "gated", namespace))["status"]
        (row,) = status["boundary"]["postconditions"]
        assert row["satisfied"] is True


async def test_an_expression_beyond_its_cost_gives_an_unknown_row_and_one_warning_and_the_reconciler_goes_on(
        kc: KubeClient, namespace: str) -> None:
    """The expression compiles and passes the static bounds, but comparing its values costs 2**24: its
    worker is ended at the CPU limit, the row says so, and a Process applied after it still attests."""
    costly = flux_process("costly")
    costly["spec"]["boundary"] = {"postconditions": [{"kind": "Cel", "params": {"expression": EXPONENTIAL}}]}
    message = ("CEL expression exceeded its cost: evaluation stopped at its limit of 0.25 s of CPU time "
               "or 128 MiB of memory")
    async with reconciler_running(kc, namespace, heartbeat_seconds=1):
        await kc.create(PROCESSES, costly, namespace)

        async def stopped() -> dict[str, Any] | None:
            status: dict[str, Any] = (await read(kc, PROCESSES, "costly", namespace)).get("status") or {}
            rows = status.get("boundary", {}).get("postconditions", [])
            return status if rows and rows[0].get("message") == message else None

        status = await wait_for(stopped, timeout=60, what="costly's CEL row to say its cost was exceeded")
        assert status["phase"] == "Running"
        assert status["boundary"]["postconditions"][0]["satisfied"] is False
        await kc.create(PROCESSES, flux_process("after"), namespace)

        async def after_attested() -> bool:
            return await phase_of(kc, namespace, "after") == "Attested"

        await wait_for(after_attested, timeout=60, what="a Process applied after the costly one to attest")
        warnings = [(e["type"], e["reason"], e["message"]) for e in await events_of(kc, namespace, "costly")
                    if e["reason"] == "CelEvaluationFailed"]
        # heartbeats re-check the row with the same inputs (a cached result), so the message, and the
        # Event, are not repeated
        assert warnings == [("Warning", "CelEvaluationFailed", f"spec.boundary.postconditions[0]: {message}")]
        assert await phase_of(kc, namespace, "costly") == "Running"


async def test_the_example_matrix_applies_and_every_environment_attests(kc: KubeClient, namespace: str) -> None:
    """Each environment is ephemeral with ``teardownPolicy: Always``: it leaves Attested for Exiting at
    once, so the statuses are taken from a watch (every change), not from polls that can miss Attested."""
    docs = compile_lisp(EXAMPLE.read_text(), namespace)
    names = [d["metadata"]["name"] for d in docs]
    assert len(names) == 4
    attested: dict[str, ProcessStatus] = {}

    def record(event: WatchEventType, old: Process | None, new: Process) -> None:
        if new.status is not None and new.phase is ProcessPhase.ATTESTED:
            attested.setdefault(new.metadata.name or "", new.status)

    watch = Informer(kc, PROCESSES, Process, namespace=namespace, decoder=wire_decoder(Process).decode)
    watch.add_handler(record)
    async with reconciler_running(kc, namespace, heartbeat_seconds=1), anyio.create_task_group() as tg:
        tg.start_soon(watch.run)
        await watch.wait_synced()
        for doc in docs:
            await kc.create(PROCESSES, doc, namespace)

        async def all_attested() -> bool:
            return set(attested) == set(names)

        await wait_for(all_attested, timeout=90, what="the four matrix environments to attest")
        tg.cancel_scope.cancel()
    for name in names:
        (row,) = attested[name].boundary.postconditions
        assert row.kind.value == "Cel"
        assert row.satisfied is True
