"""Faults during a burst, then the invariants (tests/faults/harness.py): nothing lost, nothing doubled.

Each test runs both reconcilers as subprocesses and a Flux stand-in in-process against this module's
own control plane, creates a burst (a pool of 3, 8 Processes, 3 allocations) with seeded gaps, and
injects its fault at seeded points of the burst and after it. The seeded waits *are* the faults'
timing (when to strike, how long a pause lasts); every wait for an outcome is a condition with a
deadline. The seed is printed; ``TATARA_FAULT_SEED`` repeats a run.
"""

from __future__ import annotations

import random

import anyio
import msgspec
import pytest

from shared.domain.resources import PROCESS_TABLES
from shared.kube.client import KubeClient
from shared.kube.errors import NotFound
from tests.faults.conftest import SEED
from tests.faults.harness import (
    Binaries,
    Fault,
    burst_documents,
    burst_with_faults,
    check_invariants,
    flux,
    leader_of,
    retried,
)
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

PROCS = [f"p{i}" for i in range(8)]
ALLOCS = [f"a{i}" for i in range(3)]
POOL_SIZE = 3


async def burst(kc: KubeClient, ns: str, rng: random.Random, faults: dict[int, Fault], done: list[str]) -> None:
    """Create the pool, the Processes and the allocations with seeded gaps (0–0.3 s); before create
    number ``i`` run ``faults[i]``."""
    await burst_with_faults(kc, ns, burst_documents(ns, PROCS, ALLOCS, pool_size=POOL_SIZE), rng, faults, done)


def strike_points(rng: random.Random, count: int) -> list[int]:
    """``count`` distinct seeded positions in the burst (after the pool and one Process exist)."""
    return sorted(rng.sample(range(2, 1 + len(PROCS) + len(ALLOCS)), count))


def note(done: list[str]) -> str:
    return f"seed {SEED}, faults: {'; '.join(done)}"


async def settle_check(kc: KubeClient, ns: str, binaries: Binaries, done: list[str]) -> None:
    try:
        await check_invariants(kc, ns, PROCS, ALLOCS, note=note(done))
    except (AssertionError, TimeoutError) as err:
        raise AssertionError(f"{note(done)}\n{err}\n{binaries.report()}") from None


async def test_sigkill_each_reconciler_at_seeded_moments(admin: KubeClient, ns: str, binaries: Binaries,
                                                         rng: random.Random) -> None:
    binaries.start("reconciler")
    binaries.start("pool")
    victims = ["reconciler", "pool", rng.choice(["reconciler", "pool"])]
    rng.shuffle(victims)

    def killer(role: str) -> Fault:
        async def kill() -> str:
            (victim,) = binaries.alive(role)
            binaries.kill(victim)
            binaries.start(role)
            return f"SIGKILL {role}"
        return kill

    done: list[str] = []
    async with flux(admin, ns, binaries, done):
        await burst(admin, ns, rng, dict(zip(strike_points(rng, 2), map(killer, victims[:2]), strict=True)), done)
        pause = rng.uniform(0.5, 3.0)
        await anyio.sleep(pause)  # the third kill strikes while the burst converges
        done.append(f"+{pause:.2f} s after the burst: {await killer(victims[2])()}")
        await settle_check(admin, ns, binaries, done)


async def test_an_apiserver_restart_and_pause_lose_nothing(admin: KubeClient, ns: str, binaries: Binaries,
                                                           plane: LocalControlPlane, rng: random.Random) -> None:
    binaries.start("reconciler")
    binaries.start("pool")

    async def restart() -> str:
        await anyio.to_thread.run_sync(plane.restart_apiserver)
        return "kube-apiserver restarted"

    async def pause() -> str:
        seconds = rng.uniform(1.0, 3.0)
        with plane.apiserver_paused():
            await anyio.sleep(seconds)  # the length of the SIGSTOP is the fault
        return f"kube-apiserver SIGSTOPped {seconds:.2f} s"

    first, second = strike_points(rng, 2)
    order = [restart, pause]
    rng.shuffle(order)
    done: list[str] = []
    async with flux(admin, ns, binaries, done):
        await burst(admin, ns, rng, {first: order[0], second: order[1]}, done)
        await settle_check(admin, ns, binaries, done)


async def test_two_replicas_survive_their_leader_being_killed(admin: KubeClient, ns: str, binaries: Binaries,
                                                              rng: random.Random) -> None:
    for role in ("reconciler", "pool", "reconciler", "pool"):
        binaries.start(role, leader_elect=True)
    leases = {"reconciler": "tatara-reconciler", "pool": "tatara-pool-reconciler"}

    def kill_leader(role: str) -> Fault:
        async def kill() -> str:
            identity = await leader_of(admin, ns, leases[role], binaries, role)
            (victim,) = binaries.leading_as(identity, role)
            binaries.kill(victim)
            return f"SIGKILL the {role} leader {identity}"
        return kill

    roles = ["reconciler", "pool"]
    rng.shuffle(roles)
    done: list[str] = []
    async with flux(admin, ns, binaries, done):
        await burst(admin, ns, rng, dict(zip(strike_points(rng, 2), map(kill_leader, roles), strict=True)), done)
        for role, lease in leases.items():  # the survivor took over
            survivor = await leader_of(admin, ns, lease, binaries, role)
            done.append(f"{role} now led by {survivor}")
        await settle_check(admin, ns, binaries, done)


async def test_deleting_the_process_table_hands_no_pid_out_twice(admin: KubeClient, ns: str, binaries: Binaries,
                                                                 rng: random.Random) -> None:
    binaries.start("reconciler")
    binaries.start("pool")

    stripped: list[bool] = []  # whether the fault stripped the finalizer, as the fault itself decided

    async def delete_table() -> str:
        await retried(lambda: admin.delete(PROCESS_TABLES, "proc", None), what="deleting the table")
        forced = rng.random() < 0.5
        stripped.append(forced)
        if forced:  # as `kubectl patch processtable proc --type=merge -p '{"metadata":{"finalizers":null}}'`
            await retried(lambda: admin.merge_patch(PROCESS_TABLES, "proc", {"metadata": {"finalizers": None}}, None),
                          what="stripping the table's finalizer")
        return "ProcessTable deleted" + (" and its finalizer stripped" if forced else "")

    async def table_back() -> bool:
        try:
            table = msgspec.json.decode(await retried(lambda: admin.get(PROCESS_TABLES, "proc"), what="the table"))
        except NotFound:
            return False
        return not table["metadata"].get("deletionTimestamp")

    (point,) = strike_points(rng, 1)
    done: list[str] = []
    async with flux(admin, ns, binaries, done):
        await burst(admin, ns, rng, {point: delete_table}, done)
        await settle_check(admin, ns, binaries, done)
    assert len(stripped) == 1, note(done)  # the fault ran, once
    if stripped[0]:
        await wait_for(table_back, timeout=30, what="the table recreated")
