"""Entry point of the ``tatara-reconciler`` binary (the Process + ProcessTable controllers).

Flags and environment: :mod:`reconciler.config` (``--help`` lists every one). Connects in-cluster, or
through ``$KUBECONFIG`` / ``~/.kube/config``; logs JSON lines; exports traces over OTLP when
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set. Exit codes: :mod:`shared.kube.entrypoint`.
"""

from __future__ import annotations

import sys

from reconciler.app import build
from reconciler.config import parse_or_exit
from shared import __version__
from shared.kube import entrypoint


def main(argv: list[str] | None = None) -> int:
    """Run the binary; returns the process exit code."""
    return entrypoint.main("tatara-reconciler", __version__, argv, parse_or_exit, build)


if __name__ == "__main__":
    sys.exit(main())
