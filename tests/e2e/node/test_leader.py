"""Leader election between two replicas in pods: deleting the pod that holds a chart's Lease hands the Lease
to another live replica within the Lease's duration (the standby, or the pod the ReplicaSet starts in the
deleted one's place: both campaign every retry period with jitter, so either may win the released Lease),
and the fault tier's invariants hold for the work done around it (unique PIDs, one Flux child per Process,
exclusive bindings; tests/faults/harness.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from shared.kube.client import KubeClient
from tests.e2e.node.conftest import NodeEnv
from tests.e2e.node.support import PODS, chart_pods, flux_standin, holder_pod, lease, live_leader
from tests.faults.harness import burst_documents, check_invariants, create
from tests.support.kube import wait_for
from tools.node_stack import CHARTS, RELEASE_NAMESPACE

pytestmark = pytest.mark.anyio

PROCS = [f"p{i}" for i in range(6)]
ALLOCS = [f"a{i}" for i in range(2)]


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as the API server writes it (``Z`` or an offset, fractional seconds or not)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_deleting_the_leader_pods_hands_each_lease_over_within_its_duration(
        node_env: NodeEnv, kc: KubeClient, node_ns: str) -> None:
    docs = burst_documents(node_ns, PROCS, ALLOCS, pool_size=2)
    half = len(docs) // 2
    async with flux_standin(kc, node_ns):
        for resource, body in docs[:half]:
            await create(kc, resource, body, node_ns)
        leaders = {chart: await live_leader(kc, chart) for chart in CHARTS}
        before = {chart: await lease(kc, chart) for chart in CHARTS}
        standbys = {chart: {p["metadata"]["name"] for p in await chart_pods(kc, chart)} - {leaders[chart]}
                    for chart in CHARTS}
        assert all(len(names) == 1 for names in standbys.values()), standbys
        deleted_at = datetime.now(UTC)
        for chart in CHARTS:
            await kc.delete(PODS, leaders[chart], RELEASE_NAMESPACE)

        for chart in CHARTS:
            seen: list[tuple[object, ...]] = []  # the Lease records polled, for the failure message

            async def handed_over(chart: str = chart, seen: list[tuple[object, ...]] = seen
                                  ) -> dict[str, Any] | None:
                obj = await lease(kc, chart)
                record = tuple(obj["spec"].get(k) for k in ("holderIdentity", "leaseDurationSeconds", "renewTime"))
                if not seen or seen[-1] != record:
                    seen.append(record)
                holder = holder_pod(obj)
                if not holder or holder == leaders[chart]:
                    return None
                live = {p["metadata"]["name"] for p in await chart_pods(kc, chart)}
                return obj if holder in live else None

            after = await wait_for(handed_over, timeout=120, interval=0.2, what=f"{chart}'s Lease to change hands")
            spec = after["spec"]
            duration = int(before[chart]["spec"]["leaseDurationSeconds"])
            acquired = parse_time(str(spec["acquireTime"]))
            # acquireTime is written by the new leader, in a pod on this machine: the same clock as deleted_at
            assert (acquired - deleted_at).total_seconds() <= duration, (chart, acquired, deleted_at, duration, seen)
            assert int(spec.get("leaseTransitions") or 0) > int(before[chart]["spec"].get("leaseTransitions") or 0)

        for resource, body in docs[half:]:
            await create(kc, resource, body, node_ns)
        await check_invariants(kc, node_ns, PROCS, ALLOCS, note=f"leaders {sorted(leaders.values())} deleted")
