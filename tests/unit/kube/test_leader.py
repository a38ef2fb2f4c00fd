"""Leader election: the pure decision, the records written, timing validation, and run() on a fake Lease API.

Expected values come from client-go ``tools/leaderelection/leaderelection.go`` as summarised in
client-go leader election (docs/runtime.md#leader-election): a holder's term runs ``leaseDurationSeconds`` from
when *we* first observed its record (our monotonic clock); a leader stops once its renew deadline has passed
since its last successful renewal; takeover increments leaseTransitions; release clears the holder.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from prometheus_client import CollectorRegistry

from shared.kube.client import LEASES
from shared.kube.errors import ApiError
from shared.kube.leader import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LeaderElector,
    LeadershipLost,
    Lease,
    LeaseAction,
    LeaseSighting,
    LeaseSpec,
    LeaseTiming,
    decide,
    format_micro_time,
    next_spec,
    released_spec,
)
from shared.kube.meta import ObjectMeta
from shared.kube.metrics import RuntimeMetrics
from tests.support.fake_api import FakeApi

ME = "me_1"
OTHER = "other_2"
T0 = 1_000.0  # monotonic seconds at which the record was first observed
DEADLINE = 10.0


def held_by(holder: str | None, duration: int | None = 15) -> LeaseSpec:
    return LeaseSpec(holder_identity=holder, lease_duration_seconds=duration, renew_time="2020-01-01T00:00:00.000000Z")


@pytest.mark.parametrize(
    ("observed", "now", "last_renewed", "expected"),
    [
        pytest.param(None, T0, None, LeaseAction.CREATE, id="no lease exists so a standby creates it"),
        pytest.param(LeaseSighting(held_by(OTHER), T0), T0 + 14.999, None, LeaseAction.WAIT,
                     id="another holder observed 14.999 s ago within its 15 s term so we wait"),
        pytest.param(LeaseSighting(held_by(OTHER), T0), T0 + 15.0, None, LeaseAction.ACQUIRE,
                     id="another holder unchanged for exactly its 15 s term so we take over"),
        pytest.param(LeaseSighting(held_by(OTHER, duration=3), T0), T0 + 3.5, None, LeaseAction.ACQUIRE,
                     id="the record's own leaseDurationSeconds of 3 s sets the term not ours"),
        pytest.param(LeaseSighting(held_by(OTHER, duration=None), T0), T0, None, LeaseAction.ACQUIRE,
                     id="a record without leaseDurationSeconds has no term left"),
        pytest.param(LeaseSighting(held_by(None), T0), T0, None, LeaseAction.ACQUIRE,
                     id="a released lease with no holder is taken at once"),
        pytest.param(LeaseSighting(held_by(""), T0), T0, None, LeaseAction.ACQUIRE,
                     id="an empty holder string counts as released"),
        pytest.param(LeaseSighting(held_by(ME), T0), T0 + 1, T0, LeaseAction.RENEW,
                     id="we hold it within the renew deadline so we renew"),
        pytest.param(LeaseSighting(held_by(ME), T0), T0 + 100, None, LeaseAction.RENEW,
                     id="a record naming us while not leading is renewed as ours like client-go"),
        pytest.param(LeaseSighting(held_by(ME), T0), T0 + DEADLINE, T0, LeaseAction.LOST,
                     id="leader at exactly the renew deadline since its last renewal has lost"),
        pytest.param(LeaseSighting(held_by(ME), T0), T0 + 9.999, T0, LeaseAction.RENEW,
                     id="leader just inside the renew deadline still renews"),
        pytest.param(LeaseSighting(held_by(OTHER), T0 + 1), T0 + 2, T0, LeaseAction.LOST,
                     id="leader that sees another holder has lost even within the deadline"),
        pytest.param(None, T0 + DEADLINE + 1, T0, LeaseAction.LOST,
                     id="leader past its deadline has lost even if the lease vanished"),
        pytest.param(LeaseSighting(held_by(None), T0 + 1), T0 + 2, T0, LeaseAction.ACQUIRE,
                     id="leader whose lease was cleared by someone re-acquires it"),
    ],
)
def test_decide(observed: LeaseSighting | None, now: float, last_renewed: float | None, expected: LeaseAction) -> None:
    assert decide(observed, identity=ME, now=now, last_renewed=last_renewed, renew_deadline=DEADLINE) is expected


def test_standby_waits_full_term_from_its_own_observation_not_from_renew_time() -> None:
    # renewTime says 2020 (wall clocks disagree wildly); only our observation time counts.
    observed = LeaseSighting(held_by(OTHER, duration=15), at=T0)
    assert decide(observed, identity=ME, now=T0 + 14, last_renewed=None, renew_deadline=DEADLINE) is LeaseAction.WAIT


NOW = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
STAMP = "2026-03-04T05:06:07.890123Z"
EARLIER = "2026-03-04T05:00:00.000001Z"


@pytest.mark.parametrize(
    ("decision", "previous", "expected"),
    [
        pytest.param(LeaseAction.CREATE, None,
                     LeaseSpec(holder_identity=ME, lease_duration_seconds=15, acquire_time=STAMP, renew_time=STAMP,
                               lease_transitions=0),
                     id="create holds it with zero transitions and both times now"),
        pytest.param(LeaseAction.ACQUIRE,
                     LeaseSpec(holder_identity=OTHER, lease_duration_seconds=7, acquire_time=EARLIER,
                               renew_time=EARLIER, lease_transitions=4),
                     LeaseSpec(holder_identity=ME, lease_duration_seconds=15, acquire_time=STAMP, renew_time=STAMP,
                               lease_transitions=5),
                     id="takeover increments transitions and resets acquireTime"),
        pytest.param(LeaseAction.ACQUIRE,
                     LeaseSpec(lease_duration_seconds=1, acquire_time=EARLIER, renew_time=EARLIER),
                     LeaseSpec(holder_identity=ME, lease_duration_seconds=15, acquire_time=STAMP, renew_time=STAMP,
                               lease_transitions=1),
                     id="taking a record that never counted transitions starts at one"),
        pytest.param(LeaseAction.RENEW,
                     LeaseSpec(holder_identity=ME, lease_duration_seconds=15, acquire_time=EARLIER,
                               renew_time=EARLIER, lease_transitions=4),
                     LeaseSpec(holder_identity=ME, lease_duration_seconds=15, acquire_time=EARLIER, renew_time=STAMP,
                               lease_transitions=4),
                     id="renew moves only renewTime"),
        pytest.param(LeaseAction.RENEW,
                     LeaseSpec(holder_identity=ME, lease_duration_seconds=15, acquire_time=EARLIER,
                               renew_time=EARLIER, lease_transitions=2, strategy="OldestEmulationVersion",
                               preferred_holder="x"),
                     LeaseSpec(holder_identity=ME, lease_duration_seconds=15, acquire_time=EARLIER, renew_time=STAMP,
                               lease_transitions=2, strategy="OldestEmulationVersion", preferred_holder="x"),
                     id="renew carries coordinated election fields through"),
    ],
)
def test_next_spec(decision: LeaseAction, previous: LeaseSpec | None, expected: LeaseSpec) -> None:
    assert next_spec(decision, previous, identity=ME, now=NOW, lease_duration_seconds=15) == expected


@pytest.mark.parametrize("decision", [LeaseAction.WAIT, LeaseAction.LOST], ids=["waiting writes nothing",
                                                                          "losing writes nothing"])
def test_next_spec_refuses_decisions_without_a_write(decision: LeaseAction) -> None:
    with pytest.raises(ValueError, match="writes no record"):
        next_spec(decision, None, identity=ME, now=NOW, lease_duration_seconds=15)


def test_release_clears_holder_keeps_transitions_and_lets_a_standby_acquire_at_once() -> None:
    held = LeaseSpec(holder_identity=ME, lease_duration_seconds=15, acquire_time=EARLIER, renew_time=EARLIER,
                     lease_transitions=3)
    released = released_spec(held, now=NOW)
    assert released == LeaseSpec(holder_identity=None, lease_duration_seconds=1, acquire_time=STAMP,
                                 renew_time=STAMP, lease_transitions=3)
    assert decide(LeaseSighting(released, T0), identity=OTHER, now=T0, last_renewed=None,
                  renew_deadline=DEADLINE) is LeaseAction.ACQUIRE


@pytest.mark.parametrize(
    ("instant", "expected"),
    [
        pytest.param(datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC), "2026-01-02T03:04:05.000006Z",
                     id="microseconds are zero padded to six digits"),
        pytest.param(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "2026-01-02T03:04:05.000000Z",
                     id="a whole second still carries six fractional digits"),
        pytest.param(datetime(2026, 1, 2, 5, 4, 5, 7, tzinfo=timezone(timedelta(hours=2))),
                     "2026-01-02T03:04:05.000007Z", id="other zones are converted to UTC"),
    ],
)
def test_format_micro_time(instant: datetime, expected: str) -> None:
    assert format_micro_time(instant) == expected


def test_format_micro_time_rejects_naive_datetimes() -> None:
    with pytest.raises(ValueError, match="aware"):
        format_micro_time(datetime(2026, 1, 2))


def test_default_timing_is_15_10_2_seconds() -> None:
    timing = LeaseTiming()
    assert (timing.lease_duration, timing.renew_deadline, timing.retry_period) == (15.0, 10.0, 2.0)
    assert (DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD) == (15.0, 10.0, 2.0)


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [
        pytest.param(10.0, 10.0, 2.0, id="lease duration equal to the renew deadline is rejected"),
        pytest.param(9.0, 10.0, 2.0, id="lease duration below the renew deadline is rejected"),
        pytest.param(15.0, 2.4, 2.0, id="renew deadline equal to 1.2 retry periods is rejected"),
        pytest.param(15.0, 2.0, 2.0, id="renew deadline equal to the retry period is rejected"),
        pytest.param(15.0, 10.0, 0.0, id="a zero retry period is rejected"),
    ],
)
def test_timing_validation_rejects(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError, match="must be"):
        LeaseTiming(lease, renew, retry)


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [
        pytest.param(3.0, 2.0, 0.5, id="the short test timing 3 2 0.5 is valid"),
        pytest.param(15.0, 2.41, 2.0, id="renew deadline just above 1.2 retry periods is valid"),
    ],
)
def test_timing_validation_accepts(lease: float, renew: float, retry: float) -> None:
    LeaseTiming(lease, renew, retry)


@pytest.mark.parametrize(
    ("renew", "expected"),
    [
        pytest.param(10.0, 5.0, id="default renew deadline 10 s gives 5 s per attempt"),
        pytest.param(1.5, 1.0, id="short renew deadline is floored at 1 s per attempt"),
    ],
)
def test_attempt_timeout_is_half_the_renew_deadline_at_least_one_second(renew: float, expected: float) -> None:
    assert LeaseTiming(15.0, renew, 1.0).attempt_timeout == expected


def test_lease_duration_seconds_rounds_up_so_others_never_wait_less() -> None:
    assert LeaseTiming(3.2, 2.0, 0.5).lease_duration_seconds == 4
    assert LeaseTiming(15.0, 10.0, 2.0).lease_duration_seconds == 15


# --- LeaderElector.run against an in-memory Lease endpoint --------------------------------------------------


class FakeLeaseApi(FakeApi):
    """The in-memory API server (tests/support/fake_api.py), read through the one Lease the tests use."""

    @property
    def lease(self) -> Lease | None:
        stored = self.object(LEASES, "lease", "ns")
        return msgspec.convert(stored, Lease) if stored is not None else None

    @property
    def writes(self) -> list[tuple[str, LeaseSpec]]:
        """(POST or PUT, the spec sent) of every Lease write the server accepted or refused, in order."""
        return [({"create": "POST", "replace": "PUT"}[c.verb], msgspec.convert(c.body["spec"], LeaseSpec))
                for c in self.calls if c.verb in ("create", "replace")]

    def store(self, lease: Lease) -> None:
        """Another client's write of ``lease`` (at a new resourceVersion)."""
        self.seed(LEASES, msgspec.structs.replace(
            lease, metadata=msgspec.structs.replace(lease.metadata, resource_version=None)))


