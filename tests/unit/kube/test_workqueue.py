"""WorkQueue: dedup, dirty-while-processing, backoff and token bucket, add_after, shutdown drain, metrics hook.

Delays run on a FakeClock; tasks are synchronised with events and anyio's "all tasks blocked" checkpoint,
never with real sleeps.
"""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.parser import text_fd_to_metric_families
from prometheus_client.parser import text_string_to_metric_families

from shared.kube.metrics import RuntimeMetrics, render, render_openmetrics
from shared.kube.workqueue import (
    BucketRateLimiter,
    ItemExponentialBackoff,
    MaxOfRateLimiter,
    ShutDown,
    WorkQueue,
    default_controller_rate_limiter,
)
from tests.support.clock import FakeClock

pytestmark = pytest.mark.anyio

DEADLINE = 5.0  # seconds: an upper bound for anything a test awaits, never a synchronisation sleep


async def settle() -> None:
    """Let every runnable task run until all are blocked."""
    await anyio.wait_all_tasks_blocked()


async def eventually(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(DEADLINE):
        while not condition():
            await anyio.lowlevel.checkpoint()


async def worker(q: WorkQueue[str], handler: Callable[[str], Awaitable[None]]) -> None:
    """A worker loop as a controller runs it: get, handle, done, until the queue shuts down."""
    while True:
        try:
            key = await q.get()
        except ShutDown:
            return
        try:
            await handler(key)
        finally:
            q.done(key)


def new_queue(clock: FakeClock | None = None) -> WorkQueue[str]:
    return WorkQueue(clock=clock or FakeClock())


# --- dedup and dirty-while-processing -----------------------------------------------------------------------


async def test_a_key_added_twice_before_processing_is_handed_out_once() -> None:
    q = new_queue()
    for key in ("a", "b", "a", "a", "b", "c"):
        q.add(key)
    assert len(q) == 3
    assert [await q.get(), await q.get(), await q.get()] == ["a", "b", "c"]
    assert len(q) == 0


async def test_a_key_re_added_while_processing_waits_for_done() -> None:
    q = new_queue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "a processing key is marked dirty, not queued"
    with anyio.move_on_after(0) as scope:
        await q.get()
    assert scope.cancelled_caught, "get() must not hand out a key that is still processing"
    q.done("a")
    assert len(q) == 1
    assert await q.get() == "a"
    q.done("a")
    assert len(q) == 0, "a key done without being re-added is not queued again"


async def handed_out(q: WorkQueue[str], n: int) -> list[str]:
    keys = []
    for _ in range(n):
        keys.append(await q.get())
        q.done(keys[-1])
    return keys


# (adds in order: (key, urgent)), hand-out order
URGENT_ROWS = [
    pytest.param([("a", False), ("b", False), ("u", True)], ["u", "a", "b"], id="an urgent key goes first"),
    pytest.param([("u", True), ("v", True), ("a", False)], ["u", "v", "a"], id="urgent keys keep their order"),
    pytest.param([("a", False), ("b", False), ("b", True)], ["b", "a"], id="a queued key moves up"),
    pytest.param([("u", True), ("u", False)], ["u"], id="a later plain add does not move it down"),
    pytest.param([("a", False), ("c", False), ("b", True), ("a", True)], ["b", "a", "c"],
                 id="moved up keys queue after the urgent ones"),
]


@pytest.mark.parametrize(("adds", "order"), URGENT_ROWS)
async def test_urgent_keys_are_handed_out_first(adds: list[tuple[str, bool]], order: list[str]) -> None:
    q = new_queue()
    for key, urgent in adds:
        q.add(key, urgent=urgent)
    assert len(q) == len(order)
    assert await handed_out(q, len(order)) == order
    assert len(q) == 0


async def test_a_key_added_urgent_while_processing_is_queued_urgent_by_done() -> None:
    q = new_queue()
    q.add("u")
    assert await q.get() == "u"
    q.add("a")
    q.add("u", urgent=True)
    assert len(q) == 1  # only "a": "u" is still processing
    q.done("u")
    assert await handed_out(q, 2) == ["u", "a"]


async def test_an_urgent_add_after_is_queued_urgent_when_due() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add_after("u", 5.0)  # a plain deadline already set
    q.add_after("u", 9.0, urgent=True)  # the earlier deadline stays; the urgency is kept
    q.add("a")
    clock.advance(5.0)
    assert await handed_out(q, 2) == ["u", "a"]
    q.add_after("p", 1.0)  # urgency is not left behind for the next plain requeue of a key
    q.add("b")
    clock.advance(1.0)
    assert await handed_out(q, 2) == ["b", "p"]


async def test_done_for_a_key_that_is_not_processing_raises() -> None:
    q = new_queue()
    q.add("a")
    with pytest.raises(ValueError, match="not processing"):
        q.done("a")


async def test_a_waiting_get_is_woken_by_add() -> None:
    q = new_queue()
    got: list[str] = []

    async def getter() -> None:
        got.append(await q.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(getter)
        await settle()
        assert got == []
        q.add("a")
    assert got == ["a"]


async def test_a_getter_cancelled_right_after_being_woken_does_not_lose_the_key() -> None:
    q = new_queue()
    got: list[str] = []
    doomed = anyio.CancelScope()

    async def getter() -> None:
        with contextlib.suppress(ShutDown):
            got.append(await q.get())

    async def doomed_getter() -> None:
        with doomed:
            await getter()

    async with anyio.create_task_group() as tg:
        tg.start_soon(doomed_getter)
        await settle()
        tg.start_soon(getter)
        await settle()
        q.add("a")  # wakes the first getter ...
        doomed.cancel()  # ... which is cancelled before it runs: it takes the key or passes the wake-up on
        await settle()
        assert got == ["a"]
        await q.shutdown(drain=False)


async def test_many_workers_never_process_one_key_at_the_same_time() -> None:
    q = new_queue()
    keys = [f"k{i}" for i in range(20)]
    rng = random.Random(4)
    active: set[str] = set()
    overlaps: list[str] = []
    peak = 0
    last_add: dict[str, int] = {}
    last_start: dict[str, int] = {}
    tick = 0

    async def handler(key: str) -> None:
        nonlocal peak, tick
        if key in active:
            overlaps.append(key)
        active.add(key)
        peak = max(peak, len(active))
        tick += 1
        last_start[key] = tick
        for _ in range(rng.randrange(1, 4)):
            await anyio.lowlevel.checkpoint()  # yield to other workers and the producer mid-reconcile
        active.discard(key)

    async def producer() -> None:
        nonlocal tick
        for _ in range(2_000):
            key = rng.choice(keys)
            tick += 1
            last_add[key] = tick
            q.add(key)
            if rng.random() < 0.5:
                await anyio.lowlevel.checkpoint()

    with anyio.fail_after(DEADLINE * 4):
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                tg.start_soon(worker, q, handler)
            await producer()
            await eventually(lambda: len(q) == 0 and q.processing == 0)
            await q.shutdown(drain=True)

    assert overlaps == []
    assert peak > 1, "the test must actually run keys in parallel"
    stale = [k for k in last_add if last_start[k] < last_add[k]]
    assert stale == [], "every key must be processed again after its last add"


# --- rate limiters ------------------------------------------------------------------------------------------

# client-go DefaultTypedControllerRateLimiter per-item backoff: 5 ms·2^n, cap 1000 s.
BACKOFF_ROWS = [
    pytest.param(0, 0.005, id="the first retry waits 5 ms"),
    pytest.param(1, 0.010, id="the second retry waits 10 ms"),
    pytest.param(2, 0.020, id="the third retry waits 20 ms"),
    pytest.param(10, 5.12, id="the eleventh retry waits 5.12 s"),
    pytest.param(17, 655.36, id="the eighteenth retry waits 655.36 s"),
    pytest.param(18, 1000.0, id="the nineteenth retry is capped at 1000 s"),
    pytest.param(200, 1000.0, id="a much later retry stays at the cap"),
    pytest.param(5000, 1000.0, id="an absurd retry count does not overflow"),
]


@pytest.mark.parametrize(("previous_requeues", "expected_seconds"), BACKOFF_ROWS)
async def test_item_backoff_doubles_from_5ms_to_a_1000s_cap(previous_requeues: int, expected_seconds: float) -> None:
    limiter: ItemExponentialBackoff[str] = ItemExponentialBackoff()
    for _ in range(previous_requeues):
        limiter.when("a")
    assert limiter.when("a") == pytest.approx(expected_seconds)
    assert limiter.num_requeues("a") == previous_requeues + 1


async def test_item_backoff_is_per_key_and_forget_resets_it() -> None:
    limiter: ItemExponentialBackoff[str] = ItemExponentialBackoff()
    assert [limiter.when("a") for _ in range(4)] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert limiter.when("b") == pytest.approx(0.005)
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)


# Token bucket 10 QPS, burst 100 (same source): a token every 0.1 s once the 100 saved ones are spent.
BUCKET_ROWS = [
    pytest.param(0, 0.0, 100, 0.0, id="the hundredth call within the burst waits nothing"),
    pytest.param(0, 0.0, 101, 0.1, id="the first call past the burst waits one token interval"),
    pytest.param(0, 0.0, 105, 0.5, id="the fifth call past the burst waits five intervals"),
    pytest.param(100, 0.1, 1, 0.0, id="a tenth of a second refills one spent token"),
    pytest.param(109, 0.5, 1, 0.5, id="half a second refills five of ten missing tokens"),
    pytest.param(100, 3600.0, 101, 0.1, id="a long pause refills no more than the burst"),
]


@pytest.mark.parametrize(("calls_before", "pause", "calls_after", "expected_last_delay"), BUCKET_ROWS)
async def test_token_bucket_allows_a_burst_of_100_then_10_per_second(
    calls_before: int, pause: float, calls_after: int, expected_last_delay: float
) -> None:
    clock = FakeClock()
    bucket: BucketRateLimiter[str] = BucketRateLimiter(clock=clock)
    for i in range(calls_before):
        bucket.when(f"before{i}")
    clock.advance(pause)
    delays = [bucket.when(f"after{i}") for i in range(calls_after)]
    assert delays[-1] == pytest.approx(expected_last_delay)


async def test_the_default_limiter_takes_the_larger_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter: MaxOfRateLimiter[str] = default_controller_rate_limiter(clock)
    assert [limiter.when(f"k{i}") for i in range(100)] == pytest.approx([0.005] * 100)
    assert limiter.when("k100") == pytest.approx(0.1), "past the burst the bucket dominates"
    clock.advance(100.0)
    for _ in range(12):
        limiter.when("hot")
    assert limiter.when("hot") == pytest.approx(20.48), "a refilled bucket leaves the backoff (5 ms · 2^12)"
    assert limiter.num_requeues("hot") == 13
    limiter.forget("hot")
    assert limiter.num_requeues("hot") == 0


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: ItemExponentialBackoff(base=-1.0), id="a negative backoff base is rejected"),
        pytest.param(lambda: ItemExponentialBackoff(base=2.0, cap=1.0), id="a cap below the base is rejected"),
        pytest.param(lambda: BucketRateLimiter(qps=0), id="a bucket with zero qps is rejected"),
        pytest.param(lambda: BucketRateLimiter(burst=0), id="a bucket with zero burst is rejected"),
        pytest.param(lambda: MaxOfRateLimiter(), id="combining no limiters is rejected"),
    ],
)
async def test_invalid_limiter_settings_raise(build: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match="need"):
        build()


