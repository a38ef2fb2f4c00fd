"""Waiting on a condition with a deadline: the one poll loop of the local tooling and the tests."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


async def wait_for(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = 30.0,  # noqa: ASYNC109 - a deadline across many probes, not around one awaitable
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll ``probe`` until it returns something other than None/False; return that.

    Exceptions from ``probe`` propagate (a probe raises to give up early, e.g. on a dead process).

    Raises:
        TimeoutError: ``timeout`` seconds passed first (message names ``what``).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = await probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        await anyio.sleep(interval)
