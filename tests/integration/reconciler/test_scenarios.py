"""Lifecycle scenarios (docs/behaviour.md#phases) against the real API server with the reconciler running:
the upstream closed-loop-ephemeral example, SIGSTOP/SIGCONT/SIGTERM/SIGKILL, deleting a parent with
children, Failed → Reaped for an ephemeral Process, and a controller restart mid-lifecycle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from shared.domain import annotations as ann
from shared.domain import finalizers as fin
from shared.domain.resources import PROCESS_TABLES, PROCESSES
from shared.kube.client import EVENTS, KubeClient, Resource
from shared.kube.errors import NotFound
from tests.integration.reconciler.conftest import NO_HEARTBEAT, reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, phase_of, read
from tests.support.kube import load_yaml_docs, wait_for
from tools.standins.flux import HELM_RELEASES, KUSTOMIZATIONS, OCI_REPOSITORIES, Failure

pytestmark = pytest.mark.anyio

EXAMPLES = Path(__file__).resolve().parents[2] / "fixtures" / "upstream-tatara" / "examples"
EXAMPLE = EXAMPLES / "closed-loop-ephemeral.yaml"


async def gone(kc: KubeClient, resource: Resource, name: str, ns: str | None) -> bool:
    try:
        await kc.get(resource, name, ns)
    except NotFound:
        return True
    return False


async def status_of(kc: KubeClient, ns: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = (await read(kc, PROCESSES, name, ns)).get("status") or {}
    return status


async def signal(kc: KubeClient, ns: str, name: str, value: str) -> None:
    await kc.merge_patch(PROCESSES, name, {"metadata": {"annotations": {ann.SIGNAL: value}}}, ns)


def reached(kc: KubeClient, ns: str, name: str, phase: str) -> Any:
    async def probe() -> bool:
        return await phase_of(kc, ns, name) == phase

    return probe


def closed_loop_example(namespace: str) -> dict[str, Any]:
    """The upstream example, adapted only where this cluster or our scope requires it."""
    (process,) = load_yaml_docs(EXAMPLE)
    # The test runs in its own namespace (the fixture's), not `demo-test`, so tests stay isolated;
    # intent.aplicacao.targetNamespace is only a HelmRelease field and stays as written.
    process["metadata"]["namespace"] = namespace
    post = process["spec"]["boundary"]["postconditions"]
    # HelmReleaseReleased names a HelmRelease *object*; the reconciler names it after the Process
    # (metadata.name = P, in the Process namespace: docs/behaviour.md#helmrelease-and-ocirepository).
    # Upstream points it at the Helm releaseName in demo-test, an object that never exists, so the
    # reference never attests this example.
    post[0]["params"] = {"name": "closed-loop-attest", "namespace": namespace}
    # ClosedLoopAuth waits for the chart's closed-loop-probe Job and its receipt ConfigMap; no chart
    # is installed here (Flux is a stand-in, tools/standins/flux.py), so nothing would ever produce them.
    del post[1]
    return process


async def test_the_closed_loop_ephemeral_example_attests_then_tears_down(kc: KubeClient, namespace: str) -> None:
    # With no heartbeat within the test's reach, reaching Exiting proves the Attested write asked for
    # the next pass at TICK: the teardown follows the attestation at once, not a heartbeat later.
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT):
        await kc.create(PROCESSES, closed_loop_example(namespace), namespace)
        await wait_for(lambda: gone(kc, PROCESSES, "closed-loop-attest", namespace), timeout=60,
                       what="closed-loop-attest to attest, then be reaped and deleted")

        # Phase history from our Events (PhaseX, recorded on every transition).
        items = msgspec.json.decode(await kc.list(EVENTS, namespace))["items"]
        ours = sorted((e for e in items if e["involvedObject"]["name"] == "closed-loop-attest"
                       and e["reason"].startswith("Phase")),
                      key=lambda e: (e.get("eventTime") or e.get("firstTimestamp") or "", e["metadata"]["name"]))
        history = [e["reason"].removeprefix("Phase") for e in ours]
        for phase in ("Forking", "Execing", "Running", "Attested", "Exiting", "Zombie", "Reaped"):
            assert phase in history, (phase, history)
        assert history.index("Attested") < history.index("Exiting") < history.index("Zombie") < history.index("Reaped")
        # Attested is followed directly by the teardown: no Reconverging or second attestation between.
        assert history[history.index("Attested") + 1] == "Exiting"
        attested = next(e for e in ours if e["reason"] == "PhaseAttested")
        assert "attested generation 0" in attested["message"]
        exiting = next(e for e in ours if e["reason"] == "PhaseExiting")
        assert exiting["message"] == "ephemeral lifetime: teardown_policy=OnAttested fired on Attested"

        # Its HelmRelease + OCIRepository were rendered (and torn down with it).
        await wait_for(lambda: gone(kc, HELM_RELEASES, "closed-loop-attest", namespace), timeout=30,
                       what="the HelmRelease to be torn down")
        await wait_for(lambda: gone(kc, OCI_REPOSITORIES, "closed-loop-attest", namespace), timeout=30,
                       what="the OCIRepository to be torn down")


async def test_the_closed_loop_example_renders_helmrelease_and_ocirepository(kc: KubeClient, namespace: str) -> None:
    """The rendered objects, checked while they exist: teardown is held back by the Flux stand-in."""
    async with reconciler_running(kc, namespace, flux_delay=30):
        await kc.create(PROCESSES, closed_loop_example(namespace), namespace)
        await wait_for(reached(kc, namespace, "closed-loop-attest", "Running"), timeout=30, what="Running")
        process = await read(kc, PROCESSES, "closed-loop-attest", namespace)
        oci = await read(kc, OCI_REPOSITORIES, "closed-loop-attest", namespace)
        release = await read(kc, HELM_RELEASES, "closed-loop-attest", namespace)
    assert oci["spec"]["url"] == "oci://ghcr.io/pleme-io/charts/lareira-demo-app"
    assert oci["spec"]["ref"] == {"tag": "0.5.5"}
    assert release["spec"]["releaseName"] == "demo-app-consolidated"
    assert release["spec"]["targetNamespace"] == "demo-test"
    assert release["spec"]["chartRef"] == {"kind": "OCIRepository", "name": "closed-loop-attest",
                                          "namespace": namespace}
    assert release["spec"]["values"]["profile"] == "all-in-one"
    assert release["spec"]["values"]["closedLoopProbe"]["enabled"] is True
    for child in (oci, release):
        (owner,) = child["metadata"]["ownerReferences"]
        assert owner["uid"] == process["metadata"]["uid"]
        assert owner["controller"] is True


async def test_sigstop_suspends_and_sigcont_resumes(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace, flux_delay=3) as manager:
        await kc.create(PROCESSES, flux_process("stop"), namespace)
        await wait_for(reached(kc, namespace, "stop", "Running"), timeout=30, what="Running")
        await signal(kc, namespace, "stop", "SIGSTOP")

        async def suspended(value: bool) -> bool:
            process = await read(kc, PROCESSES, "stop", namespace)
            cleared = ann.SIGNAL not in (process["metadata"].get("annotations") or {})
            return cleared and process["spec"].get("suspended") is value

        await wait_for(lambda: suspended(True), timeout=30, what="spec.suspended=true, annotation cleared")

        async def child_ready_and_settled() -> bool:
            child = await read(kc, KUSTOMIZATIONS, "stop", namespace)
            ready = any(c["type"] == "Ready" and c["status"] == "True"
                        for c in child.get("status", {}).get("conditions", []))
            return ready and manager.idle()

        await wait_for(child_ready_and_settled, timeout=30, what="the child Ready and the queue settled")
        assert await phase_of(kc, namespace, "stop") == "Running"  # suspended: no progress

        await signal(kc, namespace, "stop", "SIGCONT")
        await wait_for(lambda: suspended(False), timeout=30, what="spec.suspended=false, annotation cleared")
        await wait_for(reached(kc, namespace, "stop", "Attested"), timeout=30, what="Attested after SIGCONT")


async def test_sigterm_on_an_attested_process_exits_and_reaps(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace):
        await kc.create(PROCESSES, flux_process("term"), namespace)
        await wait_for(reached(kc, namespace, "term", "Attested"), timeout=60, what="Attested")
        await signal(kc, namespace, "term", "SIGTERM")
        await wait_for(reached(kc, namespace, "term", "Reaped"), timeout=30, what="Reaped after SIGTERM")
        await wait_for(lambda: gone(kc, KUSTOMIZATIONS, "term", namespace), timeout=30, what="children torn down")

        async def released() -> bool:
            process = await read(kc, PROCESSES, "term", namespace)
            return fin.PROCESS not in (process["metadata"].get("finalizers") or [])

        await wait_for(released, timeout=30, what="the finalizer released")
        process = await read(kc, PROCESSES, "term", namespace)
    # A permanent Process stays as a Reaped record (docs/behaviour.md#reaped), the signal consumed.
    assert ann.SIGNAL not in (process["metadata"].get("annotations") or {})
    assert process["metadata"].get("deletionTimestamp") is None


async def test_sigkill_on_an_attested_process_reaps_at_once(kc: KubeClient, namespace: str) -> None:
    async with reconciler_running(kc, namespace):
        await kc.create(PROCESSES, flux_process("kill"), namespace)
        await wait_for(reached(kc, namespace, "kill", "Attested"), timeout=60, what="Attested")
        await signal(kc, namespace, "kill", "SIGKILL")
        await wait_for(reached(kc, namespace, "kill", "Reaped"), timeout=30, what="Reaped after SIGKILL")
        await wait_for(lambda: gone(kc, KUSTOMIZATIONS, "kill", namespace), timeout=30, what="children torn down")
        status = await status_of(kc, namespace, "kill")
    assert status["exitCode"] == 137


async def test_deleting_a_parent_terminates_its_children_first(kc: KubeClient, namespace: str) -> None:
    names = ("parent", "child-a", "child-b")
    async with reconciler_running(kc, namespace):
        parent = await kc.create(PROCESSES, flux_process("parent"), namespace)
        parent_uid = msgspec.json.decode(parent)["metadata"]["uid"]
        await wait_for(reached(kc, namespace, "parent", "Attested"), timeout=60, what="parent Attested")
        pid = (await status_of(kc, namespace, "parent"))["pid"]
        for name in names[1:]:
            child = flux_process(name)
            child["spec"]["identity"] = {"parent": pid}
            # As a composing tool would: the children belong to the parent, so the garbage
            # collector removes their Reaped records once the parent is gone.
            child["metadata"]["ownerReferences"] = [{"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process",
                                                     "name": "parent", "uid": parent_uid}]
            await kc.create(PROCESSES, child, namespace)

        async def children_attested() -> bool:
            return all([await phase_of(kc, namespace, n) == "Attested" for n in names[1:]])

        await wait_for(children_attested, timeout=60, what="both children Attested")
        for name in names[1:]:
            assert (await status_of(kc, namespace, name))["pid"].startswith(pid + ".")

        await kc.delete(PROCESSES, "parent", namespace)
        violations: list[dict[str, str | None]] = []

        async def watch_order() -> bool:
            seen: dict[str, str | None] = {}
            for name in names:
                try:
                    seen[name] = await phase_of(kc, namespace, name)
                except NotFound:
                    seen[name] = "gone"
            parent_done = seen["parent"] in ("Zombie", "Reaped", "gone")
            if parent_done and any(seen[n] not in ("Reaped", "gone") for n in names[1:]):
                violations.append(seen)
            return all(phase == "gone" for phase in seen.values())

        await wait_for(watch_order, timeout=60, interval=0.02, what="parent and children gone")
    assert violations == [], violations
    # Nothing left with our finalizer in the namespace.
    items = msgspec.json.decode(await kc.list(PROCESSES, namespace))["items"]
    assert [i["metadata"]["name"] for i in items if fin.PROCESS in (i["metadata"].get("finalizers") or [])] == []


def ephemeral_helm_process(name: str, **boundary: Any) -> dict[str, Any]:
    process = flux_process(name)
    process["spec"]["intent"] = {"aplicacao": {"chartRef": "oci://example.test/charts/demo", "version": "1.0.0"}}
    process["spec"]["lifetime"] = {"ephemeral": {"ttl": "1h", "teardownPolicy": "OnFailed"}}
    if boundary:
        process["spec"]["boundary"] = boundary
    return process


async def _failed_then_reaped(kc: KubeClient, namespace: str, process: dict[str, Any]) -> dict[str, Any]:
    """Create ``process`` and return the status it had when Failed, once it is reaped, deleted and its
    HelmRelease torn down. The statuses are recorded by a watch from before the create: Failed → Reaped →
    deleted can pass between two reads of a poll."""
    name = process["metadata"]["name"]
    listed = msgspec.json.decode(await kc.list(PROCESSES, namespace))
    statuses: list[dict[str, Any]] = []

    async def record() -> None:
        async for event in kc.watch(PROCESSES, namespace, resource_version=listed["metadata"]["resourceVersion"],
                                    timeout_seconds=300, inactivity_timeout=120):
            obj = msgspec.json.decode(event.object)
            if event.type in ("ADDED", "MODIFIED") and obj["metadata"]["name"] == name:
                statuses.append(obj.get("status") or {})

    async with anyio.create_task_group() as tg:
        tg.start_soon(record)
        await kc.create(PROCESSES, process, namespace)

        async def failed() -> dict[str, Any] | None:
            return next((s for s in statuses if s.get("phase") == "Failed"), None)

        status = await wait_for(failed, timeout=20, what=f"{name} Failed")
        await wait_for(lambda: gone(kc, PROCESSES, name, namespace), timeout=30, what=f"{name} reaped and deleted")
        await wait_for(lambda: gone(kc, HELM_RELEASES, name, namespace), timeout=30, what="its HelmRelease torn down")
        tg.cancel_scope.cancel()
    return status


async def test_a_stalled_helmrelease_fails_the_process_then_it_is_reaped(kc: KubeClient, namespace: str) -> None:
    def verdict(resource: Resource, obj: dict[str, Any]) -> Failure | None:
        # helm-controller once its install retries are spent: Ready=False InstallFailed, Stalled RetriesExceeded
        return Failure("InstallFailed", stalled="RetriesExceeded") if resource is HELM_RELEASES else None

    async with reconciler_running(kc, namespace, verdict=verdict):
        status = await _failed_then_reaped(kc, namespace, ephemeral_helm_process("stalls"))
    assert status["exitCode"] == 1
    assert "InstallFailed" in status["message"]
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True"


async def test_an_unready_helmrelease_past_the_boundary_timeout_fails_the_process(
    kc: KubeClient, namespace: str
) -> None:
    async with reconciler_running(kc, namespace, flux_delay=45):  # Flux "works" longer than the timeout
        status = await _failed_then_reaped(kc, namespace, ephemeral_helm_process("slow", timeout="7s"))
    assert status["exitCode"] == 124
    assert "boundary timeout 7s exceeded" in status["message"]


async def test_a_controller_restart_mid_lifecycle_loses_and_duplicates_nothing(
    kc: KubeClient, namespace: str
) -> None:
    async def next_sequence() -> int:
        try:
            table = await read(kc, PROCESS_TABLES, "proc", None)
        except NotFound:
            return 0
        return int(table.get("spec", {}).get("nextSequence") or 0)

    # First controller: the Flux stand-in holds the child un-Ready, so the Process stops in Running.
    initial = await next_sequence()
    async with reconciler_running(kc, namespace, flux_delay=120):
        await kc.create(PROCESSES, flux_process("restart"), namespace)

        async def running_with_pid() -> dict[str, Any] | None:
            status = await status_of(kc, namespace, "restart")
            return status if status.get("phase") == "Running" and status.get("pid") else None

        before = await wait_for(running_with_pid, timeout=30, what="Running with a PID")
    sequence = await next_sequence()
    assert sequence == (initial or 1) + 1  # one PID for it (a missing table is created at 1)

    # Second controller, fresh caches and queues.
    async with reconciler_running(kc, namespace):
        await wait_for(reached(kc, namespace, "restart", "Attested"), timeout=60, what="Attested after restart")
        after = await status_of(kc, namespace, "restart")
        assert await next_sequence() == sequence  # no second PID allocated
    assert after["pid"] == before["pid"]
    children = msgspec.json.decode(await kc.list(KUSTOMIZATIONS, namespace))["items"]
    assert [c["metadata"]["name"] for c in children] == ["restart"]
    assert len(after["fluxResources"]) == 1
    pids = [p["status"].get("pid") for p in msgspec.json.decode(await kc.list(PROCESSES, namespace))["items"]]
    assert pids == [before["pid"]]
