"""The Flux stand-in (tools/standins/flux.py) as its own OS process, for ``reconciler_bench --standin-process``:
the benchmark's event loop then only watches, so the time it stamps on a watch event does not wait behind the
stand-in's own writes.

Usage: ``python -m bench.flux_standin_runner --kubeconfig K --namespace NS``; runs until terminated.
"""

from __future__ import annotations

import argparse
import sys

import anyio

from shared.kube.client import KubeClient
from tools.standins.flux import FluxStandIn


async def run(kubeconfig: str, namespace: str) -> None:
    async with await KubeClient.from_kubeconfig(kubeconfig) as client:
        await FluxStandIn(client, namespace=namespace).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flux_standin_runner", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    args = parser.parse_args(argv)
    anyio.run(run, args.kubeconfig, args.namespace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
