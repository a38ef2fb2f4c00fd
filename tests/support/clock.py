"""A manual clock for deterministic tests of anything taking a :class:`shared.kube.workqueue.Clock`."""

from __future__ import annotations

import anyio


class FakeClock:
    """Time stands still until :meth:`advance`; waiters whose deadline passed are woken then."""

    def __init__(self, start: float = 1_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, anyio.Event]] = []

    def now(self) -> float:
        return self._now

    async def wait(self, event: anyio.Event, deadline: float) -> None:
        if deadline <= self._now:
            return
        entry = (deadline, event)
        self._sleepers.append(entry)
        try:
            await event.wait()
        finally:
            self._sleepers.remove(entry)

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake the waiters that are due."""
        self._now += seconds
        for deadline, event in list(self._sleepers):
            if deadline <= self._now:
                event.set()

    @property
    def sleepers(self) -> int:
        """Waiters currently blocked on a deadline."""
        return len(self._sleepers)
