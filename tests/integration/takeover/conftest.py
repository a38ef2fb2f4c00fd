"""The takeover tier's one control plane and one takeover (docs/migration.md).

A plane of this package's own (the ProcessTable is cluster-scoped, and the reference's is installed as it was):
every scenario of tests/fixtures/rust-state is loaded into it as the reference left it
(:mod:`tests.support.rust_state`), the reference's ProcessTable installed, and then our reconciler started once,
watching every namespace, as a ``helm upgrade`` from the reference's chart to ours does. It authenticates as
the chart's ServiceAccount user, so the audit log (tools/controlplane/audit.py) holds every request it makes
and the tests count its writes server-side. The tests of the tier then read what it did, in definition order:
first what a quiet takeover must leave alone, then what happens on the user's next signal, create or delete.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import pytest
from prometheus_client import CollectorRegistry

from reconciler.app import build
from reconciler.config import ReconcilerConfig
from shared.kube.client import KubeClient
from shared.kube.manager import Manager
from shared.kube.metrics import registry as metrics_registry
from tests.support.rust_state import (
    Json,
    Loaded,
    Scenario,
    differences,
    load_scenario,
    load_table,
    scenarios,
    with_v1beta2,
)
from tools.controlplane import LocalControlPlane
from tools.controlplane.audit import AuditEvent, parse_events, service_account_user
from tools.crds import install_crds, tatara_crds, third_party_crds
from tools.standins.flux import FluxStandIn

RECONCILER_USER: Final = service_account_user("tatara-system", "tatara-reconciler")
"""Who our reconciler is to the API server (the chart's ServiceAccount user name)."""

HEARTBEAT: Final = 1
"""A short HEARTBEAT, so a quiet Process is decided again and again while the tier runs."""

SCENARIOS: Final = scenarios()


@dataclass
class Takeover:
    """The plane, the scenarios as loaded, the table as installed, and our reconciler running on them."""

    plane: LocalControlPlane
    admin: KubeClient
    manager: Manager
    loaded: dict[str, Loaded]
    table: Json
    problems: dict[str, list[str]] = field(default_factory=dict)
    """Per scenario: where loading did not reproduce the fixture (:func:`tests.support.rust_state.differences`)."""
    settled: bool = False
    """The quiet takeover is over (tests/integration/takeover/test_takeover.py ``adopted``): the tests after
    it change the state."""

    def reconciles(self) -> float:
        """Passes of our Process controller so far (any result), from the process-wide runtime metrics."""
        return sum(sample.value for metric in metrics_registry.collect() for sample in metric.samples
                   if sample.name == "controller_runtime_reconcile_total"
                   and sample.labels.get("controller") == "process")

    def ours(self) -> list[AuditEvent]:
        """Every request our reconciler made so far, from the audit log."""
        text = self.plane.audit_log.read_text()
        lines = text.split("\n")
        # the API server may be halfway through its last line: only whole lines are read
        events = parse_events(lines if text.endswith("\n") else lines[:-1])
        return [e for e in events if e.user == RECONCILER_USER]

    def writes(self, namespace: str, resource: str | None = None) -> list[AuditEvent]:
        """Our reconciler's writes in ``namespace`` (of ``resource``, with its subresource: ``processes/status``)."""
        return [e for e in self.ours() if e.verb in ("create", "update", "patch", "delete")
                and e.namespace == namespace and (resource is None or e.resource == resource)]


def _crds() -> list[dict[str, Any]]:
    third = [with_v1beta2(d) if d["metadata"]["name"] == "ocirepositories.source.toolkit.fluxcd.io" else d
             for d in third_party_crds()]
    return [*tatara_crds(), *third]


def reference_table(all_scenarios: list[Scenario]) -> Json:
    """The reference's ProcessTable after its last scenario: the table is shared, so PIDs count up and the
    last one (the highest ``nextSequence``) is the one a takeover meets."""
    return max((s.table for s in all_scenarios), key=lambda t: int(t["spec"].get("nextSequence", 0)))


@pytest.fixture(scope="package")
def takeover_plane() -> Iterator[LocalControlPlane]:
    """A control plane of the tier's own, with an audit log of ServiceAccount users' requests."""
    with LocalControlPlane(audit=True) as plane:
        yield plane


@pytest.fixture(scope="package")
async def takeover(takeover_plane: LocalControlPlane) -> AsyncIterator[Takeover]:
    """Every scenario loaded, the reference's table installed, then our reconciler (and a Flux stand-in for
    what it renders after a SIGHUP) running until the tier ends."""
    plane = takeover_plane
    async with await KubeClient.from_kubeconfig(plane.kubeconfig) as admin:
        await install_crds(admin, _crds())
        table = await load_table(plane.kubeconfig, reference_table(SCENARIOS))
        loaded = {s.name: await load_scenario(plane.kubeconfig, s) for s in SCENARIOS}
        problems = {name: [p for item in scenario.objects for p in differences(item, scenario.uids)]
                    for name, scenario in loaded.items()}
        kubeconfig = plane.kubeconfig_for(RECONCILER_USER, ("system:serviceaccounts", "system:masters"))
        async with await KubeClient.from_kubeconfig(kubeconfig, user_agent="tatara-reconciler") as ours:
            config = ReconcilerConfig(watch_namespace="", leader_elect=False, health_host="127.0.0.1",
                                      health_port=0, table_status_interval=0.2, heartbeat_seconds=HEARTBEAT)
            manager = build(ours, config, registry=CollectorRegistry(), handle_signals=False)
            async with anyio.create_task_group() as tg:
                tg.start_soon(manager.run)
                tg.start_soon(FluxStandIn(admin).run)
                try:
                    yield Takeover(plane, admin, manager, loaded, table, problems)
                finally:
                    manager.stop()
                    tg.cancel_scope.cancel()


def scenario_ids() -> list[str]:
    return [s.name for s in SCENARIOS]


def dumps(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True)[:4000]