async def test_add_rate_limited_parks_the_key_for_the_backoff_delay() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add_rate_limited("a")
    q.add_rate_limited("a")  # second delay 10 ms, later than the first: the first (5 ms) wins
    assert (len(q), q.waiting, q.num_requeues("a")) == (0, 1, 2)
    clock.advance(0.004)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    q.forget("a")
    assert q.num_requeues("a") == 0


# --- add_after ----------------------------------------------------------------------------------------------

ADD_AFTER_ROWS = [
    pytest.param([10.0, 5.0], 5.0, id="a later add_after with an earlier deadline moves the key forward"),
    pytest.param([5.0, 10.0], 5.0, id="a later add_after with a later deadline is ignored"),
    pytest.param([7.0, 7.0], 7.0, id="two equal deadlines queue the key once"),
]


@pytest.mark.parametrize(("delays", "due_after"), ADD_AFTER_ROWS)
async def test_add_after_earliest_deadline_wins(delays: list[float], due_after: float) -> None:
    clock = FakeClock()
    q = new_queue(clock)
    for delay in delays:
        q.add_after("a", delay)
    clock.advance(due_after - 0.001)
    assert (len(q), q.waiting) == (0, 1)
    clock.advance(0.001)
    assert (len(q), q.waiting) == (1, 0)
    assert await q.get() == "a"
    q.done("a")
    clock.advance(max(delays))
    assert len(q) == 0, "a superseded deadline must not queue the key a second time"


