"""Decoding API JSON and encoding as the reference does — docs/wire-format.md#emission-rules."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from shared.domain.api.boundary import Condition, ConditionKind
from shared.domain.api.classification import Classification, ConvergencePointType, SubstrateType
from shared.domain.api.codec import (
    DecodeError,
    InvalidSpecError,
    decode,
    decode_allocation,
    decode_pool,
    decode_process,
    decode_table,
    format_timestamp,
    to_wire,
)
from shared.domain.api.intent import AplicacaoIntent, Intent
from shared.domain.api.lifetime import EphemeralLifetime, Lifetime
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Identity, ProcessSpec, ProcessStatus
from shared.domain.api.routing import RoutingBackend

MINIMAL_SPEC: dict[str, Any] = {
    "classification": {"pointType": "Gate", "substrate": "Observability"},
    "intent": {"nix": {"flakeRef": "github:pleme-io/k8s", "attribute": "obs"}},
}


def process_json(spec: dict[str, Any] | None = None, **extra: Any) -> bytes:
    doc = {
        "apiVersion": "tatara.pleme.io/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": spec if spec is not None else MINIMAL_SPEC,
        **extra,
    }
    return json.dumps(doc).encode()


def with_path(doc: dict[str, Any], path: list[str], value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        (with_path(MINIMAL_SPEC, ["classification", "pointType"], "gate"), "$.spec.classification.pointType"),
        (with_path(MINIMAL_SPEC, ["classification", "substrate"], "Compute "), "$.spec.classification.substrate"),
        ({"intent": MINIMAL_SPEC["intent"]}, "missing required field `classification`"),
        (with_path(MINIMAL_SPEC, ["intent", "nix"], {"attribute": "a"}), "`flakeRef` - at `$.spec.intent.nix`"),
        (with_path(MINIMAL_SPEC, ["signals"], {"sigtermGraceSeconds": -1}), "$.spec.signals.sigtermGraceSeconds"),
        (with_path(MINIMAL_SPEC, ["signals"], {"sigtermGraceSeconds": 2**32}), "$.spec.signals.sigtermGraceSeconds"),
        (with_path(MINIMAL_SPEC, ["signals"], {"sigtermGraceSeconds": 1.0}), "$.spec.signals.sigtermGraceSeconds"),
        (with_path(MINIMAL_SPEC, ["dependsOn"], [{"name": "x", "mustReach": "Pending"}]), "$.spec.dependsOn[0]"),
        (with_path(MINIMAL_SPEC, ["boundary"], {"preconditions": None}), "$.spec.boundary.preconditions"),
    ],
    ids=[
        "a wrong-case enum names its field",
        "an enum with a trailing space names its field",
        "a missing required spec field is named",
        "a missing required intent field is named with its path",
        "a negative u32 is refused at its path",
        "a u32 overflow is refused at its path",
        "a float in an integer field is refused",
        "a phase outside must-reach is refused",
        "an explicit null on a defaulted list is refused",
    ],
)
def test_bad_documents_fail_with_a_message_naming_the_field(spec: dict[str, Any], names: str) -> None:
    with pytest.raises(DecodeError) as err:
        decode_process(process_json(spec))
    assert names in str(err.value)


def test_an_unknown_status_phase_names_the_field() -> None:
    with pytest.raises(DecodeError, match=r"\$\.status\.phase"):
        decode_process(process_json(status={"phase": "Running2"}))


def test_two_intent_variants_are_refused_when_validating() -> None:
    spec = with_path(MINIMAL_SPEC, ["intent", "flux"], {"gitRepository": "g", "path": "p"})
    assert decode_process(process_json(spec)).spec.problems() == [
        "spec.intent: intent has multiple variants set; exactly one required"
    ]
    with pytest.raises(InvalidSpecError, match=r"^spec\.intent: intent has multiple variants set"):
        decode_process(process_json(spec), validate=True)


def test_unknown_fields_from_a_newer_api_are_ignored() -> None:
    spec = with_path(MINIMAL_SPEC, ["futureField"], {"x": 1})
    spec["classification"]["futureAxis"] = "x"
    doc = process_json(spec, status={"phase": "Running", "newThing": [1]})
    process = decode_process(doc)
    assert process.status is not None
    assert process.status.phase is ProcessPhase.RUNNING
    assert "futureField" not in json.dumps(to_wire(process))


def test_nulls_on_optional_fields_mean_absent() -> None:
    spec = with_path(MINIMAL_SPEC, ["identity"], {"parent": None, "nameOverride": None})
    spec["routing"] = None
    process = decode_process(process_json(spec))
    assert to_wire(process.spec)["identity"] == {}
    assert "routing" not in to_wire(process.spec)


def test_status_identity_uses_snake_case_keys() -> None:
    status = ProcessStatus(identity=Identity(name="n", content_hash="h", name_override=False))
    assert to_wire(status)["identity"] == {"name": "n", "content_hash": "h", "name_override": False}


def test_a_missing_status_counts_as_pending() -> None:
    assert decode_process(process_json()).phase is ProcessPhase.PENDING


# ── emission rules ──────────────────────────────────────────────────────────────

SPEC = ProcessSpec(
    classification=Classification(point_type=ConvergencePointType.GATE, substrate=SubstrateType.COMPUTE),
    intent=Intent(aplicacao=AplicacaoIntent(chart_ref="c", version="1")),
)


def test_profile_is_left_out_when_empty_and_values_overlay_is_written_as_null() -> None:
    assert to_wire(SPEC)["intent"] == {"aplicacao": {"chartRef": "c", "version": "1", "valuesOverlay": None}}


def test_condition_params_are_written_as_null_when_unset() -> None:
    assert to_wire(Condition(kind=ConditionKind.CEL)) == {"kind": "Cel", "params": None}


def test_an_empty_lifetime_is_left_out_and_a_set_one_is_written() -> None:
    assert "lifetime" not in to_wire(SPEC)
    ephemeral = ProcessSpec(
        classification=SPEC.classification, intent=SPEC.intent, lifetime=Lifetime(ephemeral=EphemeralLifetime())
    )
    assert to_wire(ephemeral)["lifetime"] == {
        "ephemeral": {"ttl": "1h", "teardownPolicy": "Always", "maxConcurrent": 1}
    }


def test_empty_ingress_annotations_are_left_out() -> None:
    assert to_wire(RoutingBackend(service="s", port=80)) == {"service": "s", "port": 80}


def test_map_and_free_json_keys_are_written_sorted() -> None:
    overlay = {"b": {"z": 1, "a": 2}, "a": [{"y": 1, "x": 2}]}
    wire = to_wire(AplicacaoIntent(chart_ref="c", version="1", values_overlay=overlay))
    assert json.dumps(wire["valuesOverlay"]) == '{"a": [{"x": 2, "y": 1}], "b": {"a": 2, "z": 1}}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (datetime(2026, 5, 19, 12, 0, 0, tzinfo=UTC), "2026-05-19T12:00:00Z"),
        (datetime(2026, 5, 19, 12, 0, 0, 250000, tzinfo=UTC), "2026-05-19T12:00:00.250Z"),
        (datetime(2026, 5, 19, 12, 0, 0, 123456, tzinfo=UTC), "2026-05-19T12:00:00.123456Z"),
        (datetime(2026, 5, 19, 14, 0, 0, tzinfo=timezone(timedelta(hours=2))), "2026-05-19T12:00:00Z"),
    ],
    ids=[
        "whole seconds have no fraction",
        "milliseconds use three digits",
        "microseconds use six digits",
        "an offset is converted to utc",
    ],
)
def test_timestamps_are_written_in_utc_with_z(value: datetime, text: str) -> None:
    assert format_timestamp(value) == text


@pytest.mark.parametrize(
    ("decoder", "doc"),
    [
        (decode_table, {"spec": {}}),
        (decode_pool, {"spec": {"desiredSize": 2, "template": {"aplicacao": {"chartRef": "c", "version": "1"}}}}),
        (decode_allocation, {"spec": {"requestor": {"kind": "manual"}}}),
    ],
    ids=["a table with an empty spec decodes", "a minimal pool decodes", "a minimal allocation decodes"],
)
def test_other_kinds_decode_with_their_defaults(decoder: Any, doc: dict[str, Any]) -> None:
    obj = decoder(json.dumps(doc).encode())
    assert decode(json.dumps(to_wire(obj)).encode(), type(obj)) == obj
