"""The informer's read deadline is derived from each watch's server timeout (no client needed)."""

from __future__ import annotations

import random

import msgspec

from shared.kube.client import CONFIG_MAPS
from shared.kube.informer import MIN_WATCH_TIMEOUT, WATCH_DEADLINE_GRACE, Informer
from shared.kube.meta import ObjectMeta
from tests.support.fake_api import FakeApi


class _Obj(msgspec.Struct):
    metadata: ObjectMeta


def _informer(inactivity_timeout: float | None = None) -> Informer[_Obj]:
    return Informer(FakeApi(), CONFIG_MAPS, _Obj, inactivity_timeout=inactivity_timeout,
                    rng=random.Random(7))


def test_the_default_deadline_outlasts_every_server_timeout_the_informer_can_draw() -> None:
    informer = _informer()
    for timeout in range(MIN_WATCH_TIMEOUT, 2 * MIN_WATCH_TIMEOUT):
        assert informer.read_deadline(timeout) == timeout + WATCH_DEADLINE_GRACE
    assert WATCH_DEADLINE_GRACE > 0


def test_an_explicit_inactivity_timeout_is_kept() -> None:
    assert _informer(inactivity_timeout=1.0).read_deadline(600) == 1.0
