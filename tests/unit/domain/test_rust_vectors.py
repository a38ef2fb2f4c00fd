"""Every section of ``tests/fixtures/golden/rust-vectors.json``, vectors computed by the Rust
reference itself, run against the project: one case per vector, named by its id.

The file's ``format`` key says what each section holds. A vector whose result we differ from on
purpose is listed in :data:`DIVERGENT` with its docs/divergences.md anchor; its case then checks
what tatara does instead, so a divergence that disappears fails too.

Decoder error texts are the one thing never compared: where the reference reports serde_json's
or serde_yaml's message (``missing field `backend` at line 1 column 157``), tatara reports
msgspec's, so only the rejection (and the ``invalid JSON: `` / ``invalid YAML: `` prefix of a
receipt) is checked (docs/divergences.md#decoder-error-texts). Texts the project composes itself
are compared byte for byte.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from shared.domain.api.codec import DecodeError, decode, decode_process, format_timestamp, to_wire
from shared.domain.api.ephemeral import EphemeralSpec
from shared.domain.api.process import FluxResourceRef, ProcessAttestation, ProcessSpec
from shared.domain.api.receipt import ReceiptEnvelope, ReceiptError, parse_either, parse_json
from shared.domain.api.tagged_union import VariantError
from shared.domain.canonical_json import canonical_json, format_float
from shared.domain.hostnames import HostnameError, fqdn, hostname_cluster, hostname_id
from shared.domain.identity import (
    InvalidEphemeralIdError,
    allocate_pid,
    artifact_hash,
    attest,
    compose_root,
    content_hash,
    depth,
    derive_identity,
    env_id_of,
    ephemeral_id,
    format_process_address,
    intent_canonical_bytes,
    intent_hash,
    member_process_name,
    parent_of,
    parse_ephemeral_id,
    slot_slug,
    spec_canonical_bytes,
    verify_root,
)
from shared.domain.json_number import NumberError, parse_f64, parse_number

VECTORS: dict[str, Any] = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "golden" / "rust-vectors.json").read_text(encoding="utf-8")
)

NOW = datetime(2026, 5, 19, 10, 11, 12, tzinfo=UTC)
CLUSTER, LOCATION, DOMAIN = "pleme-dev", "use1", "quero.lol"
"""The fleet settings the routing vectors were computed with (the reconciler's defaults)."""

FREE_FORM_NOT_OBJECT = "free-form-json-objects"
DUPLICATE_KEYS = "duplicate-keys"
NANOSECONDS = "timestamps"

DIVERGENT: dict[tuple[str, str], str] = {
    ("spec_raw", "dup:enum-field"): DUPLICATE_KEYS,
}
"""(section, vector id) → the docs/divergences.md anchor of a deliberate difference the vector's
input alone does not show; the others are found by :func:`divergence_of`."""


def free_form_values(spec: Any) -> Iterator[tuple[Any, bool]]:
    """(value, may be null) of every free-form field that must hold an object."""
    if not isinstance(spec, dict):
        return
    intent = spec.get("intent")
    if isinstance(intent, dict):
        if isinstance(intent.get("aplicacao"), dict) and "valuesOverlay" in intent["aplicacao"]:
            yield intent["aplicacao"]["valuesOverlay"], True
        if isinstance(intent.get("guest"), dict) and "spec" in intent["guest"]:
            yield intent["guest"]["spec"], False
    boundary = spec.get("boundary")
    if isinstance(boundary, dict):
        for key in ("preconditions", "postconditions"):
            for condition in boundary.get(key) or []:
                if isinstance(condition, dict) and "params" in condition:
                    yield condition["params"], True


def divergence_of(section: str, vector: dict[str, Any]) -> str | None:
    """The docs/divergences.md anchor that covers ``vector``, or None."""
    listed = DIVERGENT.get((section, vector["id"]))
    if listed is not None:
        return listed
    if "spec_json" in vector:
        try:
            document = json.loads(vector["spec_json"])
        except ValueError:
            return None  # not JSON at all: both reject it
        values = free_form_values(document)
        if any(not isinstance(v, dict) and not (v is None and nullable) for v, nullable in values):
            return FREE_FORM_NOT_OBJECT
    if section == "attestation_json" and re.search(r"\.[0-9]{7,}", vector["json"]):
        return NANOSECONDS
    return None


def cases(section: str) -> list[Any]:
    """One pytest case per vector of ``section``, named by the vector's id."""
    return [pytest.param(vector, id=vector["id"]) for vector in VECTORS[section]]


@cache
def spec_of(spec_json: str) -> ProcessSpec:
    """The spec as the controller decodes it (memoized: many sections share a spec)."""
    return decode(spec_json, ProcessSpec)


def decodes(spec_json: str) -> bool:
    try:
        spec_of(spec_json)
    except DecodeError:
        return False
    return True


# ── what the reference computes from one spec ──────────────────────────────────────────────


def attestation_chain(spec: ProcessSpec) -> dict[str, Any]:
    """Three attestations as the ``format`` key describes: initial, then two chained on it."""
    identity = derive_identity(spec)
    intent = intent_hash(spec.intent)
    artifact = artifact_hash([
        FluxResourceRef(api_version="kustomize.toolkit.fluxcd.io/v1", kind="Kustomization",
                        namespace="flux-system", name=identity.name),
        FluxResourceRef(api_version="helm.toolkit.fluxcd.io/v2", kind="HelmRelease", namespace="default", name="x"),
    ])
    a0 = attest(artifact="", control=None, intent=intent, previous=None, now=NOW)
    a1 = attest(artifact=artifact, control=identity.content_hash, intent=intent, previous=a0, now=NOW)
    a2 = attest(artifact=artifact, control=None, intent=intent, previous=a1, now=NOW)
    return {
        "artifact_hash": artifact, "control1": a1.control_hash, "previous1": a1.previous_root,
        "gen0": a0.generation, "gen1": a1.generation, "gen2": a2.generation,
        "root0": a0.composed_root, "root1": a1.composed_root, "root2": a2.composed_root,
        "verify0": verify_root(a0), "verify1": verify_root(a1), "verify2": verify_root(a2),
    }


def fqdn_or_error(app: str, eph: str | None, cluster: str) -> tuple[str | None, str | None]:
    try:
        return fqdn(app, eph, cluster, LOCATION, DOMAIN), None
    except HostnameError as err:
        return None, str(err)


def routing_fqdns(spec: ProcessSpec) -> list[dict[str, Any]]:
    """Per ``spec.routing.hostnames[i]``: the id, the cluster and both names (or their errors)."""
    assert spec.routing is not None
    eph = ephemeral_id(spec)
    rows = []
    for host in spec.routing.hostnames:
        cluster, label = hostname_cluster(host, CLUSTER), hostname_id(host, eph)
        instance, instance_error = fqdn_or_error(host.app, label, cluster)
        stable, stable_error = fqdn_or_error(host.app, None, cluster)
        rows.append({"eph_id": label, "cluster": cluster, "instance": instance, "instance_error": instance_error,
                     "stable": stable, "stable_error": stable_error})
    return rows


def spec_outputs(spec: ProcessSpec, vector_id: str) -> dict[str, Any]:
    """Every output the reference records for one accepted spec (``spec_raw`` / ``processes``)."""
    identity = derive_identity(spec)
    out: dict[str, Any] = {
        "id": vector_id,
        "ok": True,
        "address": format_process_address(identity, "1.7"),
        "attestation": attestation_chain(spec),
        "canonical": spec_canonical_bytes(spec).decode(),
        "canonical_sorted": spec_canonical_bytes(spec, sort_keys=True).decode(),
        "content_hash": content_hash(spec),
        "env_id_from_spec": env_id_of(to_wire(spec)),
        "ephemeral_id": ephemeral_id(spec),
        "identity": {"content_hash": identity.content_hash, "name": identity.name,
                     "name_override": identity.name_override},
        "intent_hash": intent_hash(spec.intent),
        "intent_json": canonical_json(to_wire(spec.intent)).decode(),
    }
    try:
        out["intent_kind"] = spec.intent.kind().value
        out["intent_canonical_bytes"] = intent_canonical_bytes(spec.intent).decode()
    except VariantError as err:
        out["intent_error"] = str(err)
    out.update(lifetime_outputs(spec, prefix="lifetime_"))
    if spec.routing is not None:
        out["fqdn"] = routing_fqdns(spec)
    return out


def lifetime_outputs(spec: ProcessSpec, *, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {f"{prefix}is_ephemeral": spec.lifetime.is_ephemeral,
                           f"{prefix}resolved_ephemeral": spec.lifetime.resolved_ephemeral() is not None}
    try:
        out[f"{prefix}kind"] = spec.lifetime.kind().value
    except VariantError as err:
        out[f"{prefix}kind"] = None
        out[f"{prefix}error"] = str(err)
    return out


def check_divergence(section: str, vector: dict[str, Any]) -> bool:
    """Check what tatara does for a vector it differs on; False when it does not."""
    anchor = divergence_of(section, vector)
    if anchor is None:
        return False
    if anchor == FREE_FORM_NOT_OBJECT:
        # The CRD declares these fields `type: object` (guest.spec required): the API server refuses
        # anything else, and so does our decoder.
        assert not decodes(vector["spec_json"])
    elif anchor == DUPLICATE_KEYS:
        # The API server never passes a duplicate key on (the last one wins); neither do we.
        assert decodes(vector["spec_json"])
    elif anchor == NANOSECONDS:
        # Microseconds, rounded by the decoder; 9999-12-31T23:59:59.9999995Z and later round past
        # the last representable instant and do not decode.
        try:
            attestation = decode(vector["json"], ProcessAttestation)
        except DecodeError:
            assert "9999-12-31T23:59:59.999999" in vector["json"]
        else:
            assert re.fullmatch(r"[^.]*(\.[0-9]{3}|\.[0-9]{6})?Z", format_timestamp(attestation.attested_at))
    return True


# ── spec sections ───────────────────────────────────────────────────────────────────────────

SPEC_SECTIONS: dict[str, Callable[[ProcessSpec], Any]] = {
    "content_hash": content_hash,
    "ephemeral_id": ephemeral_id,
    "derive_identity": lambda s: {"content_hash": (i := derive_identity(s)).content_hash, "name": i.name,
                                  "name_override": i.name_override},
    "canonical_json": lambda s: spec_canonical_bytes(s).decode(),
    "canonical_json_sorted": lambda s: spec_canonical_bytes(s, sort_keys=True).decode(),
    "intent_json": lambda s: canonical_json(to_wire(s.intent)).decode(),
    "intent_hash": lambda s: intent_hash(s.intent),
    "attestation_chain": attestation_chain,
    "routing_fqdn": routing_fqdns,
}


def intent_variant(spec: ProcessSpec) -> dict[str, Any]:
    try:
        return {"kind": spec.intent.kind().value, "canonical_bytes": intent_canonical_bytes(spec.intent).decode()}
    except VariantError as err:
        return {"error": str(err)}


def lifetime_variant(spec: ProcessSpec) -> dict[str, Any]:
    out = lifetime_outputs(spec)
    out.setdefault("error", None)
    return out


SPEC_SECTIONS["intent_variant"] = intent_variant
SPEC_SECTIONS["lifetime_variant"] = lifetime_variant


@pytest.mark.parametrize(
    ("section", "vector"),
    [pytest.param(section, v, id=f"{section}:{v['id']}") for section in SPEC_SECTIONS for v in VECTORS[section]],
)
def test_spec_section(section: str, vector: dict[str, Any]) -> None:
    if check_divergence(section, vector):
        return
    assert SPEC_SECTIONS[section](spec_of(vector["spec_json"])) == vector["expect"]


@pytest.mark.parametrize("vector", cases("rust_accepts_python_rejects"))
def test_rust_accepts_python_rejects(vector: dict[str, Any]) -> None:
    """Specs the reference accepts and the models reject: each is a listed divergence."""
    assert check_divergence("rust_accepts_python_rejects", vector)


@pytest.mark.parametrize("vector", cases("spec_raw"))
def test_spec_raw(vector: dict[str, Any]) -> None:
    if check_divergence("spec_raw", vector):
        return
    rust = vector["rust"]
    if not rust["ok"]:
        assert not decodes(vector["spec_json"]), rust["error"]
        return
    assert spec_outputs(spec_of(vector["spec_json"]), vector["id"]) == rust


@pytest.mark.parametrize("vector", cases("processes"))
def test_processes(vector: dict[str, Any]) -> None:
    assert spec_outputs(decode_process(vector["json"]).spec, vector["id"]) == vector["rust"]


@pytest.mark.parametrize("vector", cases("ephemeral_specs"))
def test_ephemeral_specs(vector: dict[str, Any]) -> None:
    spec = decode(vector["json"], EphemeralSpec).to_process_spec()
    assert spec_outputs(spec, vector["id"]) == vector["rust"]


# ── hashes and names ────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("vector", cases("compose_root"))
def test_compose_root(vector: dict[str, Any]) -> None:
    root = compose_root(vector["artifact"], vector["control"], vector["intent"], vector["previous"])
    attestation = ProcessAttestation(artifact_hash=vector["artifact"], control_hash=vector["control"],
                                     intent_hash=vector["intent"], composed_root=root,
                                     generation=vector["generation"], previous_root=vector["previous"], attested_at=NOW)
    uppercased = ProcessAttestation(**{**to_wire_attrs(attestation), "composed_root": root.upper()})
    assert {"root": root, "verify": verify_root(attestation), "verify_uppercased": verify_root(uppercased)} \
        == vector["expect"]


def to_wire_attrs(attestation: ProcessAttestation) -> dict[str, Any]:
    return {f: getattr(attestation, f) for f in attestation.__struct_fields__}


@pytest.mark.parametrize("vector", cases("artifact_hash"))
def test_artifact_hash(vector: dict[str, Any]) -> None:
    refs = [FluxResourceRef(api_version=r["apiVersion"], kind=r["kind"], namespace=r["namespace"], name=r["name"])
            for r in vector["refs"]]
    assert artifact_hash(refs) == vector["expect"]


@pytest.mark.parametrize("vector", cases("fmt_fqdn"))
def test_fmt_fqdn(vector: dict[str, Any]) -> None:
    try:
        got = {"ok": True, "value": fqdn(vector["app"], vector["eph"], vector["cluster"], vector["location"],
                                         vector["domain"]), "error": None}
    except HostnameError as err:
        got = {"ok": False, "value": None, "error": str(err)}
    assert got == vector["expect"]


@pytest.mark.parametrize("vector", cases("env_id_parse"))
def test_env_id_parse(vector: dict[str, Any]) -> None:
    try:
        got = {"ok": True, "value": parse_ephemeral_id(vector["text"]), "error": None}
    except InvalidEphemeralIdError as err:
        got = {"ok": False, "value": None, "error": str(err)}
    assert got == vector["expect"]


@pytest.mark.parametrize("vector", cases("pid"))
def test_pid(vector: dict[str, Any]) -> None:
    pid = vector["path"] if "path" in vector else allocate_pid(vector["identity_name"], vector["parent"], vector["seq"])
    assert {"pid": pid, "depth": depth(pid), "parent_of": parent_of(pid)} == vector["expect"]


@pytest.mark.parametrize("vector", cases("slot"))
def test_slot(vector: dict[str, Any]) -> None:
    expect = vector["expect"]
    assert slot_slug(vector["pool_uid"], vector["slot"]) == expect["slug"]
    if expect["member_panicked"]:
        return  # the reference panics (docs/divergences.md#member-name-cut); ours is tested in test_identity
    assert member_process_name(vector["pool_name"], vector["pool_uid"], vector["slot"]) == expect["member"]


# ── receipts and attestation records ──────────────────────────────────────────────────────


@pytest.mark.parametrize("vector", cases("receipt_build"))
def test_receipt_build(vector: dict[str, Any]) -> None:
    envelope = ReceiptEnvelope.build(kind=vector["kind"], intent=vector["intent"], artifact=vector["artifact"],
                                     control=vector["control"], previous=vector["previous"], generated_at=NOW)
    attestation = envelope.to_attestation(vector["previous"])
    known = envelope.known_kind()
    assert {
        "composed_root": envelope.composed_root,
        "known_kind": known.value if known is not None else None,
        "verify_root_none": envelope.verify_root(None),
        "verify_root_prev": envelope.verify_root(vector["previous"]),
        "attestation_control": attestation.control_hash,
        "attestation_root": attestation.composed_root,
        "attestation_verify": verify_root(attestation),
    } == vector["expect"]


def receipt_result(parse: Callable[[str], ReceiptEnvelope], payload: str, previous: str | None,
                   expect: dict[str, Any]) -> dict[str, Any]:
    try:
        envelope = parse(payload)
    except ReceiptError as err:
        text = str(err)
        for prefix in ("invalid JSON: ", "invalid YAML: "):  # the decoder's own words follow
            if expect.get("error", "").startswith(prefix) and text.startswith(prefix):
                text = expect["error"]
        return {"ok": False, "error": text}
    try:
        root: dict[str, str] = {"Ok": envelope.expect_root(previous)}
    except ReceiptError as err:
        root = {"Err": str(err)}
    # the mismatch branch, which no vector reaches: the error text of the reference's RootMismatch
    # (docs/wire-format.md, receipt errors), "composed_root mismatch (got <got>, want <want>)"
    other = "0" * 64 if envelope.composed_root != "0" * 64 else "1" * 64
    with pytest.raises(ReceiptError) as mismatch:
        envelope.expect_root(other)
    assert str(mismatch.value) == f"composed_root mismatch (got {envelope.composed_root}, want {other})"
    known = envelope.known_kind()
    return {"ok": True, "expect_root": root, "known_kind": known.value if known is not None else None,
            "reencoded": canonical_json(to_wire(envelope)).decode(), "verify_root": envelope.verify_root(previous)}


@pytest.mark.parametrize("vector", cases("receipt_parse"))
def test_receipt_parse(vector: dict[str, Any]) -> None:
    expect = vector["expect"]
    previous = vector["expected_previous"]
    assert receipt_result(parse_json, vector["payload"], previous, expect["json"]) == expect["json"]
    assert receipt_result(parse_either, vector["payload"], previous, expect["either"]) == expect["either"]


@pytest.mark.parametrize("vector", cases("attestation_json"))
def test_attestation_json(vector: dict[str, Any]) -> None:
    if check_divergence("attestation_json", vector):
        return
    check_attestation_json(vector)


def check_attestation_json(vector: dict[str, Any]) -> None:
    """The ProcessAttestation round trip of an ``attestation_json`` vector: refused when Rust refuses it, else
    re-encoded and verified as Rust did."""
    try:
        attestation = decode(vector["json"], ProcessAttestation)
    except DecodeError:
        assert not vector["expect"]["ok"]
        return
    assert {"ok": True, "reencoded": canonical_json(to_wire(attestation)).decode(),
            "verify": verify_root(attestation)} == vector["expect"]


# ── numbers ─────────────────────────────────────────────────────────────────────────────────


def bits(value: float) -> str:
    return struct.pack(">d", value).hex()


@pytest.mark.parametrize("vector", cases("float_literal"))
def test_float_literal(vector: dict[str, Any]) -> None:
    literal, expect = vector["literal"], vector["expect"]
    got: dict[str, Any] = {}
    try:
        value = parse_number(literal)
    except NumberError as err:
        got.update(value_ok=False, value_error=str(err))
    else:
        got.update(value_ok=True, value_is_f64=isinstance(value, float),
                   value_text=format_float(value) if isinstance(value, float) else str(value))
        if isinstance(value, float):
            got["value_bits"] = bits(value)
    try:
        number = parse_f64(literal)
    except NumberError as err:
        got.update(f64_ok=False, f64_error=str(err))
    else:
        got.update(f64_ok=True, f64_text=format_float(number), f64_bits=bits(number))
    for key in ("value_error", "f64_error"):  # serde_json adds the position: `… at line 1 column 22`
        if key in expect:
            assert expect[key].startswith(got.pop(key) + " at line ")
            expect = {k: v for k, v in expect.items() if k != key}
    assert got == expect


@pytest.mark.parametrize("vector", cases("float_format"))
def test_float_format(vector: dict[str, Any]) -> None:
    value = struct.unpack(">d", bytes.fromhex(vector["bits"]))[0]
    assert {"text": format_float(value), "value_text": format_float(value)} == vector["expect"]


def test_every_section_is_run() -> None:
    """A section added to the file must get its test here."""
    run = {*SPEC_SECTIONS, "rust_accepts_python_rejects", "spec_raw", "processes", "ephemeral_specs", "compose_root",
           "artifact_hash", "fmt_fqdn", "env_id_parse", "pid", "slot", "receipt_build", "receipt_parse",
           "attestation_json", "float_literal", "float_format"}
    assert set(VECTORS) - {"source", "format"} == run
