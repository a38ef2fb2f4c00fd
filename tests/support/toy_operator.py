"""A toy operator on the controller runtime, run as a real process by e2e tests and benchmarks.

It annotates every ConfigMap in one namespace with ``toy.tatara.test/seen=<data.value>``
and ``toy.tatara.test/by=<identity>`` (no write when already so), logging JSON lines
``reconcile start`` / ``reconcile end`` and the elector's ``started leading``.

Usage: ``python -m tests.support.toy_operator --kubeconfig K --namespace NS [--elect LEASE]
[--identity ID] [--lease 3 --renew 2 --retry 0.5] [--reconcile-delay S] [--hold-until FIFO] [--workers N]
[--grace S]``

``--hold-until FIFO`` keeps every reconcile in flight until the named pipe FIFO is opened for writing and
closed, so a test can act while a reconcile is certainly running (and then let it end) instead of betting on
a delay.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import anyio
import msgspec

from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.controller import Controller, Request, Result
from shared.kube.health import HealthServer
from shared.kube.leader import LeaderElector, LeadershipLost, LeaseTiming
from shared.kube.logcontext import configure_logging
from shared.kube.manager import Manager
from shared.kube.meta import ObjectMeta
from shared.kube.patch import patch_annotations

SEEN = "toy.tatara.test/seen"
BY = "toy.tatara.test/by"
log = logging.getLogger("toy")


class ConfigMap(msgspec.Struct):
    metadata: ObjectMeta
    data: dict[str, str] = {}


async def main_async(args: argparse.Namespace) -> int:
    client = await KubeClient.from_kubeconfig(args.kubeconfig)
    try:
        elector = None
        if args.elect:
            elector = LeaderElector(client, args.elect, args.namespace, identity=args.identity,
                                    timing=LeaseTiming(args.lease, args.renew, args.retry))
        health = HealthServer("127.0.0.1", args.health_port)
        manager = Manager(client, health=health, elector=elector, shutdown_grace=args.grace)
        informer = manager.informer(CONFIG_MAPS, ConfigMap, namespace=args.namespace)
        identity = args.identity or "toy"

        starts: list[str] = []

        async def flush_starts() -> None:
            # one write per 50 ms rather than a flushed write per reconcile: at thousands of reconciles a
            # second, a write (and the reader's wake-up) per line cost the operator an eighth of its CPU
            while True:
                await anyio.sleep(0.05)
                if starts:
                    sys.stdout.write("".join(starts))
                    sys.stdout.flush()
                    starts.clear()

        async def reconcile(request: Request) -> Result:
            if args.print_starts:
                starts.append(f"START {request} {time.time()}\n")
            else:
                log.info("reconcile start", extra={"key": str(request)})
            if args.reconcile_delay:
                await anyio.sleep(args.reconcile_delay)
            if args.hold_until:  # a FIFO: opening it for reading blocks until the test opens it for writing
                await anyio.to_thread.run_sync(Path(args.hold_until).read_bytes, abandon_on_cancel=True)
            cm = informer.get(str(request))
            if cm is not None:
                await patch_annotations(client, CONFIG_MAPS, cm,
                                        {SEEN: cm.data.get("value", ""), BY: identity})
            if not args.print_starts:
                log.info("reconcile end", extra={"key": str(request)})
            return Result.done()

        manager.add(Controller("toy", informer, reconcile, workers=args.workers))
        try:
            if args.print_starts:  # a benchmark's run: no election
                async with anyio.create_task_group() as tg:
                    tg.start_soon(flush_starts)
                    await manager.run()
                    tg.cancel_scope.cancel()
            else:
                await manager.run()
        except LeadershipLost:
            return 1
        return 0
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toy_operator")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--elect", default="", help="Lease name; empty: no leader election")
    parser.add_argument("--identity", default=None)
    parser.add_argument("--lease", type=float, default=15.0)
    parser.add_argument("--renew", type=float, default=10.0)
    parser.add_argument("--retry", type=float, default=2.0)
    parser.add_argument("--reconcile-delay", type=float, default=0.0)
    parser.add_argument("--hold-until", default="",
                        help="a named pipe; each reconcile ends once it is opened for writing and closed")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("--health-port", type=int, default=0)
    parser.add_argument("--print-starts", action="store_true",
                        help="print 'START <key> <unix time>' to stdout per reconcile instead of logging, the "
                             "lines written every 50 ms (benchmarks)")
    args = parser.parse_args(argv)
    configure_logging("WARNING" if args.print_starts else "INFO")
    return anyio.run(main_async, args)


if __name__ == "__main__":
    sys.exit(main())
