"""The wire decoder's nesting check, per Process watch event: the exact scan against the quick one.

``WireDecoder`` rejects a document nesting more than 127 arrays/objects, as serde_json does
(docs/wire-format.md#numbers). The exact scan (``_check_nesting``) walks every string and bracket in
Python; the quick check (``_too_deep_if_valid``) reads the same depth with a few whole-document byte
operations, and the exact scan runs only when it says too deep or the document is not valid JSON. The
documents are the Processes of ``decode_bench`` with the ``managedFields`` a reconciler's status writes
leave (a ``fieldsV1`` tree of the status, conditions keyed ``k:{"type":…}``), about 6 KB each.

Prints microseconds per document for each check and for the whole ``WireDecoder(Process).decode`` with
either (the old decode is the exact scan followed by the rest of today's decode), and for the metadata
head an informer's resync reads first (an object cached at the same resourceVersion is not decoded
further). No control plane.

Usage: ``.venv/bin/python -m bench.nesting_bench [--count 2000] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from bench.decode_bench import sample_process
from shared.domain.api import codec
from shared.domain.api.process import Process
from shared.kube.informer import _Head


def fields_v1(value: Any) -> Any:
    """The ``fieldsV1`` tree server-side apply records for ``value``."""
    if isinstance(value, dict):
        return {".": {}, **{f"f:{k}": fields_v1(v) for k, v in value.items()}} if value else {}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        key = next(iter(value[0]))
        return {f"k:{json.dumps({key: v[key]}, separators=(',', ':'))}": fields_v1(v) for v in value}
    return {}


def watch_event_object(i: int) -> bytes:
    doc = json.loads(sample_process(i))
    doc["metadata"]["managedFields"].append({
        "manager": "tatara-reconciler", "operation": "Update", "apiVersion": "tatara.pleme.io/v1alpha1",
        "time": "2026-05-19T10:11:12Z", "fieldsType": "FieldsV1", "subresource": "status",
        "fieldsV1": {"f:status": fields_v1(doc["status"])},
    })
    return json.dumps(doc, separators=(",", ":")).encode()


def per_doc_us(fn: Callable[[bytes], object], docs: list[bytes], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for doc in docs:
            fn(doc)
        times.append((time.perf_counter() - start) / len(docs) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    docs = [watch_event_object(i) for i in range(args.count)]
    decoder = codec.wire_decoder(Process)
    head = msgspec.json.Decoder(_Head)  # what an informer's resync reads first (shared.kube.informer)

    def old_decode(raw: bytes) -> Process:
        codec._check_nesting(raw)
        return decoder._decode(raw)

    paths: dict[str, Callable[[bytes], object]] = {
        "exact scan (_check_nesting)": codec._check_nesting,
        "quick check (_too_deep_if_valid)": codec._too_deep_if_valid,
        "decode, exact scan first (before)": old_decode,
        "decode, quick check (now)": decoder.decode,
        "metadata head only (a resync's reuse)": head.decode,
    }
    sizes = [len(d) for d in docs]
    brackets = [d.count(b"[") + d.count(b"{") for d in docs]
    print(f"{args.count} Process documents, {statistics.median(sizes):.0f} bytes and "
          f"{statistics.median(brackets):.0f} brackets each (medians), median of {args.rounds} rounds")
    for name, fn in paths.items():  # alternating would not help: each path runs back to back within a second
        print(f"{name:36} {per_doc_us(fn, docs, args.rounds):8.1f} us/document")


if __name__ == "__main__":
    main()
