"""Entry point of the ``tatara-export-worker`` binary, the program an export Job runs.

Flags and environment: :mod:`export_worker.config` (``--help`` lists every one). Connects through
``$KUBECONFIG`` when it is set, else in-cluster with the pod's service account (else ``~/.kube/config``);
logs JSON lines on stderr (stdout is the stdout channel's). Exit status: 0 when the export shipped, 1 when it
did not (the receipt says why) or the receipt could not be written or the credentials could not be loaded,
2 on bad flags.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

import anyio
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from export_worker.config import WorkerConfig, parse_or_exit
from export_worker.worker import run_export
from shared import __version__
from shared.kube import entrypoint, tracing
from shared.kube.client import KubeClient
from shared.kube.errors import ApiError

NAME = "tatara-export-worker"

log = logging.getLogger(NAME)

_TRACER = trace.get_tracer("tatara.export_worker")


def _now() -> datetime:
    return datetime.now(UTC)


async def serve(config: WorkerConfig) -> int:
    """Connect, run the export, return the exit status."""
    try:
        client = await KubeClient.connect(user_agent=f"{NAME}/{__version__}")
    except Exception as err:  # config loading raises several unrelated types
        log.error("cannot load Kubernetes credentials: %s", err)
        return 1
    parent = tracing.context_from_traceparent(os.environ.get(tracing.TRACEPARENT)) if tracing.enabled else None
    attributes = {"k8s.namespace.name": config.process_namespace, "k8s.object.name": config.process_name,
                  "tatara.receipt": config.receipt_configmap}
    with _TRACER.start_as_current_span("export", context=parent, attributes=attributes) as span:
        try:
            run = await run_export(client, config, now=_now, out=sys.stdout)
        except ApiError as err:
            log.error("receipt %s/%s not written: %s", config.process_namespace, config.receipt_configmap, err)
            span.set_status(StatusCode.ERROR, str(err))
            return 1
        finally:
            await client.close()
    return 0 if run.outcome.is_shipped else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the binary; returns the exit status."""
    config = entrypoint.prepare(NAME, __version__, argv, parse_or_exit)
    if config is None:
        return 0
    log.info("export of %s/%s, receipt %s", config.process_namespace, config.process_name, config.receipt_configmap)
    try:
        return anyio.run(serve, config)
    finally:
        tracing.shutdown_tracing()


if __name__ == "__main__":
    sys.exit(main())
