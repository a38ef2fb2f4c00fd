"""The informer's default transform (drop kubectl's last-applied annotation; managedFields are dropped by
decoding already): memory retained per cached object, without and with it. No control plane.

``--objects`` ConfigMaps as ``kubectl apply`` leaves them (``--bytes`` of data, the same again as JSON in the
last-applied annotation, one managedFields entry) are decoded by an informer and stored in its cache; the
memory the cache retains is read with tracemalloc (after a collection).

Usage: ``.venv/bin/python -m bench.transform_bench [--objects 10000] [--bytes 512]``. Prints a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc

import msgspec

from shared.kube.client import CONFIG_MAPS
from shared.kube.informer import LAST_APPLIED, Informer, strip_last_applied
from shared.kube.meta import ObjectMeta
from tests.support.fake_api import FakeApi


class ConfigMap(msgspec.Struct):
    metadata: ObjectMeta
    data: dict[str, str] = {}


def applied(i: int, size: int) -> bytes:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": "bench"},
            "data": {"blob": f"{i:08d}" + "x" * size}}
    meta = {**body["metadata"], "uid": f"uid-{i}", "resourceVersion": str(1000 + i),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {LAST_APPLIED: json.dumps(body) + "\n"},
            "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:data": {".": {}, "f:blob": {}},
                                            "f:metadata": {"f:annotations": {".": {}, f"f:{LAST_APPLIED}": {}}}}}]}
    return json.dumps({**body, "metadata": meta}).encode()


def retained(raws: list[bytes], transform: bool) -> int:
    """Bytes the cache of ``raws`` retains."""
    informer = Informer(FakeApi(), CONFIG_MAPS, ConfigMap, transform=strip_last_applied if transform else None)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    objects = [o for o in (informer._decode(msgspec.Raw(raw)) for raw in raws) if o is not None]
    informer.store.replace(objects)
    del objects
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(informer) == len(raws)
    return after - before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--bytes", type=int, default=512)
    args = parser.parse_args(argv)
    raws = [applied(i, args.bytes) for i in range(args.objects)]
    print(f"{args.objects} ConfigMaps, {sum(map(len, raws)) // args.objects} bytes of API JSON each")
    print(f"{'cache':28} {'retained MiB':>13} {'bytes/object':>13}")
    for name, transform in (("as decoded (transform=None)", False), ("last-applied dropped", True)):
        size = retained(raws, transform)
        print(f"{name:28} {size / 2**20:13.1f} {size // args.objects:13d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
