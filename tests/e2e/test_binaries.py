"""Both binaries as real subprocesses against the local control plane: a SIGHUP reconverge through
``tatara signal``, a pool bind and release, a SIGKILLed Process reconciler restarted with nothing lost, and
``/metrics`` of both counting the work it drives.

One module-scoped setup (CRDs, both reconcilers, the Flux stand-in) is shared by every test here; each test
works in its own namespace.
"""

from __future__ import annotations

import copy
import os
import signal
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, PROCESSES
from shared.kube.client import NAMESPACES, KubeClient
from tests.integration.pool_reconciler.test_pool_allocation import (
    allocation_doc,
    bound_to,
    pool_doc,
    read,
    read_or_none,
    wait_free,
    wait_phase,
)
from tests.support.kube import wait_for
from tests.support.standin_thread import flux_standin_thread
from tools.controlplane import LocalControlPlane
from tools.controlplane.cluster import free_port
from tools.crds import all_crds, install_crds
from tools.up import Daemon, _start, ensure_namespace, load_examples, reconcilers, wait_ready

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0
STANDIN_DELAY = 1.5
"""Seconds the Flux stand-in waits before marking an object Ready: keeps Processes between phases long
enough for the SIGKILL test to catch them there."""


@dataclass
class Binaries:
    kubeconfig: Path
    logs: Path
    daemons: list[Daemon]

    @property
    def reconciler(self) -> Daemon:
        return self.daemons[0]

    @property
    def pool(self) -> Daemon:
        return self.daemons[1]


@pytest.fixture(scope="module")
def binaries(control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Binaries]:
    """CRDs installed, both reconcilers running as subprocesses (metrics on free loopback ports, so a
    ``make run`` on the default ports does not collide), the Flux stand-in in a thread; all stopped at the
    end of the module."""
    kubeconfig = control_plane.kubeconfig
    logs = tmp_path_factory.mktemp("binaries")

    async def install() -> None:
        async with await KubeClient.from_kubeconfig(kubeconfig) as client:
            await install_crds(client, all_crds())

    anyio.run(install)
    with (flux_standin_thread(kubeconfig, delay=STANDIN_DELAY),
          reconcilers(kubeconfig, logs, free_port(), free_port()) as daemons):
        anyio.run(wait_ready, daemons, 60.0)
        yield Binaries(kubeconfig, logs, daemons)


@pytest.fixture
async def kc(binaries: Binaries) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(binaries.kubeconfig) as client:
        yield client


@pytest.fixture
async def ns(kc: KubeClient) -> AsyncIterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    await ensure_namespace(kc, name)
    yield name
    await kc.delete(NAMESPACES, name)


def process_doc(name: str, *, sighup: str = "Reconverge") -> dict[str, Any]:
    """The podinfo example (examples/flux-intent.yaml) under another name, its own Flux path."""
    (example,) = [ex for ex in load_examples(ROOT / "examples") if ex.name == "podinfo"]
    doc = copy.deepcopy(example.doc)
    doc["metadata"] = {"name": name}
    doc["spec"]["intent"]["flux"]["path"] = f"./apps/{name}"
    doc["spec"]["signals"] = {"sighupStrategy": sighup}
    return doc


async def status_of(kc: KubeClient, name: str, ns: str) -> dict[str, Any]:
    obj = await read_or_none(kc, PROCESSES, name, ns)
    return (obj or {}).get("status") or {}


async def wait_attested(kc: KubeClient, name: str, ns: str, generation: int = 0) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        status = await status_of(kc, name, ns)
        attestation = status.get("attestation") or {}
        if status.get("phase") == "Attested" and attestation.get("generation", -1) >= generation:
            return status
        return None

    return await wait_for(probe, timeout=TIMEOUT, interval=0.2, what=f"{ns}/{name} Attested, generation {generation}")


