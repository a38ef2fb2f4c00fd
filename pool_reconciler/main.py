"""Entry point of the ``tatara-pool-reconciler`` binary (the EphemeralPool + EphemeralAllocation controllers).

Flags and environment: :mod:`pool_reconciler.config` (``--help`` lists every one; spec §3.1).
Connects through ``$KUBECONFIG`` / ``~/.kube/config`` or in-cluster (spec §3.3); logs JSON lines
(spec §3.2). Exit codes: 0 after a clean shutdown (SIGTERM), 1 when the leader Lease was lost or
the API is unreachable at start, 2 on bad flags.
"""

from __future__ import annotations

import logging
import os
import sys

import anyio

from pool_reconciler.app import build
from pool_reconciler.config import PoolReconcilerConfig, parse_or_exit
from shared import __version__
from shared.kube.client import KubeClient
from shared.kube.errors import ApiError
from shared.kube.leader import LeadershipLost
from shared.kube.logcontext import configure_logging
from shared.kube.metrics import runtime_metrics
from shared.kube.tracing import configure_tracing

log = logging.getLogger("tatara-pool-reconciler")


async def run(config: PoolReconcilerConfig) -> int:
    """Run until SIGTERM/SIGINT; return the process exit code."""
    try:
        client = await KubeClient.connect(user_agent=f"tatara-pool-reconciler/{__version__}")
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
    if "--version" in argv or "-V" in argv:
        print(f"tatara-pool-reconciler {__version__}")
        return 0
    config = parse_or_exit(argv, os.environ)
    configure_logging(logging.getLevelName(config.python_log_level))
    configure_tracing("tatara-pool-reconciler")
    log.info("tatara-pool-reconciler starting", extra={"namespace": config.controller_namespace,
                                                       "heartbeat": config.heartbeat_seconds})
    return anyio.run(run, config)


if __name__ == "__main__":
    sys.exit(main())
