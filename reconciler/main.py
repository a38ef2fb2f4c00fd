"""Entry point of the ``tatara-reconciler`` binary (the Process + ProcessTable controllers).

Flags and environment: :mod:`reconciler.config` (``--help`` lists every one). Connects
in-cluster, or through ``$KUBECONFIG`` / ``~/.kube/config``; logs JSON lines; exports
traces over OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. Exit codes: 0 after a clean
shutdown (SIGTERM), 1 when the leader Lease was lost or the API is unreachable at start,
2 on bad flags.
"""

from __future__ import annotations

import logging
import os
import sys

import anyio

from reconciler.app import build
from reconciler.config import ReconcilerConfig, parse_or_exit
from shared import __version__
from shared.kube.client import KubeClient
from shared.kube.errors import ApiError
from shared.kube.leader import LeadershipLost
from shared.kube.logcontext import configure_logging
from shared.kube.metrics import runtime_metrics
from shared.kube.tracing import configure_tracing

log = logging.getLogger("tatara-reconciler")


async def run(config: ReconcilerConfig) -> int:
    """Run until SIGTERM/SIGINT; return the process exit code."""
    try:
        client = await KubeClient.connect(user_agent=f"tatara-reconciler/{__version__}")
    except Exception as err:  # config loading raises several unrelated types
        log.error("cannot load Kubernetes credentials: %s", err)
        return 1
    requests = runtime_metrics().rest_client_requests_total
    client.on_response.append(lambda method, code, host: requests.labels(code, method, host).inc())
    try:
        manager = build(client, config)
        await manager.run()
        return 0
    except LeadershipLost:
        return 1
    except ApiError as err:
        log.error("API server error: %s", err)
        return 1
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    """Parse flags/environment, configure logging and tracing, run."""
    if argv is None:
        argv = sys.argv[1:]
    if "--version" in argv:
        print(f"tatara-reconciler {__version__}")
        return 0
    config = parse_or_exit(argv, os.environ)
    configure_logging(logging.getLevelName(config.python_log_level))
    configure_tracing("tatara-reconciler")
    log.info("starting tatara-reconciler %s", __version__)
    return anyio.run(run, config)


if __name__ == "__main__":
    sys.exit(main())
