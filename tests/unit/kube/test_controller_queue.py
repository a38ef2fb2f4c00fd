"""The controller's work queue takes the clock and rate limiter it is given (docs/runtime.md#controller), so a
reconcile's retry timing can be driven without waiting."""

from __future__ import annotations

import random

import anyio
import msgspec
import pytest
from anyio import wait_all_tasks_blocked
from prometheus_client import CollectorRegistry

from shared.kube.client import CONFIG_MAPS
from shared.kube.controller import Controller, Request, Result
from shared.kube.informer import Informer
from shared.kube.meta import ObjectMeta
from shared.kube.metrics import RuntimeMetrics
from shared.kube.workqueue import ItemExponentialBackoff
from tests.support.clock import FakeClock
from tests.support.fake_api import FakeApi

pytestmark = pytest.mark.anyio


class _Obj(msgspec.Struct):
    metadata: ObjectMeta


async def _reconcile(request: Request) -> Result:
    return Result.done()


async def test_a_retry_waits_on_the_injected_clock_for_the_injected_limiters_delay() -> None:
    clock = FakeClock()
    limiter: ItemExponentialBackoff[Request] = ItemExponentialBackoff(base=5.0, cap=5.0)
    informer: Informer[_Obj] = Informer(FakeApi(), CONFIG_MAPS, _Obj, rng=random.Random(1))
    controller = Controller("c", informer, _reconcile, clock=clock, rate_limiter=limiter,
                            metrics=RuntimeMetrics(CollectorRegistry()))
    key = Request("ns", "a")
    controller.queue.add_rate_limited(key)
    assert limiter.num_requeues(key) == 1, "the injected limiter counted the retry"

    got: list[Request] = []

    async def take() -> None:
        got.append(await controller.queue.get())

    async with anyio.create_task_group() as tg:
        tg.start_soon(take)
        await wait_all_tasks_blocked()
        assert clock.sleepers == 1, "the getter parks on the injected clock, at the key's deadline"
        clock.advance(4.9)
        await wait_all_tasks_blocked()
        assert got == [], "not before the limiter's 5 s on the injected clock"
        clock.advance(0.1)
    assert got == [key]