async def test_add_after_with_no_delay_adds_now() -> None:
    q = new_queue()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert (len(q), q.waiting) == (2, 0)


async def test_a_waiting_get_wakes_when_a_delayed_key_becomes_due() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    got: list[str] = []

    async def getter() -> None:
        got.append(await q.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(getter)
        await settle()
        q.add_after("a", 30.0)
        await settle()
        q.add_after("b", 10.0)  # an earlier deadline re-arms the waiting getter
        await settle()
        clock.advance(9.5)
        await settle()
        assert got == []
        clock.advance(0.5)
    assert got == ["b"]
    assert q.waiting == 1


# --- shutdown -----------------------------------------------------------------------------------------------


async def test_shutdown_with_drain_waits_for_in_flight_keys_and_refuses_new_gets() -> None:
    q = new_queue()
    for key in ("a", "b"):
        q.add(key)
    assert await q.get() == "a"
    drained = anyio.Event()

    async def stop() -> None:
        await q.shutdown(drain=True)
        drained.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop)
        await settle()
        assert not drained.is_set(), "drain must wait for the in-flight key"
        with pytest.raises(ShutDown):
            await q.get()  # "b" is still queued but no longer handed out
        q.add("c")
        q.add("a")
        assert len(q) == 0, "adds after shutdown are ignored"
        q.done("a")
    assert drained.is_set()
    with pytest.raises(ShutDown):
        await q.get()


