"""A member return is counted once, however often a lagging pass repeats its patch."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from pool_reconciler.decision import MemberPatch
from pool_reconciler.executor import Executor
from pool_reconciler.metrics import PoolMetrics
from shared.domain import annotations as ann

pytestmark = pytest.mark.anyio


class FakeClient:
    """Answers member merge patches with a stored object whose resourceVersion moves on each change."""

    def __init__(self) -> None:
        self.version = 1
        self.annotations: dict[str, Any] = {}

    async def merge_patch(self, resource: Any, name: str, patch: Any, namespace: str | None = None) -> bytes:
        new = {**self.annotations, **patch["metadata"]["annotations"]}
        if new != self.annotations:
            self.version += 1
            self.annotations = new
        return msgspec.json.encode({"metadata": {"name": name, "uid": "uid-1", "resourceVersion": str(self.version),
                                                 "annotations": self.annotations}})


@pytest.mark.parametrize(
    ("reason", "strip_between"),
    [
        ("ReturnReplace", True),
        ("ReturnKeep", False),
    ],
    ids=[
        "a Replace SIGTERM re-sent after the signal was stripped is the same return (counted once)",
        "a Keep patch repeated without any change stores nothing (not counted again)",
    ],
)
async def test_a_repeated_return_patch_is_counted_once(reason: str, strip_between: bool) -> None:
    client = FakeClient()
    metrics = PoolMetrics(CollectorRegistry(), lambda: (), lambda: (), lambda: ())
    executor = Executor(client, recorder=None, metrics=metrics)  # type: ignore[arg-type]
    patch = MemberPatch("m-0", {"metadata": {"annotations": {ann.SIGNAL: "SIGTERM"}}}, reason)
    assert await executor._member_patch("ns", patch)
    assert executor._changed is True
    if strip_between:
        client.annotations = {}  # the Process reconciler took the one-shot signal
    assert await executor._member_patch("ns", patch)
    assert executor._changed is False
