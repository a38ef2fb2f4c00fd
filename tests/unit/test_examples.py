"""Every object in examples/ decodes into our models and names the state it settles in."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from reconciler.concurrency import concurrency_key
from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.codec import decode, decode_process
from shared.domain.api.pool import EphemeralPool
from tools.opscli import compile_lisp
from tools.up import EXPECT, GONE_AFTER_ATTESTED, lisp_expectation, load_examples, load_supporting
from tools.up_exports import NATS_PORT, RECEIVER_PORT

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_example_decodes_into_its_model_with_valid_unions() -> None:
    examples = load_examples(EXAMPLES)
    kinds = {ex.kind for ex in examples}
    assert kinds == {"Process", "EphemeralPool", "EphemeralAllocation"}
    for ex in examples:
        raw = msgspec.json.encode(ex.doc)
        if ex.kind == "Process":
            decode_process(raw, validate=True)
        elif ex.kind == "EphemeralPool":
            decode(raw, EphemeralPool)
        else:
            decode(raw, EphemeralAllocation)
        assert ex.doc["metadata"]["annotations"][EXPECT] == ex.expect


def test_the_examples_cover_flux_a_family_an_ephemeral_a_pool_and_the_upstream_ones() -> None:
    by_name = {ex.name: ex for ex in load_examples(EXAMPLES)}
    assert "flux" in by_name["podinfo"].doc["spec"]["intent"]
    assert by_name["family-web"].doc["metadata"]["annotations"]["examples.tatara.pleme.io/parent"] == "family"
    assert by_name["family-worker"].doc["metadata"]["annotations"]["examples.tatara.pleme.io/parent"] == "family"
    assert by_name["scratch"].doc["spec"]["lifetime"]["ephemeral"]["ttl"] == "45s"
    assert by_name["ci-run-1"].doc["spec"]["poolRef"]["name"] == "warm"
    assert {"closed-loop-attest", "observability-stack"} <= set(by_name)
    exports = by_name["release-train"].doc["spec"]["lifetime"]["ephemeral"]["exports"]
    assert [next(iter(e["source"])) for e in exports] == ["testReport", "receipts", "runMarker"]
    assert [next(iter(e["channel"])) for e in exports] == ["httpEvent", "natsSubject", "stdout"]


def test_the_exports_example_carries_its_test_report_and_points_at_the_ports_tatara_up_uses() -> None:
    supporting = {doc["metadata"]["name"]: doc for doc in load_supporting(EXAMPLES)}
    exports = {ex.name: ex for ex in load_examples(EXAMPLES)}["release-train"].doc["spec"]["lifetime"]["ephemeral"]
    report = exports["exports"][0]["source"]["testReport"]
    assert report["key"] in supporting[report["configmap"]]["data"]
    assert exports["exports"][0]["channel"]["httpEvent"]["endpoint"].startswith(f"http://127.0.0.1:{RECEIVER_PORT}/")
    assert exports["exports"][1]["channel"]["natsSubject"]["url"] == f"nats://127.0.0.1:{NATS_PORT}"


@pytest.mark.parametrize("name", ["closed-loop-ephemeral", "observability-stack"])
def test_each_upstream_lisp_compiles_to_a_process_like_its_yaml_twin(name: str) -> None:
    (compiled,) = compile_lisp((EXAMPLES / "upstream" / f"{name}.lisp").read_text())
    (twin,) = [ex for ex in load_examples(EXAMPLES / "upstream") if ex.name == compiled["metadata"]["name"]]
    # Only the intent's variant is compared: upstream's YAML twin of closed-loop-ephemeral says calm
    # NonMonotone where the defephemeral lowering gives Monotone.
    assert compiled["spec"]["classification"]["pointType"] == twin.doc["spec"]["classification"]["pointType"]
    assert set(compiled["spec"]["intent"]) == set(twin.doc["spec"]["intent"])


def test_the_lisp_matrix_is_applied_compiled_and_each_environment_must_pass_through_attested() -> None:
    matrix = [ex for ex in load_examples(EXAMPLES) if ex.name.startswith("echo-sweep-")]
    assert sorted(ex.name for ex in matrix) == sorted(
        f"echo-sweep-version-{v}-replicas-{r}" for v in ("0-5-4", "0-5-5") for r in (1, 3))
    expected = {("Process", "tatara-examples", GONE_AFTER_ATTESTED)}
    assert {(ex.kind, ex.namespace, ex.expect) for ex in matrix} == expected
    assert {ex.doc["metadata"]["annotations"][EXPECT] for ex in matrix} == {GONE_AFTER_ATTESTED}


def test_the_matrix_has_its_max_concurrent_group_to_itself() -> None:
    """Every ephemeral Process of a group holds a slot (docs/behaviour.md#maxconcurrent): a long-lived
    example in the matrix's group would keep its environments Pending for the whole run."""
    groups: dict[str, list[str]] = {}
    for ex in load_examples(EXAMPLES):
        if ex.kind == "Process":
            key = concurrency_key(decode_process(msgspec.json.encode(ex.doc)))
            if key is not None:
                groups.setdefault(key, []).append(ex.name)
    (key,) = {k for k, names in groups.items() if any(n.startswith("echo-sweep-") for n in names)}
    assert all(n.startswith("echo-sweep-") for n in groups[key])
    pool = {ex.name: ex for ex in load_examples(EXAMPLES)}["warm"].doc["spec"]["template"]["aplicacao"]["chartRef"]
    assert key != f"chart:{pool}"


@pytest.mark.parametrize(
    ("lifetime", "expect"),
    [
        pytest.param({"ephemeral": {"ttl": "1h", "teardownPolicy": "Always"}}, GONE_AFTER_ATTESTED,
                     id="torn down on Attested: gone after Attested"),
        pytest.param({"ephemeral": {"ttl": "1h", "teardownPolicy": "Never"}}, "Attested",
                     id="kept until its TTL: Attested"),
        pytest.param({"permanent": {}}, "Attested", id="permanent: Attested"),
        pytest.param(None, "Attested", id="no lifetime: Attested"),
    ],
)
def test_a_compiled_process_settles_by_its_teardown_policy(lifetime: dict[str, object] | None, expect: str) -> None:
    assert lisp_expectation({"spec": {"lifetime": lifetime}}) == expect
