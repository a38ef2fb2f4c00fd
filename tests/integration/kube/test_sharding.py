"""Dynamic sharding's runtime against the real API server (docs/architecture.md#dynamic-sharding): members holding
labelled Leases, each running a controller over the ConfigMaps assigned to it with the drain gate, and one sharder.

Each member's reconcile records the interval it ran in (monotonic seconds, one process, so the intervals of all
members compare exactly) and asks to run again soon, so every object is being reconciled all the time. Checked
after a member joins and after one dies without releasing its Lease: every object ends up labelled for the member
the documented rendezvous hash picks among the live members, it is then reconciled there, and no object was ever
reconciled by two members at overlapping times. The expected member comes from the formula in the docs, computed
here (:func:`tests.unit.kube.test_sharding.documented_pick`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import msgspec
import pytest
from prometheus_client import CollectorRegistry

from shared.kube.client import CONFIG_MAPS, LEASES, KubeClient
from shared.kube.controller import Controller, Request, Result
from shared.kube.informer import Informer
from shared.kube.leader import LeaderElector, Lease, LeaseTiming
from shared.kube.metrics import RuntimeMetrics
from shared.kube.sharding import DrainGate, Membership, Ring, Sharder, ShardingMetrics, forget_gone_members
from shared.kube.store import object_key
from tests.integration.kube.conftest import ConfigMap
from tests.support.kube import wait_for
from tests.unit.kube.test_sharding import documented_pick

pytestmark = pytest.mark.anyio

TIMING = LeaseTiming(lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)
RING = Ring(name="toys", lease_label="example.com/ring", shard_label="shard.example.com/toys",
            drain_label="drain.example.com/toys")
OBJECTS = [f"cm-{i}" for i in range(12)]
AGAIN = 0.05
"""Seconds after which each member reconciles its objects again (so they are always being reconciled)."""
WORK = 0.2
"""Seconds one reconcile takes: a window in which another member's reconcile of the object would overlap (the
objects are being reconciled about 80 % of the time)."""


@dataclass
class Ledger:
    """Every reconcile of every member: (object, member, start, end), monotonic seconds."""

    runs: list[tuple[str, str, float, float]] = field(default_factory=list)

    def overlaps(self) -> list[str]:
        by_object: dict[str, list[tuple[float, float, str]]] = {}
        for obj, member, start, end in self.runs:
            by_object.setdefault(obj, []).append((start, end, member))
        found: list[str] = []
        for obj, runs in by_object.items():
            latest_end: dict[str, float] = {}  # member → the latest end of its runs started so far
            for start, end, member in sorted(runs):
                found.extend(f"{obj}: {other} until {until:.3f}, {member} from {start:.3f}"
                             for other, until in latest_end.items() if other != member and until > start)
                latest_end[member] = max(end, latest_end.get(member, end))
        return found

    def last_by(self, obj: str) -> str | None:
        runs = [r for r in self.runs if r[0] == obj]
        return max(runs, key=lambda r: r[3])[1] if runs else None

    def ran_since(self, obj: str, member: str, since: float) -> bool:
        return any(r[0] == obj and r[1] == member and r[2] >= since for r in self.runs)


@dataclass
class Member:
    name: str
    elector: LeaderElector
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


async def run_member(client: KubeClient, ns: str, name: str, ledger: Ledger, member: Member) -> None:
    """One member: its labelled Lease, and while holding it a controller over the ConfigMaps assigned to it."""
    owned = Informer(client, CONFIG_MAPS, ConfigMap, namespace=ns, label_selector=RING.member_selector(name))

    async def reconcile(request: Request) -> Result:
        if owned.get(str(request)) is None:
            return Result.done()  # not (or no longer) assigned here: a real reconcile reads its cache and stops
        started = time.monotonic()
        await anyio.sleep(WORK)  # the work itself (a simulated duration, not a synchronisation)
        ledger.runs.append((request.name, name, started, time.monotonic()))
        return Result.after(AGAIN)

    controller = Controller(f"toys-{name}", owned, reconcile, metrics=RuntimeMetrics(CollectorRegistry()))
    controller.set_gate(DrainGate(client, CONFIG_MAPS, owned, RING, controller=controller.name,
                                  metrics=ShardingMetrics(CollectorRegistry())))
    with member.scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(owned.run)
            await member.elector.run(controller.run)


@asynccontextmanager
async def sharder(client: KubeClient, ns: str) -> AsyncIterator[CollectorRegistry]:
    """A sharder of the namespace's ConfigMaps, running; yields the registry of its metrics."""
    registry = CollectorRegistry()
    leases = Informer(client, LEASES, Lease, namespace=ns, label_selector=RING.lease_selector)
    objects = Informer(client, CONFIG_MAPS, ConfigMap, namespace=ns)
    running = Sharder(client, CONFIG_MAPS, objects, Membership(leases), RING, hash_key=object_key,
                      metrics=ShardingMetrics(registry))
    async with anyio.create_task_group() as tg:
        tg.start_soon(leases.run)
        tg.start_soon(objects.run)
        tg.start_soon(running.run)
        yield registry
        tg.cancel_scope.cancel()


def new_member(client: KubeClient, ns: str, name: str, *, release: bool = True) -> Member:
    return Member(name, LeaderElector(client, name, ns, identity=f"{name}_1", timing=TIMING, labels={
        RING.lease_label: RING.name}, release_on_cancel=release, metrics=RuntimeMetrics(CollectorRegistry())))