def scrape(port: int) -> dict[str, float]:
    """Every sample of ``/metrics`` on ``port``, summed by sample name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


# ── the tests ──────────────────────────────────────────────────────────────────


async def test_sighup_via_tatara_signal_reconverges_to_the_next_generation_chained_to_the_last(
    binaries: Binaries, kc: KubeClient, ns: str
) -> None:
    await kc.create(PROCESSES, process_doc("hup"), ns)
    before = await wait_attested(kc, "hup", ns)
    first = before["attestation"]

    with anyio.fail_after(60):
        result = await anyio.run_process(
            [sys.executable, "-m", "tools.cli", "signal", "hup", "SIGHUP", "-n", ns,
             "--kubeconfig", str(binaries.kubeconfig)], cwd=ROOT, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert b"SIGHUP" in result.stdout

    after = await wait_attested(kc, "hup", ns, generation=first["generation"] + 1)
    second = after["attestation"]
    assert second["generation"] == first["generation"] + 1
    assert second["previousRoot"] == first["composedRoot"]
    assert after["pid"] == before["pid"]  # a reconverge keeps the PID


async def test_a_pool_binds_an_allocation_and_returns_the_member_when_it_is_deleted(
    binaries: Binaries, kc: KubeClient, ns: str
) -> None:
    await kc.create(EPHEMERAL_POOLS, pool_doc("warm", 2), ns)
    await wait_free(kc, ns, "warm", 2)
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("a1", "warm", ns), ns)
    alloc = await wait_phase(kc, ns, "a1", "Bound")
    assigned = alloc["status"]["assignedProcess"]["name"]
    assert bound_to(await read(kc, PROCESSES, assigned, ns), ns, "a1")

    await kc.delete(EPHEMERAL_ALLOCATIONS, "a1", ns)

    async def gone() -> bool:
        return await read_or_none(kc, EPHEMERAL_ALLOCATIONS, "a1", ns) is None

    await wait_for(gone, timeout=TIMEOUT, interval=0.2, what="allocation a1 deleted")
    returned = await wait_free(kc, ns, "warm", 2)
    assert assigned in {m["metadata"]["name"] for m in returned}


async def test_a_sigkilled_process_reconciler_restarts_and_loses_nothing(
    binaries: Binaries, kc: KubeClient, ns: str
) -> None:
    names = [f"k{i}" for i in range(6)]
    for name in names:
        await kc.create(PROCESSES, process_doc(name), ns)

    async def mid_run() -> dict[str, dict[str, Any]] | None:
        statuses = {name: await status_of(kc, name, ns) for name in names}
        phases = [s.get("phase", "Pending") for s in statuses.values()]
        started = sum(p != "Pending" for p in phases)
        unfinished = sum(p != "Attested" for p in phases)  # a new Process is written Running in one pass
        return statuses if started >= 2 and unfinished >= 2 else None

    seen = await wait_for(mid_run, timeout=TIMEOUT, interval=0.05, what="Processes between phases")
    victim = binaries.reconciler
    os.killpg(victim.proc.pid, signal.SIGKILL)
    assert victim.proc.wait(30) == -signal.SIGKILL

    # Restart with the same arguments, in the same slot of the list the module fixture stops at the end.
    logs = binaries.logs / "restarted"
    logs.mkdir(exist_ok=True)
    restarted = _start(victim.name, "reconciler.main", victim.proc.args[3:], binaries.kubeconfig, logs,
                       victim.port)
    binaries.daemons[0] = restarted
    await wait_ready([restarted], 60.0)

    final = {name: await wait_attested(kc, name, ns) for name in names}
    pids = [status["pid"] for status in final.values()]
    assert all(pids), final
    assert len(set(pids)) == len(names), pids  # one PID each, none shared
    for name, status in seen.items():  # a PID held before the kill is the one kept after it
        if status.get("pid"):
            assert final[name]["pid"] == status["pid"], (name, status["pid"], final[name]["pid"])
    for name, status in final.items():
        assert len(status.get("fluxResources") or []) == 1, (name, status.get("fluxResources"))
        assert (status.get("attestation") or {}).get("generation") == 0, name


async def test_metrics_of_both_binaries_count_the_work_done(binaries: Binaries, kc: KubeClient, ns: str) -> None:
    """The counters move for work this test drives itself (read before and after), so it holds alone or
    after a restart reset them."""
    assert all(d.proc.poll() is None for d in binaries.daemons), [d.log for d in binaries.daemons]
    before_reconciler, before_pool = scrape(binaries.reconciler.port), scrape(binaries.pool.port)
    await kc.create(PROCESSES, process_doc("counted"), ns)
    await kc.create(EPHEMERAL_POOLS, pool_doc("metered", 1), ns)
    await wait_free(kc, ns, "metered", 1)
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation_doc("m1", "metered", ns), ns)
    await wait_phase(kc, ns, "m1", "Bound")
    await kc.delete(EPHEMERAL_ALLOCATIONS, "m1", ns)
    await wait_free(kc, ns, "metered", 1)
    await wait_attested(kc, "counted", ns)

    def grew(before: dict[str, float], port: int, name: str) -> bool:
        return scrape(port).get(name, 0.0) > before.get(name, 0.0)

    async def counted() -> bool:
        return (grew(before_reconciler, binaries.reconciler.port, "tatara_process_phase_transitions_total")
                and all(grew(before_pool, binaries.pool.port, name) for name in (
                    "tatara_pool_binds_total", "tatara_pool_releases_total", "tatara_allocation_bind_seconds_count")))

    await wait_for(counted, timeout=TIMEOUT, interval=0.2, what="the counters of both binaries to count this work")
