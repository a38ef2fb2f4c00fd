"""export_worker/sources.py: which ConfigMaps' values become receipts, and what is skipped and counted."""

from __future__ import annotations

import json

import pytest

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
    assert collected.unparsable == ("a/notes", "b/receipt.json")
    assert collected.artifact().unparsable == ("a/notes", "b/receipt.json")


def test_configmaps_of_other_processes_unannotated_ones_and_export_receipts_are_left_out() -> None:
    collected = collect_receipts([
        cm("other", {"r": receipt("test-suite")}, ref="demo/pr-2"),
        cm("bare", {"r": receipt("test-suite")}, ref=None),
        cm("export", {"receipt.yaml": receipt("tatara.export")}, role="export"),
        cm("bad", {"r": "not a receipt"}, ref="demo/pr-2"),
    ], REF)
    assert (collected.envelopes, collected.skipped) == ([], 0)


@pytest.mark.parametrize("value", ["a: 2026-13-45", "[" * 5000, "- " * 3000 + "x", "!!python/object:os.system x"],
                         ids=["an impossible date", "deep flow nesting", "deep block nesting", "an unknown tag"])
def test_a_value_that_breaks_the_yaml_reader_is_skipped_not_raised(value: str) -> None:
    collected = collect_receipts([cm("a", {"bad": value, "good": receipt("test-suite")})], REF)
    assert ([e.kind for e in collected.envelopes], collected.skipped) == (["test-suite"], 1)


def test_the_artifact_is_a_json_array_of_envelopes() -> None:
    artifact = collect_receipts([cm("c", {"receipt.json": receipt("nix-build")})], REF).artifact()
    assert json.loads(artifact.data) == [json.loads(receipt("nix-build"))]
    assert artifact.skipped_receipts == 0

