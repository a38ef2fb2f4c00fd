"""reconciler.app: the child kinds are resolved by discovery at start; a kind not served is watched as pinned."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import cast

import pytest
from prometheus_client import CollectorRegistry

from reconciler.app import after_own_applies, build, resolve_kind
from reconciler.config import parse_config
from reconciler.decision import Decision, Observed
from shared.domain.api.codec import convert
from shared.domain.api.process import Process
from shared.domain.resources import DNS_ENDPOINTS, INGRESSES, PROCESSES
from shared.kube.client import Resource
from shared.kube.discovery import RESTMapper, UnknownKind
from shared.kube.expectations import LAG_REQUEUE_SECONDS, ChildWriteExpectations
from shared.kube.manager import Manager
from tests.support.fake_api import FakeApi


class FakeMapper:
    """Discovery that serves ``served`` and nothing else."""

    def __init__(self, *served: Resource) -> None:
        self.served = {(r.api_version, r.kind): r for r in served}
        self.asked: list[tuple[str, str]] = []

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        self.asked.append((api_version, kind))
        found = self.served.get((api_version, kind))
        if found is None:
            raise UnknownKind(kind)
        return found


@pytest.mark.anyio
async def test_a_served_kind_is_the_resource_discovery_names() -> None:
    discovered = Resource("networking.k8s.io", "v1", "ingresses", "Ingress", namespaced=True)
    mapper = FakeMapper(discovered)
    assert await resolve_kind(cast(RESTMapper, mapper), INGRESSES) is discovered
    assert mapper.asked == [("networking.k8s.io/v1", "Ingress")]


@pytest.mark.anyio
async def test_a_kind_whose_crd_is_missing_keeps_the_pinned_resource(caplog: pytest.LogCaptureFixture) -> None:
    assert await resolve_kind(cast(RESTMapper, FakeMapper()), DNS_ENDPOINTS) is DNS_ENDPOINTS
    assert "externaldns.k8s.io/v1alpha1 DNSEndpoint is not served" in caplog.text


def test_a_decision_waits_while_a_child_cache_lags_the_last_apply_of_one_of_its_children() -> None:
    spec = {"classification": {"pointType": "Gate", "substrate": "Compute"},
            "intent": {"flux": {"gitRepository": "repo", "path": "./app"}}}
    process = convert({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}, Process)
    observed = Observed(process=process, now=datetime(2025, 6, 1, tzinfo=UTC))
    decided = Decision(requeue_after=30.0)
    writes: ChildWriteExpectations[Resource] = ChildWriteExpectations()
    caches = {INGRESSES: "41"}
    decide = after_own_applies(lambda _: decided, writes, caches.get)
    assert decide(observed) is decided  # nothing written: decided as ever
    writes.wrote("ns/p", INGRESSES, "42")
    assert decide(observed) == Decision(requeue_after=LAG_REQUEUE_SECONDS)  # no writes, look again soon
    caches[INGRESSES] = "42"
    assert decide(observed) is decided


# ── sharding (docs/architecture.md#sharding) ────────────────────────────────────────────────────


def _built(*argv: str) -> Manager:
    config = parse_config(["--health-addr=127.0.0.1:0", *argv], {})
    return build(FakeApi(), config, identity="me", registry=CollectorRegistry(), handle_signals=False)


def _process_selectors(manager: Manager) -> set[str | None]:
    return {selector for (resource, _, selector) in manager._informers if resource == PROCESSES}


def test_unsharded_one_process_cache_and_the_table_writer_under_the_instance_lease() -> None:
    manager = _built()
    assert _process_selectors(manager) == {None}
    assert sorted(c.name for c in manager._controllers) == ["process", "processtable"]


def test_a_shard_selects_its_processes_and_elects_the_table_writer_by_its_own_lease() -> None:
    manager = _built("--watch-label-selector=sharding.fluxcd.io/key=shard1")
    # its shard's Processes for the Process controller, every Process for the table's counts
    assert _process_selectors(manager) == {"sharding.fluxcd.io/key=shard1", None}
    # the table writer is not among the instance's controllers: it runs under the table's Lease
    assert [c.name for c in manager._controllers] == ["process"]
