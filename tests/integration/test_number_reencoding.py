"""What kube-apiserver v1.36.3 does to JSON numbers (and duplicate keys, deep nesting, non-object
free JSON) before a controller sees them, and that tatara reads what arrives as the reference does.

The reference hashes serde_json's parse of the API server's output, not of what the user wrote;
tatara's decoder applies the same parse (docs/wire-format.md#numbers), so both hash the same bytes
the same way. The table pins the server's rewriting, so a new server version that changes it fails
here first.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.domain.api.codec import DecodeError, decode_process, to_wire
from shared.domain.canonical_json import canonical_json
from shared.domain.json_number import parse_number
from shared.domain.resources import PROCESSES
from shared.kube.client import NAMESPACES, KubeClient
from shared.kube.errors import Invalid
from tests.support.kube import api_client, install_crds_async, load_yaml_docs
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]

REWRITTEN: dict[str, str] = {
    "0": "0",
    "-0": "0",
    "-0.0": "0",
    "1.0": "1",
    "100.0": "100",
    "1e2": "100",
    "10E-1": "1",
    "1e16": "10000000000000000",
    "1e20": "100000000000000000000",
    "1E+21": "1e+21",
    "1e-7": "1e-7",
    "0.000001": "0.000001",
    "0.1": "0.1",
    "2e-24": "2e-24",
    "909.4290778244613": "909.4290778244613",
    "9007199254740993": "9007199254740993",
    "9007199254740993.0": "9007199254740992",
    "18446744073709551615": "18446744073709552000",
    "18446744073709551616": "18446744073709552000",
    "-9223372036854775809": "-9223372036854776000",
    "123456789012345678901234567890": "1.2345678901234568e+29",
    "1.7976931348623158e308": "1.7976931348623157e+308",
    "1e-400": "0",
    "5e-324": "5e-324",
    "6.02214076e23": "6.02214076e+23",
}
"""Literal sent in free JSON → the text the API server returns: Go's float64 formatting, integral
values without a fraction, integers beyond int64 through float64."""


@pytest.fixture
async def kclient(control_plane: LocalControlPlane) -> AsyncIterator[KubeClient]:
    api = await api_client(control_plane.kubeconfig)
    try:
        docs = [doc for path in sorted(ROOT.glob("charts/*/crds/*.yaml")) for doc in load_yaml_docs(path)]
        await install_crds_async(api, docs)
    finally:
        await api.close()
    client = await KubeClient.from_kubeconfig(control_plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def ns(kclient: KubeClient) -> str:
    name = f"numbers-{uuid.uuid4().hex[:10]}"
    await kclient.create(NAMESPACES, {"metadata": {"name": name}})
    return name


def process_body(name: str, spec: str) -> bytes:
    """A Process document whose spec is the exact text ``spec`` (literals as written)."""
    head = '{"apiVersion":"tatara.pleme.io/v1alpha1","kind":"Process","metadata":{"name":"' + name + '"},"spec":'
    return (head + spec + "}").encode()


CLASSIFICATION = '"classification":{"pointType":"Gate","substrate":"Compute"'


def aplicacao_spec(overlay: str, extra: str = "") -> str:
    return "{" + CLASSIFICATION + extra + '},"intent":{"aplicacao":{"chartRef":"c","version":"1","valuesOverlay":' \
        + overlay + "}}}"


def nix_spec(classification: str = "", rest: str = "") -> str:
    return "{" + CLASSIFICATION + classification + '},"intent":{"nix":{"flakeRef":"a","attribute":"b"}}' + rest + "}"


async def round_trip(kclient: KubeClient, ns: str, name: str, spec: str) -> bytes:
    await kclient.create(PROCESSES, process_body(name, spec), ns)
    return await kclient.get(PROCESSES, name, ns)


async def test_the_api_server_rewrites_number_literals(kclient: KubeClient, ns: str) -> None:
    literals = list(REWRITTEN)
    overlay = "{" + ",".join(f'"k{i:02d}":{lit}' for i, lit in enumerate(literals)) + "}"
    raw = await round_trip(kclient, ns, "literals", aplicacao_spec(overlay))
    text = raw.decode()
    arrived = {lit: re.search(rf'"k{i:02d}":([^,}}]*)', text).group(1)  # type: ignore[union-attr]
               for i, lit in enumerate(literals)}
    assert arrived == REWRITTEN

    # What we decode from those bytes is serde_json's reading of the server's text, number by number.
    overlay_values = decode_process(raw).spec.intent.aplicacao.values_overlay  # type: ignore[union-attr]
    assert overlay_values is not None
    for i, lit in enumerate(literals):
        expected = parse_number(REWRITTEN[lit])
        value = overlay_values[f"k{i:02d}"]
        assert (type(value), canonical_json(value)) == (type(expected), canonical_json(expected)), lit


async def test_typed_fields_arrive_as_plain_numbers(kclient: KubeClient, ns: str) -> None:
    # -0 in an integer field, 3e1 in a u32: stored as 0 and 30, so no controller ever sees the literal.
    rest = ',"routing":{"backend":{"service":"s","port":1},"priority":-0},"signals":{"sigtermGraceSeconds":3e1}'
    spec = decode_process(await round_trip(kclient, ns, "ints", nix_spec(rest=rest))).spec
    assert spec.routing is not None
    assert spec.routing.priority == 0
    assert spec.signals.sigterm_grace_seconds == 30
    # A fraction in an integer field never gets in.
    with pytest.raises(Invalid):
        await kclient.create(PROCESSES, process_body("frac", nix_spec(rest=',"signals":{"sigtermGraceSeconds":30.5}')),
                             ns)
    # The one typed f64: -0.0 arrives as 0.
    horizon = ',"horizon":{"kind":"Asymptotic","healthyRateThreshold":-0.0}'
    raw = await round_trip(kclient, ns, "f64", nix_spec(classification=horizon))
    assert b'"healthyRateThreshold":0' in raw
    threshold = decode_process(raw).spec.classification.horizon.healthy_rate_threshold
    assert threshold == 0.0
    assert str(threshold) == "0.0"


async def test_duplicate_keys_arrive_once_the_last_one(kclient: KubeClient, ns: str) -> None:
    spec = ('{"classification":{"pointType":"Gate","pointType":"Fork","substrate":"Compute"},'
            '"intent":{"aplicacao":{"chartRef":"c","version":"1","valuesOverlay":{"a":1,"a":2}}}}')
    process = decode_process(await round_trip(kclient, ns, "dup", spec))
    assert process.spec.classification.point_type.value == "Fork"
    assert to_wire(process.spec.intent)["aplicacao"]["valuesOverlay"] == {"a": 2}


@pytest.mark.parametrize(("overlay", "intent"), [
    ("5", None), ('"s"', None), ("[1]", None), ("true", None),
    (None, '{"guest":{"spec":null}}'), (None, '{"guest":{"spec":[]}}'),
])
async def test_free_json_that_is_not_an_object_is_refused(
    kclient: KubeClient, ns: str, overlay: str | None, intent: str | None
) -> None:
    spec = aplicacao_spec(overlay) if overlay is not None else "{" + CLASSIFICATION + '},"intent":' + str(intent) + "}"
    with pytest.raises(Invalid):
        await kclient.create(PROCESSES, process_body("shape", spec), ns)


async def test_deep_nesting_arrives_and_is_refused_by_the_decoder(kclient: KubeClient, ns: str) -> None:
    nested = "[" * 200 + "]" * 200
    raw = await round_trip(kclient, ns, "deep", aplicacao_spec('{"d":' + nested + "}"))
    assert json.dumps(json.loads(raw)["spec"]["intent"]["aplicacao"]["valuesOverlay"]["d"]).count("[") == 200
    with pytest.raises(DecodeError, match="nesting deeper than 127"):
        decode_process(raw)