async def test_shutdown_without_drain_returns_at_once() -> None:
    q = new_queue()
    q.add("a")
    assert await q.get() == "a"
    with anyio.fail_after(DEADLINE):
        await q.shutdown(drain=False)
    assert q.shutting_down
    assert q.processing == 1
    q.done("a")
    await q.shutdown(drain=True)  # idempotent; nothing in flight any more


async def test_shutdown_wakes_every_waiting_get_with_shutdown() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add_after("later", 60.0)
    outcomes: list[str] = []

    async def getter() -> None:
        try:
            await q.get()
            outcomes.append("got")
        except ShutDown:
            outcomes.append("shut down")

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(getter)
        await settle()
        await q.shutdown(drain=True)
    assert outcomes == ["shut down"] * 4
    clock.advance(120.0)
    assert (len(q), q.waiting) == (0, 0), "waiting keys are dropped at shutdown"


# --- metrics hook -------------------------------------------------------------------------------------------


def sample(reg: CollectorRegistry, name: str) -> float:
    value = reg.get_sample_value(name, {"name": "toy", "controller": "toy"})
    assert value is not None, name
    return value


async def test_the_queue_reports_adds_depth_durations_retries_and_in_flight_work() -> None:
    clock = FakeClock()
    reg = CollectorRegistry()
    q: WorkQueue[str] = WorkQueue(clock=clock, metrics=RuntimeMetrics(reg).workqueue("toy"))
    q.add("a")
    q.add("a")
    q.add("b")
    assert sample(reg, "workqueue_adds_total") == 2, "a deduplicated add is not counted"
    assert reg.get_sample_value("workqueue_depth", {"name": "toy", "controller": "toy", "priority": ""}) == 2
    clock.advance(2.0)
    assert await q.get() == "a"
    q.add("a")  # dirty while processing: not ready, so not in the depth
    assert reg.get_sample_value("workqueue_depth", {"name": "toy", "controller": "toy", "priority": ""}) == 1
    assert sample(reg, "workqueue_queue_duration_seconds_sum") == pytest.approx(2.0)
    clock.advance(3.0)
    assert await q.get() == "b"
    clock.advance(1.0)
    assert sample(reg, "workqueue_unfinished_work_seconds") == pytest.approx(4.0 + 1.0)
    assert sample(reg, "workqueue_longest_running_processor_seconds") == pytest.approx(4.0)
    q.done("a")
    q.done("b")
    assert await q.get() == "a"  # the dirty re-add, handed out after done
    q.done("a")
    assert sample(reg, "workqueue_adds_total") == 3
    assert sample(reg, "workqueue_work_duration_seconds_sum") == pytest.approx(5.0)
    assert sample(reg, "workqueue_work_duration_seconds_count") == 3
    assert sample(reg, "workqueue_unfinished_work_seconds") == 0
    q.add_after("a", 1.0)
    q.add_rate_limited("b")
    q.add_after("c", 0)
    assert sample(reg, "workqueue_retries_total") == 2, "only adds with a non-zero delay count as retries"


