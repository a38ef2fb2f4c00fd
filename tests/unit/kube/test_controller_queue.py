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
from shared.kube.meta import ObjectMeta, OwnerReference
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


def _owned(name: str, owner: str) -> _Obj:
    ref = OwnerReference(api_version="example.com/v1", kind="Widget", name=owner, uid=f"uid-{owner}", controller=True)
    return _Obj(ObjectMeta(name=name, namespace="ns", resource_version="1", owner_references=[ref]))


async def _queued(controller: Controller[_Obj]) -> list[Request]:
    """Take every key ready in the controller's queue, in order."""
    out = []
    while len(controller.queue):
        key = await controller.queue.get()
        controller.queue.done(key)
        out.append(key)
    return out


async def test_cached_only_queues_the_owners_this_controller_holds_and_no_others() -> None:
    """A sharded instance sees every shard's children; only owners in its own primary cache are queued
    (docs/runtime.md#controller)."""
    primary: Informer[_Obj] = Informer(FakeApi(), CONFIG_MAPS, _Obj, rng=random.Random(1))
    children: Informer[_Obj] = Informer(FakeApi(), CONFIG_MAPS, _Obj, rng=random.Random(2))
    everyone: Informer[_Obj] = Informer(FakeApi(), CONFIG_MAPS, _Obj, rng=random.Random(3))
    controller = Controller("c", primary, _reconcile, metrics=RuntimeMetrics(CollectorRegistry()))
    controller.owns(children, kind="Widget", group="example.com", cached_only=True)
    controller.owns(everyone, kind="Widget", group="example.com")
    primary.store.upsert(_Obj(ObjectMeta(name="mine", namespace="ns", resource_version="1")))
    assert await _queued(controller) == [Request("ns", "mine")]  # the primary's own add
    children.store.upsert(_owned("c1", "mine"))
    children.store.upsert(_owned("c2", "theirs"))
    assert await _queued(controller) == [Request("ns", "mine")]
    everyone.store.upsert(_owned("c3", "theirs"))  # without cached_only every owner is queued, as before
    assert await _queued(controller) == [Request("ns", "theirs")]
