"""The shell of both binaries: flags → logging/tracing → API client → manager → exit code.

Exit codes: 0 after a clean shutdown (SIGTERM/SIGINT), 1 when the credentials cannot be
loaded, the API server fails at start, or the leader Lease was lost (so the pod restarts
clean, as controller-runtime does), 2 on bad flags (printed by ``parse_or_exit``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, TypeVar

import anyio

from shared.kube.client import KubeClient
from shared.kube.errors import ApiError
from shared.kube.leader import LeadershipLost
from shared.kube.logcontext import configure_logging
from shared.kube.manager import Manager
from shared.kube.metrics import runtime_metrics
from shared.kube.tracing import configure_tracing, shutdown_tracing


class _Config(Protocol):
    @property
    def python_log_level(self) -> int: ...


C = TypeVar("C", bound=_Config)


async def serve(name: str, version: str, config: C, build: Callable[[KubeClient, C], Manager]) -> int:
    """Connect (``User-Agent: <name>/<version>``), build the manager, run it until a signal; return the exit code."""
    log = logging.getLogger(name)
    try:
        client = await KubeClient.connect(user_agent=f"{name}/{version}")
    except Exception as err:  # config loading raises several unrelated types
        log.error("cannot load Kubernetes credentials: %s", err)
        return 1
    requests = runtime_metrics().rest_client_requests_total
    client.on_response.append(lambda method, code, host: requests.labels(code, method, host).inc())
    try:
        await build(client, config).run()
        return 0
    except LeadershipLost:
        return 1
    except ApiError as err:
        log.error("API server error: %s", err)
        return 1
    finally:
        await client.close()


def prepare(name: str, version: str, argv: Sequence[str] | None,
            parse_or_exit: Callable[[Sequence[str], Mapping[str, str]], C]) -> C | None:
    """The start of every binary: ``--version`` / ``-V`` prints ``<name> <version>`` and gives None; else parse
    flags (``parse_or_exit`` exits 2 when bad), configure JSON logs and tracing, log the start; the config."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--version" in args or "-V" in args:
        print(f"{name} {version}")
        return None
    config = parse_or_exit(args, os.environ)
    configure_logging(logging.getLevelName(config.python_log_level))
    configure_tracing(name)
    logging.getLogger(name).info("starting %s %s", name, version)
    return config


def main(name: str, version: str, argv: Sequence[str] | None,
         parse_or_exit: Callable[[Sequence[str], Mapping[str, str]], C],
         build: Callable[[KubeClient, C], Manager]) -> int:
    """:func:`prepare`, then serve the manager ``build`` makes."""
    config = prepare(name, version, argv, parse_or_exit)
    if config is None:
        return 0
    try:
        return anyio.run(serve, name, version, config, build)
    finally:
        shutdown_tracing()
