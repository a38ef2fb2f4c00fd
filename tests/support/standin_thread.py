"""The Flux stand-in (tools/standins/flux.py) in a thread of its own, beside binaries run as subprocesses: a
module-scoped fixture starts it while the test's own event loop is not running yet."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from shared.kube.client import KubeClient
from tools.standins.flux import FluxStandIn


def _run(kubeconfig: Path, delay: float, stop: threading.Event) -> None:
    async def main() -> None:
        async with await KubeClient.from_kubeconfig(kubeconfig) as client, anyio.create_task_group() as tg:
            tg.start_soon(FluxStandIn(client, delay=delay).run)
            await anyio.to_thread.run_sync(stop.wait)
            tg.cancel_scope.cancel()

    anyio.run(main)


@contextmanager
def flux_standin_thread(kubeconfig: Path, *, delay: float) -> Iterator[threading.Thread]:
    """Run the stand-in (marking objects Ready ``delay`` seconds after it sees them) until the block ends."""
    stop = threading.Event()
    thread = threading.Thread(target=_run, args=(kubeconfig, delay, stop), name="flux-standin", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(30)
