"""Leader election against the real API server: one leader, takeover on expiry and on release, loss on stall.

Short timing (3 s lease, 2 s renew deadline, 0.5 s retry) keeps the module fast. The assertions are the
election's safety rules (docs/runtime.md, "Leader election"), never how fast something happened: a standby
takes over no earlier than a full lease duration after the holder's last renewal unless the holder released
the Lease, and a leader that cannot renew stops leading before a standby can take over. Where speed is the
point (a release hands over without waiting for expiry) the test uses a lease so long that only the rule
under test can make the handover happen before its deadline.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

import anyio
import msgspec
import pytest
from prometheus_client import CollectorRegistry

from shared.kube.client import LEASES, KubeClient
from shared.kube.leader import LeaderElector, LeadershipLost, Lease, LeaseTiming, format_micro_time
from shared.kube.metrics import RuntimeMetrics
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

TIMING = LeaseTiming(lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
LONG_LEASE = LeaseTiming(lease_duration=120.0, renew_deadline=2.0, retry_period=0.5)
"""A lease that cannot expire within any wait of this module: a handover under it proves a release."""


@dataclass
class Candidate:
    """One elector plus a record of when its work ran (monotonic seconds)."""

    elector: LeaderElector
    started: list[float] = field(default_factory=list)
    stopped: list[float] = field(default_factory=list)
    lost: bool = False

    async def work(self) -> None:
        self.started.append(time.monotonic())
        try:
            await anyio.sleep_forever()
        finally:
            self.stopped.append(time.monotonic())

    async def run(self) -> None:
        try:
            await self.elector.run(self.work)
        except LeadershipLost:
            self.lost = True


def candidate(client: KubeClient, namespace: str, identity: str, *, release_on_cancel: bool = True,
              timing: LeaseTiming = TIMING) -> Candidate:
    elector = LeaderElector(client, "tatara-test", namespace, identity=identity, timing=timing,
                            release_on_cancel=release_on_cancel, metrics=RuntimeMetrics(CollectorRegistry()))
    return Candidate(elector)


async def read_lease(client: KubeClient, namespace: str) -> Lease:
    return msgspec.json.decode(await client.get(LEASES, "tatara-test", namespace), type=Lease)


async def is_true(flag: bool) -> bool:
    return flag


async def standby_has_polled_since(standby: Candidate, since: float, attempts: int) -> bool:
    """True once the standby has reached the API server ``attempts`` retry periods after ``since``."""
    contact = standby.elector.last_contact
    return contact is not None and contact >= since + attempts * TIMING.retry_period


async def test_two_electors_exactly_one_leads(kclient: KubeClient, ns: str) -> None:
    a, b = candidate(kclient, ns, "a"), candidate(kclient, ns, "b")
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.run)
        tg.start_soon(b.run)

        async def someone_leads() -> bool:
            return bool(a.started or b.started)

        await wait_for(someone_leads, timeout=10, what="a leader")
        leader, standby = (a, b) if a.started else (b, a)
        await wait_for(lambda: standby_has_polled_since(standby, leader.started[0], 4), timeout=10,
                       what="the standby to poll for four retry periods")
        assert (leader.elector.is_leader, standby.elector.is_leader) == (True, False)
        assert (len(leader.started), standby.started) == (1, [])
        assert standby.elector.healthy()
        lease = await read_lease(kclient, ns)
        assert lease.spec.holder_identity == leader.elector.identity
        assert lease.spec.lease_duration_seconds == 3
        assert lease.spec.lease_transitions == 0
        assert lease.spec.renew_time is not None
        assert MICRO_TIME.match(lease.spec.renew_time)
        assert lease.spec.acquire_time is not None
        assert MICRO_TIME.match(lease.spec.acquire_time)
        tg.cancel_scope.cancel()


async def test_standby_takes_over_after_the_lease_duration_when_the_leader_vanishes(
    kclient: KubeClient, ns: str
) -> None:
    a = candidate(kclient, ns, "a", release_on_cancel=False)
    b = candidate(kclient, ns, "b")
    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as a_group:
            a_group.start_soon(a.run)
            await wait_for(lambda: is_true(a.elector.is_leader), timeout=10, what="a to lead")
            tg.start_soon(b.run)
            await wait_for(lambda: standby_has_polled_since(b, a.started[0], 2), timeout=10, what="b to stand by")
            a_group.cancel_scope.cancel()  # like a crash: no release
        a_last_renewed = a.elector.last_renewed
        assert a_last_renewed is not None

        await wait_for(lambda: is_true(bool(b.started)), timeout=TIMING.lease_duration + 10, what="b to take over")
        # b waited at least a full lease duration after a's last renewal: never two leaders at once
        assert b.started[0] - a_last_renewed >= TIMING.lease_duration
        assert a.stopped[0] <= b.started[0]
        lease = await read_lease(kclient, ns)
        assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("b", 1)
        tg.cancel_scope.cancel()


async def test_clean_release_hands_over_without_waiting_for_expiry(kclient: KubeClient, ns: str) -> None:
    a = candidate(kclient, ns, "a", timing=LONG_LEASE)
    b = candidate(kclient, ns, "b", timing=LONG_LEASE)
    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as a_group:
            a_group.start_soon(a.run)
            await wait_for(lambda: is_true(a.elector.is_leader), timeout=10, what="a to lead")
            tg.start_soon(b.run)
            await wait_for(lambda: standby_has_polled_since(b, a.started[0], 2), timeout=10, what="b to stand by")
            a_group.cancel_scope.cancel()
        released = await read_lease(kclient, ns)
        assert not released.spec.holder_identity, "a clean exit releases the Lease"
        stopped_leading = a.elector.stopped_leading_at
        assert stopped_leading is not None
        assert len(a.stopped) == 1
        assert a.stopped[0] <= stopped_leading  # work drained before a stopped leading and released

        # a's 120 s term has not expired: only the release lets b take over within this deadline
        await wait_for(lambda: is_true(bool(b.started)), timeout=30, what="b to take over")
        assert a.stopped[0] <= b.started[0]
        lease = await read_lease(kclient, ns)
        assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("b", 1)
        tg.cancel_scope.cancel()


SLOW_RENEW = LeaseTiming(lease_duration=120.0, renew_deadline=60.0, retry_period=30.0)
"""A leader that renews only every 30 s: nothing of its own moves the Lease's resourceVersion during a test."""