class ConfigMapList(msgspec.Struct):
    items: list[ConfigMap]


async def labels_of(client: KubeClient, ns: str) -> dict[str, dict[str, str]]:
    listed = msgspec.json.decode(await client.list(CONFIG_MAPS, ns), type=ConfigMapList)
    return {cm.metadata.name or "": cm.metadata.labels for cm in listed.items}


async def settled(client: KubeClient, ns: str, members: list[str], ledger: Ledger, since: float) -> bool:
    """Every object is labelled for its documented member (no drain label) and was reconciled there since ``since``."""
    labels = await labels_of(client, ns)
    for name in OBJECTS:
        want = documented_pick(f"{ns}/{name}", members)
        got = labels.get(name, {})
        if got.get(RING.shard_label) != want or RING.drain_label in got or not ledger.ran_since(name, want, since):
            return False
    return True


async def test_objects_follow_the_ring_as_members_join_and_die_and_are_never_reconciled_twice_at_once(
        kclient: KubeClient, ns: str) -> None:
    ledger = Ledger()
    for name in OBJECTS:
        await kclient.create(CONFIG_MAPS, {"metadata": {"name": name, "namespace": ns}}, ns)
    members = {name: new_member(kclient, ns, name, release=name != "m1") for name in ("m0", "m1", "m2")}
    async with sharder(kclient, ns) as registry, anyio.create_task_group() as tg:
        start = time.monotonic()
        for name in ("m0", "m1"):
            tg.start_soon(run_member, kclient, ns, name, ledger, members[name])
        await wait_for(lambda: settled(kclient, ns, ["m0", "m1"], ledger, start), timeout=60,
                       what="every object assigned to and reconciled by its member of two")

        joined = time.monotonic()
        tg.start_soon(run_member, kclient, ns, "m2", ledger, members["m2"])
        await wait_for(lambda: settled(kclient, ns, ["m0", "m1", "m2"], ledger, joined), timeout=60,
                       what="the objects m2 now owns moved to it")
        moved = [n for n in OBJECTS if documented_pick(f"{ns}/{n}", ["m0", "m1"]) !=
                 documented_pick(f"{ns}/{n}", ["m0", "m1", "m2"])]
        assert moved, "with 12 objects some hash to the third member (else pick other names)"
        rebalanced = registry.get_sample_value("controller_sharding_assignments_total",
                                               {"ring": RING.name, "resource": "configmaps", "reason": "rebalance"})
        assert (rebalanced or 0) >= len(moved)

        of_m1 = [n for n in OBJECTS if documented_pick(f"{ns}/{n}", ["m0", "m1", "m2"]) == "m1"]
        assert of_m1, "with 12 objects some hash to m1 (else pick other names)"
        killed = time.monotonic()
        members["m1"].scope.cancel()  # dies: stops renewing, does not release its Lease
        await wait_for(lambda: settled(kclient, ns, ["m0", "m2"], ledger, killed), timeout=60,
                       what="m1's objects reassigned after its Lease expired, and reconciled there")
        resumed = max(min(r[2] for r in ledger.runs if r[0] == n and r[2] >= killed) for n in of_m1) - killed
        print(f"m1's {len(of_m1)} objects resumed elsewhere {resumed:.2f} s after it died "
              f"(lease {TIMING.lease_duration:g} s)")
        assert resumed >= TIMING.lease_duration - TIMING.retry_period - 0.1, \
            "a dead member's objects moved before its Lease could expire"
        tg.cancel_scope.cancel()
    assert ledger.overlaps() == []


async def test_the_leases_of_members_gone_a_while_are_deleted_and_a_live_ones_kept(
        kclient: KubeClient, ns: str) -> None:
    members = {name: new_member(kclient, ns, name, release=name != "dead") for name in ("live", "dead", "released")}
    leases = Informer(kclient, LEASES, Lease, namespace=ns, label_selector=RING.lease_selector)
    membership = Membership(leases)

    async def held_forever(member: Member) -> None:
        with member.scope:
            await member.elector.run(anyio.sleep_forever)

    async def names() -> set[str]:
        listed = msgspec.json.decode(await kclient.list(LEASES, ns), type=LeaseList)
        return {lease.metadata.name or "" for lease in listed.items}

    async with anyio.create_task_group() as tg:
        tg.start_soon(leases.run)
        for member in members.values():
            tg.start_soon(held_forever, member)
        await wait_for(lambda: _true(membership.alive() == {"live", "dead", "released"}), timeout=30,
                       what="three members alive")
        members["dead"].scope.cancel()  # no release: its Lease stays held until it expires
        members["released"].scope.cancel()  # released on the way out
        tg.start_soon(functools.partial(forget_gone_members, kclient, membership, after=1.0, every=0.1))
        await wait_for(lambda: _equal(names(), {"live"}), timeout=30, what="the gone members' Leases deleted")
        assert membership.alive() == {"live"}
        tg.cancel_scope.cancel()


class LeaseList(msgspec.Struct):
    items: list[Lease]


async def _true(value: bool) -> bool:
    return value


async def _equal(found: Awaitable[set[str]], expected: set[str]) -> bool:
    return await found == expected
