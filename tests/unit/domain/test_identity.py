"""Identity hashes against the worked values of docs/wire-format.md#test-vectors
(algorithms: docs/wire-format.md#hashes)."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from blake3 import blake3

from shared.domain.api.classification import Classification, ConvergencePointType, SubstrateType
from shared.domain.api.intent import Intent, NixIntent
from shared.domain.api.process import FluxResourceRef, IdentitySpec, ProcessSpec
from shared.domain.identity import (
    InvalidEphemeralIdError,
    allocate_pid,
    artifact_hash,
    attest,
    base32_lower,
    compose_root,
    content_hash,
    depth,
    derive_identity,
    ephemeral_id,
    intent_canonical_bytes,
    intent_hash,
    member_process_name,
    parent_of,
    parse_ephemeral_id,
    slot_slug,
    spec_canonical_bytes,
    verify_root,
)

# The minimal spec of the test vectors: Gate / Observability, nix github:pleme-io/k8s#obs, all else defaulted.
V1 = ProcessSpec(
    classification=Classification(point_type=ConvergencePointType.GATE, substrate=SubstrateType.OBSERVABILITY),
    intent=Intent(nix=NixIntent(flake_ref="github:pleme-io/k8s", attribute="obs")),
)

V1_DECLARATION_ORDER = (
    '{"identity":{},"classification":{"pointType":"Gate","substrate":"Observability","horizon":{"kind":"Bounded"},'
    '"calm":"Monotone","dataClassification":"Internal"},"intent":{"nix":{"flakeRef":"github:pleme-io/k8s",'
    '"attribute":"obs","extraArgs":[],"delegateToNixBuild":false}},"boundary":{"preconditions":[],'
    '"postconditions":[]},"compliance":{"bindings":[],"autoRemediate":false},"dependsOn":[],"signals":'
    '{"sigtermGraceSeconds":480,"sigkillForce":true,"sighupStrategy":"Reconverge","startSuspended":false},'
    '"suspended":false}'
)

V1_SORTED = (
    '{"boundary":{"postconditions":[],"preconditions":[]},"classification":{"calm":"Monotone",'
    '"dataClassification":"Internal","horizon":{"kind":"Bounded"},"pointType":"Gate","substrate":"Observability"},'
    '"compliance":{"autoRemediate":false,"bindings":[]},"dependsOn":[],"identity":{},"intent":{"nix":'
    '{"attribute":"obs","delegateToNixBuild":false,"extraArgs":[],"flakeRef":"github:pleme-io/k8s"}},"signals":'
    '{"sighupStrategy":"Reconverge","sigkillForce":true,"sigtermGraceSeconds":480,"startSuspended":false},'
    '"suspended":false}'
)

ROOT_0 = "0c25d39f519b1f899741ea9f0469504e4183c8cb088948089b583cbe5c0c317e"
ROOT_1 = "43f98d46884dcee0c264baded7e95ff58dd3fa8c7fa8a1dcedfb4e772e275f87"


def test_v1_canonical_bytes_are_declaration_order() -> None:
    assert spec_canonical_bytes(V1).decode() == V1_DECLARATION_ORDER


def test_v1_sorted_bytes_sort_every_object() -> None:
    assert spec_canonical_bytes(V1, sort_keys=True).decode() == V1_SORTED


def test_v1_content_hash() -> None:
    assert content_hash(V1) == "wtem42f9bfvwwvd6ctcban2zp4"


def test_v1_ephemeral_id() -> None:
    assert ephemeral_id(V1) == "f219624b"


def test_v1_intent_hash_covers_the_outer_variant_key() -> None:
    assert intent_hash(V1.intent) == "fcf2724be9bbe53706be16c7f7c39aaf3fdb7aaec47da53a473e688bdfd5ebd1"


def test_intent_canonical_bytes_are_the_inner_object_only() -> None:
    assert intent_canonical_bytes(V1.intent) == (
        b'{"flakeRef":"github:pleme-io/k8s","attribute":"obs","extraArgs":[],"delegateToNixBuild":false}'
    )
    assert intent_canonical_bytes(Intent()) == b""


@pytest.mark.parametrize(
    ("artifact", "control", "intent", "previous", "root"),
    [
        ("a", None, "i", None, ROOT_0),
        ("a", "", "i", "", ROOT_0),
        ("a1", "c1", "i1", ROOT_0, ROOT_1),
    ],
    ids=[
        "the first root of the reference's chain",
        "an empty control and previous hash like absent ones",
        "the second root chains on the first",
    ],
)
def test_composed_root_vectors(
    artifact: str, control: str | None, intent: str, previous: str | None, root: str
) -> None:
    assert compose_root(artifact, control, intent, previous) == root


def test_artifact_hash_vector_and_empty_case() -> None:
    ref = FluxResourceRef(
        api_version="kustomize.toolkit.fluxcd.io/v1", kind="Kustomization", namespace="seph", name="observability-stack"
    )
    assert artifact_hash([ref]) == "4e6a793330abb1dade833d7bd2962d7e7c3a515338796e437dc31517d2fd97ac"
    assert artifact_hash([]) == ""


def test_attestation_chain_starts_at_generation_zero_and_links_roots() -> None:
    now = datetime(2026, 5, 19, 12, 0, tzinfo=UTC)
    first = attest(artifact="a", control=None, intent="i", previous=None, now=now)
    assert (first.generation, first.previous_root, first.composed_root) == (0, None, ROOT_0)
    second = attest(artifact="a1", control="c1", intent="i1", previous=first, now=now)
    assert (second.generation, second.previous_root, second.composed_root) == (1, ROOT_0, ROOT_1)
    assert verify_root(second)
    assert not verify_root(msgspec.structs.replace(second, intent_hash="i2"))


@pytest.mark.parametrize(
    ("data", "text"),
    [(bytes(16), "0" * 26), (b"\xff" * 16, "z" * 25 + "w")],
    ids=["sixteen zero bytes are twenty-six zeros", "sixteen 0xff bytes end in w"],
)
def test_base32_vectors(data: bytes, text: str) -> None:
    assert base32_lower(data) == text


def with_override(override: str | None) -> ProcessSpec:
    return msgspec.structs.replace(V1, identity=IdentitySpec(name_override=override))


def hash_of_v1_with(identity_json: str) -> str:
    """The content hash computed from the text of the vector, not by the code under test: V1's
    declaration-order JSON with its ``identity`` object replaced, then BLAKE3, the first 16 bytes, base32
    (docs/wire-format.md#content-hash)."""
    text = V1_DECLARATION_ORDER.replace('"identity":{}', f'"identity":{identity_json}', 1)
    return base32_lower(blake3(text.encode()).digest()[:16])


def test_the_independent_hash_reproduces_the_vector() -> None:
    assert hash_of_v1_with("{}") == "wtem42f9bfvwwvd6ctcban2zp4"


@pytest.mark.parametrize(
    ("override", "identity_json", "name", "is_override"),
    [("  seph  ", '{"nameOverride":"  seph  "}', "seph", True), ("   ", '{"nameOverride":"   "}', None, False),
     (None, "{}", None, False)],
    ids=[
        "a non-empty override wins after trimming (and is hashed untrimmed)",
        "a blank override counts as absent (and is hashed)",
        "no override names the process by its hash",
    ],
)
def test_derive_identity(override: str | None, identity_json: str, name: str | None, is_override: bool) -> None:
    identity = derive_identity(with_override(override))
    expected_hash = hash_of_v1_with(identity_json)
    assert identity.content_hash == expected_hash
    assert identity.name == (name or expected_hash)
    assert identity.name_override is is_override


def test_the_override_is_part_of_the_hashed_spec() -> None:
    assert content_hash(with_override("seph")) != content_hash(V1)


@pytest.mark.parametrize(
    ("name", "parent", "seq", "pid"),
    [("seph", None, 1, "seph.1"), ("x", "seph.1", 7, "seph.1.7"), ("seph", "", 3, "seph.3")],
    ids=["a root uses its identity name", "a child extends its parent's pid", "an empty parent counts as absent"],
)
def test_allocate_pid(name: str, parent: str | None, seq: int, pid: str) -> None:
    assert allocate_pid(name, parent, seq) == pid


@pytest.mark.parametrize(
    ("pid", "expected_depth", "parent"),
    [("seph.1.7.3", 4, "seph.1.7"), ("seph.1", 2, "seph"), ("seph", 1, None), ("", 0, None)],
    ids=["a four-segment pid", "a two-segment pid", "a root name has no parent", "the empty pid has depth zero"],
)
def test_pid_depth_and_parent(pid: str, expected_depth: int, parent: str | None) -> None:
    assert depth(pid) == expected_depth
    assert parent_of(pid) == parent


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("f219624", "ephemeral env id must be 8 chars, got 7"),
        ("F219624B", 'ephemeral env id must be lowercase hex [0-9a-f], got "F219624B"'),
        ("g219624b", 'ephemeral env id must be lowercase hex [0-9a-f], got "g219624b"'),
    ],
    ids=["a short id is refused by length", "upper-case hex is refused", "a non-hex letter is refused"],
)
def test_ephemeral_id_validation(text: str, message: str) -> None:
    with pytest.raises(InvalidEphemeralIdError) as err:
        parse_ephemeral_id(text)
    assert str(err.value) == message


