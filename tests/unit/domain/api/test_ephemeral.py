"""EphemeralSpec → ProcessSpec lowering — docs/wire-format.md#ephemeralspec."""

from __future__ import annotations

from shared.domain.api.boundary import Condition, ConditionKind
from shared.domain.api.codec import to_wire
from shared.domain.api.ephemeral import EphemeralSpec
from shared.domain.api.export import ArtifactSource, ExportSpec, ReceiptsSource, StdoutChannel, VectorChannel
from shared.domain.api.intent import AplicacaoIntent
from shared.domain.api.lifetime import TeardownPolicy
from shared.domain.api.routing import RoutingBackend, RoutingSpec

APLICACAO = AplicacaoIntent(chart_ref="oci://ghcr.io/pleme-io/charts/demo", version="0.5.5", profile="all-in-one")


def test_a_bare_template_lowers_to_the_spec_table() -> None:
    spec = EphemeralSpec(aplicacao=APLICACAO).to_process_spec()
    assert to_wire(spec) == {
        "identity": {},
        "classification": {
            "pointType": "Gate",
            "substrate": "Compute",
            "horizon": {"kind": "Bounded"},
            "calm": "Monotone",
            "dataClassification": "Internal",
        },
        "intent": {
            "aplicacao": {
                "chartRef": "oci://ghcr.io/pleme-io/charts/demo",
                "version": "0.5.5",
                "profile": "all-in-one",
                "valuesOverlay": None,
            }
        },
        "boundary": {"preconditions": [], "postconditions": []},
        "compliance": {"bindings": [], "autoRemediate": False},
        "dependsOn": [],
        "signals": {
            "sigtermGraceSeconds": 480,
            "sigkillForce": True,
            "sighupStrategy": "Reconverge",
            "startSuspended": False,
        },
        "lifetime": {"ephemeral": {"ttl": "1h", "teardownPolicy": "Always", "maxConcurrent": 1}},
        "suspended": False,
    }


def test_every_template_field_lands_where_the_spec_says() -> None:
    export = ExportSpec(source=ArtifactSource(receipts=ReceiptsSource()), channel=VectorChannel(stdout=StdoutChannel()))
    routing = RoutingSpec(backend=RoutingBackend(service="web", port=8080))
    post = Condition(kind=ConditionKind.HELM_RELEASE_RELEASED, params={"name": "demo"})
    pre = Condition(kind=ConditionKind.CEL)
    template = EphemeralSpec(
        aplicacao=APLICACAO,
        ttl="30m",
        teardown=TeardownPolicy.ON_ATTESTED,
        max_concurrent=3,
        postconditions=[post],
        preconditions=[pre],
        verify_timeout="10m",
        parent="seph.1",
        exports=[export],
        routing=routing,
    )
    spec = template.to_process_spec()
    assert spec.identity.parent == "seph.1"
    assert spec.identity.name_override is None
    assert spec.intent.aplicacao == APLICACAO
    assert spec.intent.populated() == [("aplicacao", APLICACAO)]
    assert (spec.boundary.preconditions, spec.boundary.postconditions, spec.boundary.timeout) == ([pre], [post], "10m")
    ephemeral = spec.lifetime.resolved_ephemeral()
    assert ephemeral is not None
    assert (ephemeral.ttl, ephemeral.teardown_policy, ephemeral.max_concurrent, ephemeral.exports) == (
        "30m",
        TeardownPolicy.ON_ATTESTED,
        3,
        [export],
    )
    assert spec.routing == routing
    assert spec.encapsulates is None
    assert spec.suspended is False


def test_the_template_keys_use_teardown_not_teardown_policy() -> None:
    wire = to_wire(EphemeralSpec(aplicacao=APLICACAO))
    assert list(wire) == ["aplicacao", "ttl", "teardown", "maxConcurrent", "postconditions", "preconditions"]
