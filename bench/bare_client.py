"""The limit contender of ``controller_bench``: the same work with no controller runtime at all.

One paginated LIST of the namespace's ConfigMaps, then a JSON merge patch of the annotation on every
one that lacks it, ``--concurrency`` at a time, through the same :class:`~shared.kube.client.KubeClient`
our runtime uses — no watch, no cache, no work queue, no metrics. Nothing an operator does can reach
the API server's answers faster, so ``ours / bare`` in ``controller_bench`` is the share of the
limit the runtime reaches (bench/README.md#controller_bench).

It exits once every object is annotated, so ``controller_bench`` measures it in the throughput
phase only (it has no watch, so no latency, and no cache, so no memory figure).

Usage: ``python -m bench.bare_client --kubeconfig K --namespace NS [--concurrency 32]``
"""

from __future__ import annotations

import argparse
import sys

import anyio
import msgspec

from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.meta import ObjectMeta
from shared.kube.pager import list_all
from shared.kube.patch import annotations_patch

SEEN = "toy.tatara.test/seen"
BY = "toy.tatara.test/by"


class _ConfigMap(msgspec.Struct):
    metadata: ObjectMeta
    data: dict[str, str] = {}


_decode = msgspec.json.Decoder(_ConfigMap).decode


async def annotate_all(client: KubeClient, namespace: str, concurrency: int) -> None:
    """The whole contender: one paginated LIST, then the patches, ``concurrency`` at a time (also run inside
    ``controller_bench``'s own process as its ``inproc`` limit)."""
    listing = await list_all(client, CONFIG_MAPS, _decode, namespace, page_size=500)
    todo = [cm for cm in listing.items if SEEN not in cm.metadata.annotations]
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(cm: _ConfigMap) -> None:
        async with limiter:
            body = annotations_patch({SEEN: cm.data.get("value", ""), BY: "bare"})
            await client.merge_patch(CONFIG_MAPS, cm.metadata.name or "", body, namespace)

    async with anyio.create_task_group() as tg:
        for cm in todo:
            tg.start_soon(one, cm)


async def main_async(args: argparse.Namespace) -> int:
    async with await KubeClient.from_kubeconfig(args.kubeconfig) as client:
        await annotate_all(client, args.namespace, args.concurrency)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bare_client", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--concurrency", type=int, default=32)
    return anyio.run(main_async, parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