class FakeTime:
    """The elector's monotonic clock and its sleeps: a sleep moves the clock on at once (no real wait)."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await anyio.lowlevel.checkpoint()


def fake_elector(api: FakeLeaseApi, registry: CollectorRegistry, time: FakeTime | None = None) -> LeaderElector:
    time = time or FakeTime()
    return LeaderElector(api, "lease", "ns", identity=ME, timing=LeaseTiming(3.0, 2.0, 0.5),
                         metrics=RuntimeMetrics(registry), clock=time.clock, sleep=time.sleep)


def status(registry: CollectorRegistry, metric: str) -> float | None:
    return registry.get_sample_value(metric, {"name": "lease"})


@pytest.mark.anyio
async def test_run_leads_while_work_runs_then_releases_when_it_returns() -> None:
    api, registry = FakeLeaseApi(), CollectorRegistry()
    elector = fake_elector(api, registry)
    seen: list[tuple[bool, float | None]] = []

    async def work() -> None:
        seen.append((elector.is_leader, status(registry, "leader_election_master_status")))

    with anyio.fail_after(5):
        await elector.run(work)
    assert seen == [(True, 1.0)]
    assert (elector.is_leader, status(registry, "leader_election_master_status")) == (False, 0.0)
    assert [(method, spec.holder_identity) for method, spec in api.writes] == [("POST", ME), ("PUT", None)]
    assert api.lease is not None
    assert (api.lease.spec.lease_duration_seconds, api.lease.spec.lease_transitions) == (1, 0)


@pytest.mark.anyio
async def test_run_reraises_the_work_error_itself_after_releasing() -> None:
    api = FakeLeaseApi()
    elector = fake_elector(api, CollectorRegistry())

    async def work() -> None:
        raise KeyError("boom")

    with anyio.fail_after(5), pytest.raises(KeyError, match="boom"):
        await elector.run(work)
    assert api.lease is not None
    assert api.lease.spec.holder_identity is None


@pytest.mark.anyio
async def test_another_holder_cancels_the_work_and_raises_leadership_lost_without_release() -> None:
    api, registry = FakeLeaseApi(), CollectorRegistry()
    elector = fake_elector(api, registry)
    cancelled = anyio.Event()

    async def work() -> None:
        assert api.lease is not None
        taken = next_spec(LeaseAction.ACQUIRE, api.lease.spec, identity=OTHER, now=NOW, lease_duration_seconds=3)
        api.store(msgspec.structs.replace(api.lease, spec=taken))
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    with anyio.fail_after(5), pytest.raises(LeadershipLost):
        await elector.run(work)
    assert cancelled.is_set()
    assert api.lease is not None
    assert (api.lease.spec.holder_identity, api.lease.spec.lease_transitions) == (OTHER, 1)
    # the fast-path PUT met a 409 and fell back to GET (client-go's slow path), which showed the new holder
    assert status(registry, "leader_election_slowpath_total") == 1.0
    assert status(registry, "leader_election_master_status") == 0.0


@pytest.mark.anyio
async def test_run_refuses_to_run_twice_at_once() -> None:
    elector = fake_elector(FakeLeaseApi(), CollectorRegistry())
    started = anyio.Event()

    async def work() -> None:
        started.set()
        await anyio.sleep_forever()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(elector.run, work)
            await started.wait()
            with pytest.raises(RuntimeError, match="already running"):
                await elector.run(work)
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_standby_takes_over_once_the_holders_term_has_passed_on_its_own_clock() -> None:
    api, time = FakeLeaseApi(), FakeTime()
    api.store(Lease(metadata=ObjectMeta(name="lease", namespace="ns"), spec=held_by(OTHER, duration=3)))
    elector = fake_elector(api, CollectorRegistry(), time)
    took_over: list[float] = []

    async def work() -> None:
        took_over.append(time.now)

    with anyio.fail_after(5):
        await elector.run(work)
    # first seen at T0; attempts every 0.5 s × (1 + up to 20 % jitter): the first one at or past T0 + 3 s wins
    assert T0 + 3.0 <= took_over[0] < T0 + 3.0 + 0.5 * 1.2
    method, spec = api.writes[0]
    assert (method, spec.holder_identity, spec.lease_transitions) == ("PUT", ME, 1)


@pytest.mark.anyio
async def test_a_leader_that_cannot_renew_stops_at_its_renew_deadline_before_its_term_ends() -> None:
    api, time = FakeLeaseApi(), FakeTime()
    elector = fake_elector(api, CollectorRegistry(), time)
    real_request = api.request

    async def unreachable(method: str, path: str, **options: Any) -> bytes:
        if elector.is_leader:
            raise ApiError(503, "ServiceUnavailable", "etcd is down")
        return await real_request(method, path, **options)

    api.request = unreachable  # type: ignore[method-assign]

    async def work() -> None:
        await anyio.sleep_forever()

    with anyio.fail_after(5), pytest.raises(LeadershipLost):
        await elector.run(work)
    assert elector.last_renewed == T0
    assert elector.stopped_leading_at is not None
    # it stops at the renew deadline (2 s), before the 3 s a standby waits from our last write
    assert 2.0 <= elector.stopped_leading_at - elector.last_renewed < 3.0
