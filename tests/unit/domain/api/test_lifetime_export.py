"""Teardown policy and export trigger tables — docs/behaviour.md#teardown-policy, docs/wire-format.md#exports."""

from __future__ import annotations

import pytest

from shared.domain.api.export import ExportTrigger, HttpEventChannel, NatsSubjectChannel, ReportFormat
from shared.domain.api.lifetime import TeardownPolicy
from shared.domain.api.phase import ProcessPhase

P = ProcessPhase


@pytest.mark.parametrize(
    ("policy", "at_attested", "at_failed"),
    [
        (TeardownPolicy.ALWAYS, True, True),
        (TeardownPolicy.ON_ATTESTED, True, False),
        (TeardownPolicy.ON_FAILED, False, True),
        (TeardownPolicy.NEVER, False, False),
    ],
    ids=["always tears down at both gates", "on-attested only at attested", "on-failed only at failed", "never"],
)
def test_teardown_policy_fires_only_at_the_listed_gates(
    policy: TeardownPolicy, at_attested: bool, at_failed: bool
) -> None:
    assert policy.should_teardown_on(P.ATTESTED) is at_attested
    assert policy.should_teardown_on(P.FAILED) is at_failed
    assert not any(policy.should_teardown_on(p) for p in P if p not in (P.ATTESTED, P.FAILED))


@pytest.mark.parametrize(
    ("trigger", "at_attested", "at_failed"),
    [
        (ExportTrigger.ON_ATTESTED, True, False),
        (ExportTrigger.ON_FAILED, False, True),
        (ExportTrigger.ALWAYS, True, True),
    ],
    ids=["on-attested fires at attested", "on-failed fires at failed", "always fires at both gates"],
)
def test_export_trigger_fires_only_at_the_listed_gates(
    trigger: ExportTrigger, at_attested: bool, at_failed: bool
) -> None:
    assert trigger.fires_on(P.ATTESTED) is at_attested
    assert trigger.fires_on(P.FAILED) is at_failed
    assert not any(trigger.fires_on(p) for p in P if p not in (P.ATTESTED, P.FAILED))


def test_only_ndjson_reports_are_embedded_as_lines() -> None:
    assert [(f.value, f.payload_shape().payload_field) for f in ReportFormat] == [
        ("Junit", "raw_b64"),
        ("TapV13", "raw_b64"),
        ("NdJson", "ndjson"),
        ("Raw", "raw_b64"),
    ]


def test_channels_fall_back_to_the_default_endpoints() -> None:
    assert HttpEventChannel(signal_type="ci").resolved_endpoint == "http://vector.observability.svc.cluster.local:8080"
    assert (
        NatsSubjectChannel(subject="s", stream="t").resolved_url == "nats://nats.observability.svc.cluster.local:4222"
    )
