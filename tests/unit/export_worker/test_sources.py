"""export_worker/sources.py: which ConfigMaps' values become receipts, and what is skipped and counted."""

from __future__ import annotations

import json

from export_worker.sources import ConfigMap, collect_receipts
from shared.kube.meta import ObjectMeta

REF = "demo/pr-1"


def receipt(kind: str) -> str:
    return json.dumps({"version": "tatara-receipt/v1", "kind": kind, "composed_root": "r", "intent_hash": "i",
                       "artifact_hash": "a", "control_hash": "", "generated_at": "2026-05-19T12:00:00Z"})


YAML_RECEIPT = ("version: tatara-receipt/v1\nkind: db-migration\ncomposed_root: r\nintent_hash: i\n"
                "artifact_hash: a\ncontrol_hash: ''\ngenerated_at: 2026-05-19T12:00:00Z\n")


def cm(name: str, data: dict[str, str], *, ref: str | None = REF, role: str | None = None) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name=name, annotations={"tatara.pleme.io/process": ref} if ref else {},
                                         labels={"tatara.pleme.io/role": role} if role else {}), data=data)


def test_values_that_parse_are_collected_in_configmap_then_key_order_and_the_rest_counted() -> None:
    collected = collect_receipts([
        cm("a", {"z.json": receipt("test-suite"), "a.yaml": YAML_RECEIPT, "notes": "free text"}),
        cm("b", {"receipt.json": '{"version": "tatara-receipt/v2"}'}),
        cm("c", {"receipt.json": receipt("nix-build")}),
    ], REF)
    assert [e.kind for e in collected.envelopes] == ["db-migration", "test-suite", "nix-build"]
    assert collected.skipped == 2


def test_configmaps_of_other_processes_unannotated_ones_and_export_receipts_are_left_out() -> None:
    collected = collect_receipts([
        cm("other", {"r": receipt("test-suite")}, ref="demo/pr-2"),
        cm("bare", {"r": receipt("test-suite")}, ref=None),
        cm("export", {"receipt.yaml": receipt("tatara.export")}, role="export"),
        cm("bad", {"r": "not a receipt"}, ref="demo/pr-2"),
    ], REF)
    assert (collected.envelopes, collected.skipped) == ([], 0)


def test_the_artifact_is_a_json_array_of_envelopes() -> None:
    artifact = collect_receipts([cm("c", {"receipt.json": receipt("nix-build")})], REF).artifact()
    assert json.loads(artifact.data) == [json.loads(receipt("nix-build"))]
    assert artifact.skipped_receipts == 0