def test_a_valid_ephemeral_id_parses() -> None:
    assert parse_ephemeral_id("f219624b") == "f219624b"


def test_slot_slug_is_deterministic_eight_hex() -> None:
    assert slot_slug("uid-1", 0) == slot_slug("uid-1", 0)
    assert slot_slug("uid-1", 0) != slot_slug("uid-1", 1)
    assert slot_slug("uid-1", 0) != slot_slug("uid-2", 0)
    assert len(slot_slug("uid", 42)) == 8
    assert all(c in "0123456789abcdef" for c in slot_slug("uid", 42))


def test_member_names_compose_pool_and_slug_within_dns_limits() -> None:
    name = member_process_name("demo-pool", "uid-x", 5)
    assert name.startswith("demo-pool-")
    assert len(name) == 10 + 8
    long_name = member_process_name("x" * 300, "uid", 0)
    assert len(long_name) <= 253
    assert long_name == "x" * 237 + "-" + slot_slug("uid", 0)


@pytest.mark.parametrize(("uid", "name"), [
    ("", "pool-f1394138"),  # an empty uid is a uid (docs/wire-format.md#member-names)
    (None, f"pool-{slot_slug('pool', 0)}"),  # only an absent one falls back to the pool name
    ("uid-x", f"pool-{slot_slug('uid-x', 0)}"),
])
def test_member_name_uid(uid: str | None, name: str) -> None:
    assert member_process_name("pool", uid, 0) == name


def test_member_name_cut_inside_a_character_drops_it() -> None:
    # 237 bytes end inside the 119th é (docs/divergences.md#member-name-cut): 118 é are kept.
    assert member_process_name("é" * 150, "u", 1) == "é" * 118 + "-" + slot_slug("u", 1)