async def test_release_after_a_renewal_applied_behind_the_leaders_back_still_hands_over(
        kclient: KubeClient, ns: str) -> None:
    """A shutdown can cancel a renewal the API server still applies: the leader's last resourceVersion is then
    stale, and a release guarded by it alone is refused with 409, leaving the standby to wait out the lease."""
    a = candidate(kclient, ns, "a", timing=SLOW_RENEW)
    b = candidate(kclient, ns, "b", timing=LONG_LEASE)
    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as a_group:
            a_group.start_soon(a.run)
            await wait_for(lambda: is_true(a.elector.is_leader), timeout=10, what="a to lead")
            seen = await read_lease(kclient, ns)
            renewed = msgspec.structs.replace(seen, spec=msgspec.structs.replace(
                seen.spec, renew_time=format_micro_time(datetime.now(UTC))))
            applied = msgspec.json.decode(
                await kclient.replace(LEASES, "tatara-test", msgspec.to_builtins(renewed), ns), type=Lease)
            assert applied.metadata.resource_version != seen.metadata.resource_version
            assert applied.spec.holder_identity == "a"
            a_group.cancel_scope.cancel()
        released = await read_lease(kclient, ns)
        assert not released.spec.holder_identity, "the release is retried over the fresh resourceVersion"
        assert released.spec.lease_duration_seconds == 1
        tg.start_soon(b.run)
        await wait_for(lambda: is_true(bool(b.started)), timeout=30, what="b to take over")
        assert (await read_lease(kclient, ns)).spec.holder_identity == "b"
        tg.cancel_scope.cancel()


async def test_leader_that_cannot_renew_stops_before_a_standby_takes_over(
    kclient: KubeClient, ns: str, private_plane: LocalControlPlane
) -> None:
    a, b = candidate(kclient, ns, "a"), candidate(kclient, ns, "b")
    async with anyio.create_task_group() as tg:
        tg.start_soon(a.run)
        await wait_for(lambda: is_true(a.elector.is_leader), timeout=10, what="a to lead")
        tg.start_soon(b.run)
        await wait_for(lambda: standby_has_polled_since(b, a.started[0], 2), timeout=10, what="b to stand by")
        with private_plane.apiserver_paused():
            await wait_for(lambda: is_true(not a.elector.is_leader), timeout=TIMING.lease_duration + 10,
                           what="a to stop leading")
            await wait_for(lambda: is_true(a.lost), timeout=10, what="run to raise LeadershipLost")
        last_renewed, stopped_at = a.elector.last_renewed, a.elector.stopped_leading_at
        assert last_renewed is not None
        assert stopped_at is not None
        assert len(a.stopped) == 1
        # It kept retrying for the whole renew deadline before giving up ...
        assert stopped_at - last_renewed >= TIMING.renew_deadline
        # ... and its work had stopped before the standby, once it could reach the API server, took over.
        await wait_for(lambda: is_true(bool(b.started)), timeout=TIMING.lease_duration + 30, what="b to take over")
        assert max(a.stopped[0], stopped_at) <= b.started[0]
        lease = await read_lease(kclient, ns)
        assert lease.spec.holder_identity == "b"
        tg.cancel_scope.cancel()