def exemplars_of(registry: CollectorRegistry, family: str) -> dict[str, tuple[float, dict[str, str]]]:
    """``le`` → (observed value to the µs, exemplar labels) of each bucket of ``family`` that holds an exemplar,
    read back with prometheus-client's own OpenMetrics parser."""
    found: dict[str, tuple[float, dict[str, str]]] = {}
    body = io.StringIO(render_openmetrics(registry).decode())
    for fam in text_fd_to_metric_families(body):  # type: ignore[no-untyped-call]
        if fam.name != family:
            continue
        for sample in fam.samples:
            if sample.exemplar is not None:
                found[sample.labels["le"]] = (round(sample.exemplar.value, 6), dict(sample.exemplar.labels))
    return found


async def test_with_waits_on_the_queue_and_work_durations_carry_the_exemplar_of_the_reconcile_that_took_the_key(
        ) -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    queue: WorkQueue[str] = WorkQueue(clock=clock, metrics=RuntimeMetrics(registry).workqueue("toy"))
    queue.waits = {}
    trace_ids = {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}
    queue.add("a")
    clock.advance(0.05)  # waited 50 ms: the 0.1 bucket of the workqueue buckets (1e-8 … 1000, ×10)
    assert await queue.get() == "a"
    assert exemplars_of(registry, "workqueue_queue_duration_seconds") == {}  # not observed before it is taken
    assert queue.take_wait("a", trace_ids) == pytest.approx(0.05)
    clock.advance(2.0)  # worked 2 s: the 10.0 bucket
    queue.done("a", exemplar=trace_ids)
    assert exemplars_of(registry, "workqueue_queue_duration_seconds") == {"0.1": (0.05, trace_ids)}
    assert exemplars_of(registry, "workqueue_work_duration_seconds") == {"10.0": (2.0, trace_ids)}


async def test_a_wait_nobody_took_is_still_observed_at_done_without_an_exemplar() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    queue: WorkQueue[str] = WorkQueue(clock=clock, metrics=RuntimeMetrics(registry).workqueue("toy"))
    queue.waits = {}
    queue.add("a")
    clock.advance(0.05)
    assert await queue.get() == "a"
    queue.done("a")
    assert queue.waits == {}
    counts = {s.labels["le"]: s.value for f in text_string_to_metric_families(render(registry).decode())
              if f.name == "workqueue_queue_duration_seconds" for s in f.samples if s.name.endswith("_bucket")}
    assert (counts["0.01"], counts["0.1"]) == (0.0, 1.0)
    assert exemplars_of(registry, "workqueue_queue_duration_seconds") == {}


async def test_with_waits_off_the_queue_duration_is_observed_at_the_hand_out_without_an_exemplar() -> None:
    clock = FakeClock()
    registry = CollectorRegistry()
    queue: WorkQueue[str] = WorkQueue(clock=clock, metrics=RuntimeMetrics(registry).workqueue("toy"))
    queue.add("a")
    clock.advance(0.05)
    assert await queue.get() == "a"
    counts = {s.labels["le"]: s.value for f in text_string_to_metric_families(render(registry).decode())
              if f.name == "workqueue_queue_duration_seconds" for s in f.samples if s.name.endswith("_bucket")}
    assert (counts["0.01"], counts["0.1"]) == (0.0, 1.0)  # observed before done
    assert queue.take_wait("a") == 0.0
    queue.done("a")
    assert exemplars_of(registry, "workqueue_queue_duration_seconds") == {}
    assert exemplars_of(registry, "workqueue_work_duration_seconds") == {}
