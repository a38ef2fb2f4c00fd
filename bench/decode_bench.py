"""Decode 10,000 realistic Process objects (~3 KB of API JSON each): msgspec models vs json.loads dicts.

Reports objects/s for decode + field access and the retained memory per cached object
(tracemalloc). The dict path strips ``managedFields`` as our informer does; the Struct
path drops it (and every other unmodelled key) during decoding.

Run: ``.venv/bin/python bench/decode_bench.py [--count N] [--rounds R]``
"""

from __future__ import annotations

import argparse
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgspec

from shared.domain.api.process import Process


def sample_process(i: int) -> bytes:
    """One Process as the API server returns it, around 3 KB."""
    ts = "2026-05-19T10:11:12Z"
    doc: dict[str, Any] = {
        "apiVersion": "tatara.pleme.io/v1alpha1",
        "kind": "Process",
        "metadata": {
            "name": f"observability-stack-{i}",
            "namespace": "seph",
            "uid": f"3f0c2a9e-5d1b-4c7e-9a1f-{i:012d}",
            "resourceVersion": str(100000 + i),
            "generation": 3,
            "creationTimestamp": ts,
            "labels": {"tatara.pleme.io/point-type": "Gate", "tatara.pleme.io/substrate": "Observability"},
            "annotations": {"tatara.pleme.io/pid": f"seph.1.{i}"},
            "finalizers": ["tatara.pleme.io/process-finalizer"],
            "managedFields": [
                {
                    "manager": "kubectl",
                    "operation": "Apply",
                    "apiVersion": "tatara.pleme.io/v1alpha1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:classification": {}, "f:intent": {}, "f:boundary": {}}},
                },
                {
                    "manager": "tatara-reconciler",
                    "operation": "Update",
                    "apiVersion": "tatara.pleme.io/v1alpha1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {"f:status": {"f:phase": {}, "f:pid": {}, "f:attestation": {}}},
                },
            ],
        },
        "spec": {
            "identity": {"parent": "seph.1"},
            "classification": {
                "pointType": "Gate",
                "substrate": "Observability",
                "horizon": {"kind": "Bounded"},
                "calm": "Monotone",
                "dataClassification": "Internal",
            },
            "intent": {
                "flux": {
                    "gitRepository": "k8s",
                    "path": f"./clusters/seph/observability-{i}",
                    "decryptSops": True,
                    "helmValues": {"replicas": 2, "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}}},
                }
            },
            "boundary": {
                "preconditions": [
                    {"kind": "ProcessPhase", "params": {"processRef": "secret-injection", "phase": "Attested"}}
                ],
                "postconditions": [
                    {
                        "kind": "KustomizationHealthy",
                        "params": {"name": "observability-stack", "namespace": "flux-system"},
                    },
                    {
                        "kind": "HelmReleaseReleased",
                        "params": {"name": "kube-prometheus-stack", "namespace": "observability"},
                    },
                ],
                "timeout": "15m",
            },
            "compliance": {
                "baseline": "fedramp-moderate",
                "bindings": [
                    {"framework": "nist-800-53", "controlId": "SC-7", "phase": "AtBoundary"},
                    {"framework": "cis-k8s-v1.8", "controlId": "5.1.1", "phase": "PostConvergence"},
                ],
                "autoRemediate": False,
            },
            "dependsOn": [{"name": "secret-injection", "mustReach": "Attested"}],
            "signals": {
                "sigtermGraceSeconds": 480,
                "sigkillForce": True,
                "sighupStrategy": "Reconverge",
                "startSuspended": False,
            },
            "lifetime": {"ephemeral": {"ttl": "1h", "teardownPolicy": "OnAttested", "maxConcurrent": 1}},
            "suspended": False,
        },
        "status": {
            "pid": f"seph.1.{i}",
            "parent": "seph.1",
            "children": [],
            "identity": {
                "name": "wtem42f9bfvwwvd6ctcban2zp4",
                "content_hash": "wtem42f9bfvwwvd6ctcban2zp4",
                "name_override": False,
            },
            "phase": "Attested",
            "phaseSince": ts,
            "attestation": {
                "artifactHash": "4e6a793330abb1dade833d7bd2962d7e7c3a515338796e437dc31517d2fd97ac",
                "intentHash": "fcf2724be9bbe53706be16c7f7c39aaf3fdb7aaec47da53a473e688bdfd5ebd1",
                "composedRoot": "0c25d39f519b1f899741ea9f0469504e4183c8cb088948089b583cbe5c0c317e",
                "generation": 0,
                "attestedAt": ts,
            },
            "fluxResources": [
                {
                    "apiVersion": "source.toolkit.fluxcd.io/v1",
                    "kind": "GitRepository",
                    "name": f"obs-{i}",
                    "namespace": "seph",
                    "ready": True,
                    "lastCheck": ts,
                },
                {
                    "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                    "kind": "Kustomization",
                    "name": f"obs-{i}",
                    "namespace": "seph",
                    "ready": True,
                    "lastCheck": ts,
                },
            ],
            "boundary": {
                "preconditions": [
                    {
                        "kind": "ProcessPhase",
                        "params": {"processRef": "secret-injection", "phase": "Attested"},
                        "satisfied": True,
                        "lastCheck": ts,
                    }
                ],
                "postconditions": [
                    {
                        "kind": "KustomizationHealthy",
                        "params": {"name": "observability-stack"},
                        "satisfied": True,
                        "lastCheck": ts,
                        "message": "Ready=True",
                    }
                ],
            },
            "compliance": {"satisfied": 0, "violated": 0, "total": 0, "violations": []},
            "signalQueue": [],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastTransitionTime": ts,
                    "reason": "Attested",
                    "message": "all postconditions hold",
                }
            ],
            "message": "attested",
        },
    }
    return json.dumps(doc).encode()


