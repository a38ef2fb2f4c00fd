"""Pure parts of PID allocation: format, depth, limits, backoff
(docs/behaviour.md#pids, docs/wire-format.md#pid-format)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.pid import (
    ALLOCATION_BACKOFF,
    PidRefused,
    _listed_process,
    check_limits,
    children_of,
    identity_name,
    pid_level,
)
from reconciler.table_keeper import default_table, held_sequence, sequences_of
from shared.domain.api.codec import convert, to_wire
from shared.domain.api.process import Process
from shared.domain.api.table import ProcessTableSpec
from shared.domain.identity import allocate_pid as format_pid


def process(name: str = "p", namespace: str = "ns", *, parent: str | None = None, override: str | None = None,
            status: dict[str, Any] | None = None) -> Process:
    identity: dict[str, Any] = {}
    if parent is not None:
        identity["parent"] = parent
    if override is not None:
        identity["nameOverride"] = override
    doc: dict[str, Any] = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "identity": identity,
            "classification": {"pointType": "Gate", "substrate": "Observability"},
            "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "obs"}},
        },
    }
    if status is not None:
        doc["status"] = status
    return convert(doc, Process)


@pytest.mark.parametrize(
    ("name", "parent", "seq", "expected"),
    [
        ("seph", None, 1, "seph.1"),
        ("seph", "", 1, "seph.1"),
        ("x", "seph.1", 7, "seph.1.7"),
        ("0123456789abcdefghjkmnpqrs", None, 3, "0123456789abcdefghjkmnpqrs.3"),
    ],
    ids=["a root is its name and the sequence", "an empty parent counts as a root",
         "a child is its parent and the sequence", "a root without override uses its content hash"],
)
def test_pid_format_follows_the_wire_format(name: str, parent: str | None, seq: int, expected: str) -> None:
    assert format_pid(name, parent, seq) == expected


def test_identity_name_prefers_the_stored_identity() -> None:
    stored = process(override="seph", status={"identity": {"name": "kept", "content_hash": "h", "name_override": True}})
    assert identity_name(stored) == "kept"


def test_identity_name_derives_the_override_when_no_identity_is_stored() -> None:
    assert identity_name(process(override="  seph  ")) == "seph"


def test_identity_name_without_override_is_the_26_char_content_hash() -> None:
    name = identity_name(process())
    assert len(name) == 26
    assert set(name) <= set("0123456789abcdefghjkmnpqrstvwxyz")


@pytest.mark.parametrize(
    ("pid", "level"),
    [("", 0), ("seph", 0), ("seph.1", 1), ("seph.1.7", 2), ("seph.1.7.3", 3), ("a.b.4", 1), ("42.1", 1)],
    ids=["empty", "a bare name", "a root", "a child", "a grandchild", "a dotted root name",
         "an all-digit root name is still the name"],
)
def test_pid_level_counts_sequence_segments(pid: str, level: int) -> None:
    assert pid_level(pid) == level


@pytest.mark.parametrize(
    ("max_depth", "max_children", "parent", "children", "refusal"),
    [
        (0, 0, "seph.1.2.3.4.5", 1000, None),
        (1, 0, None, 0, None),
        (1, 0, "seph.1", 0, "PID depth 2 exceeds ProcessTable maxDepth 1 (parent seph.1)"),
        (2, 0, "seph.1", 0, None),
        (2, 0, "seph.1.7", 0, "PID depth 3 exceeds ProcessTable maxDepth 2 (parent seph.1.7)"),
        (0, 2, "seph.1", 1, None),
        (0, 2, "seph.1", 2, "parent seph.1 already has 2 children; ProcessTable maxChildren is 2"),
        (0, 1, None, 50, None),
    ],
    ids=[
        "zero means unlimited for both limits",
        "a root fits maxDepth 1",
        "a child of a root breaks maxDepth 1",
        "a child of a root fits maxDepth 2",
        "a grandchild breaks maxDepth 2",
        "a second child fits maxChildren 2",
        "a third child breaks maxChildren 2",
        "maxChildren does not limit roots",
    ],
)
def test_limits_follow_the_table_spec(
    max_depth: int, max_children: int, parent: str | None, children: int, refusal: str | None
) -> None:
    spec = ProcessTableSpec(max_depth=max_depth, max_children=max_children)
    if refusal is None:
        check_limits(spec, parent, "seph", children)
    else:
        with pytest.raises(PidRefused) as err:
            check_limits(spec, parent, "seph", children)
        assert err.value.reason == refusal
        assert str(err.value) == refusal


def test_children_counts_only_processes_with_a_pid_under_that_parent() -> None:
    procs = [
        process("a", parent="seph.1", status={"pid": "seph.1.2"}),
        process("b", parent="seph.1", status={"pid": "seph.1.3"}),
        process("c", parent="seph.1"),  # not forked yet
        process("d", parent="seph.2", status={"pid": "seph.2.4"}),
        process("e", status={"pid": "seph.1"}),
    ]
    assert children_of("seph.1", procs) == 2
    assert children_of("seph.1", procs, exclude=("ns", "a")) == 1


def test_default_table_has_the_spec_defaults_and_our_finalizer() -> None:
    wire = to_wire(default_table())
    assert wire["metadata"] == {"name": "proc", "finalizers": ["tatara.pleme.io/processtable-finalizer"]}
    assert wire["spec"] == {"nextSequence": 1, "maxDepth": 0, "maxChildren": 0, "sigtermTimeoutSeconds": 480,
                            "zombieTimeoutSeconds": 600, "orphanReapingEnabled": True}
    assert "status" not in wire


def test_a_recreated_table_starts_past_every_sequence_number_held() -> None:
    held = [process("a", status={"pid": "seph.7"}), process("b", parent="seph.7", status={"pid": "seph.7.12"}),
            process("c", parent="seph.30"), process("d", status={"pid": "42.3", "parent": "x.9"})]
    assert held_sequence(held) == 30  # a forking child names its parent before it holds a PID
    assert held_sequence([process("e")]) == 0
    assert sequences_of("seph.1.7") == [7, 1]
    assert sequences_of("42") == []  # the first segment is a name, even when all digits
    assert to_wire(default_table(next_sequence=31))["spec"]["nextSequence"] == 31


@pytest.mark.parametrize(("attempt", "rng", "delay"), [(0, 0.0, 0.0025), (0, 1.0, 0.005), (100, 1.0, 0.25)],
                         ids=["least jitter halves the base", "most jitter is the base", "the cap bounds late waits"])
def test_backoff_is_jittered_and_capped(attempt: int, rng: float, delay: float) -> None:
    assert ALLOCATION_BACKOFF.delay(attempt, lambda: rng) == pytest.approx(delay)


def test_backoff_allows_fifty_bumps() -> None:
    assert len(list(ALLOCATION_BACKOFF.delays(lambda: 0.0))) == 49  # a wait between each two of 50 bumps


@pytest.mark.parametrize(
    ("raw", "decodes"),
    [
        pytest.param(None, True, id="a valid listed Process is counted"),
        pytest.param(b'{"metadata": {"name": "p"}, "spec": 5}', False, id="a Process that does not decode is skipped"),
        pytest.param(b"[" * 200 + b"]" * 200, False, id="a document nested past the decoder's limit is skipped"),
    ],
)
def test_a_listed_process_that_does_not_decode_is_skipped_not_fatal(raw: bytes | None, decodes: bool) -> None:
    document = msgspec.json.encode(to_wire(process())) if raw is None else raw
    assert (_listed_process(msgspec.Raw(document)) is not None) is decodes