def touch_dict(d: dict[str, Any]) -> tuple[Any, ...]:
    """What a reconcile reads first, from a dict."""
    status = d.get("status") or {}
    spec = d["spec"]
    return (
        d["metadata"]["name"],
        status.get("phase", "Pending"),
        status.get("pid"),
        spec["classification"]["pointType"],
        (spec.get("lifetime") or {}).get("ephemeral", {}).get("ttl"),
        spec.get("suspended", False),
    )


def touch_struct(p: Process) -> tuple[Any, ...]:
    """The same reads from the model."""
    status = p.status
    ephemeral = p.spec.lifetime.ephemeral
    return (
        p.metadata.name,
        p.phase,
        status.pid if status else None,
        p.spec.classification.point_type,
        ephemeral.ttl if ephemeral else None,
        p.spec.suspended,
    )


def via_json(raw: bytes) -> dict[str, Any]:
    d: dict[str, Any] = json.loads(raw)
    d["metadata"].pop("managedFields", None)
    touch_dict(d)
    return d


_decoder = msgspec.json.Decoder(Process)


def via_msgspec(raw: bytes) -> Process:
    p = _decoder.decode(raw)
    touch_struct(p)
    return p


def rates(paths: dict[str, Callable[[bytes], Any]], payloads: list[bytes], rounds: int) -> dict[str, float]:
    """Best objects/s per path; rounds alternate between paths so background load hits both alike."""
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(rounds):
        for name, fn in paths.items():
            gc.collect()
            start = time.perf_counter()
            for raw in payloads:
                fn(raw)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: len(payloads) / seconds for name, seconds in best.items()}


def retained_bytes(fn: Callable[[bytes], Any], payloads: list[bytes]) -> float:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    cache = [fn(raw) for raw in payloads]
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del cache
    return (after - before) / len(payloads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    payloads = [sample_process(i) for i in range(args.count)]
    avg = sum(map(len, payloads)) / len(payloads)
    measured = rates({"json": via_json, "msgspec": via_msgspec}, payloads, args.rounds)
    json_rate, struct_rate = measured["json"], measured["msgspec"]
    json_mem = retained_bytes(via_json, payloads)
    struct_mem = retained_bytes(via_msgspec, payloads)

    print(f"{args.count} Process objects, {avg:.0f} bytes of JSON each (best of {args.rounds})")
    print(f"  json.loads + dict access : {json_rate:10,.0f} objects/s  {json_mem:8,.0f} bytes/cached object")
    print(f"  msgspec Process model    : {struct_rate:10,.0f} objects/s  {struct_mem:8,.0f} bytes/cached object")
    print(f"  speed-up {struct_rate / json_rate:.1f}x, memory {struct_mem / json_mem:.2f}x of the dict")


if __name__ == "__main__":
    main()
