"""Routing children (Ingress, DNSEndpoint) with the reconciler running: watched like the Flux children,
applied again in place when one goes missing, and deleted at Reaped (docs/behaviour.md#ingress-and-dnsendpoint)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.domain.resources import DNS_ENDPOINTS, INGRESSES, PROCESSES
from shared.kube.client import EVENTS, KubeClient
from shared.kube.manager import Manager
from tests.integration.reconciler.conftest import NO_HEARTBEAT, reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, read
from tests.integration.reconciler.test_scenarios import gone, reached, signal
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio

INGRESS = "routed-api-one"
DNS = "routed-api-one-dns"


def routed_process() -> dict[str, Any]:
    process = flux_process("routed")
    process["spec"]["routing"] = {"hostnames": [{"app": "api", "instance": "one"}],
                                  "backend": {"service": "svc", "port": 80}}
    return process


async def events(kc: KubeClient, namespace: str) -> dict[tuple[str, str], int]:
    """The Process's Events: (reason, message) → count (a repeat within 10 minutes is aggregated)."""
    items = msgspec.json.decode(await kc.list(EVENTS, namespace))["items"]
    return {(e["reason"], e["message"]): e["count"] for e in items if e["involvedObject"]["name"] == "routed"}


async def test_a_routing_child_is_watched_applied_again_when_gone_and_deleted_at_reaped(
    kc: KubeClient, namespace: str
) -> None:
    # No heartbeat within the test's reach: whatever wakes the Process here is a watch (or a TICK).
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT,
                                  dns_lb_target="lb.example.test") as manager:
        await kc.create(PROCESSES, routed_process(), namespace)
        await wait_for(reached(kc, namespace, "routed", "Attested"), timeout=60, what="Attested")
        await wait_for(lambda: settled(manager), timeout=30, what="the reconciler to settle")
        process = await read(kc, PROCESSES, "routed", namespace)
        first = await read(kc, INGRESSES, INGRESS, namespace)
        dns = await read(kc, DNS_ENDPOINTS, DNS, namespace)
        for child in (first, dns):
            (owner,) = child["metadata"]["ownerReferences"]
            assert (owner["kind"], owner["uid"], owner["controller"]) == ("Process", process["metadata"]["uid"], True)
        assert dns["spec"]["endpoints"][0]["targets"] == ["lb.example.test"]

        # Under load the Ingress informer can lag the Process's way to Attested: that pass finds the Ingress
        # missing and applies it again (an unchanged apply is a no-op), which is said in a RoutingDrift
        # Event too (the old Reconverging path made this race fail the test); so count from here.
        drift = ("RoutingDrift", f"routing drift corrected: Ingress {namespace}/{INGRESS} missing")
        before = (await events(kc, namespace)).get(drift, 0)

        # Deleting the Ingress wakes its Process through the Ingress watch: drift, and the Ingress is put
        # back in place (server-side apply), with no pass through Reconverging.
        await kc.delete(INGRESSES, INGRESS, namespace)

        async def applied_again() -> dict[str, Any] | None:
            try:
                again = await read(kc, INGRESSES, INGRESS, namespace)
            except Exception:
                return None
            return again if again["metadata"]["uid"] != first["metadata"]["uid"] else None

        await wait_for(applied_again, timeout=30, what="the Ingress applied again")
        await wait_for(lambda: settled(manager), timeout=30, what="the reconciler to settle")
        seen = await events(kc, namespace)
        # one drift corrected in place; the Process never left Attested, no second attestation
        assert seen[drift] - before == 1
        assert not [key for key in seen if key[0] == "PhaseReconverging"]
        assert seen[("PhaseRunning", "rendered 3 resource(s); waiting for them to become Ready")] == 1
        assert ("PhaseAttested", "attested generation 1") not in seen
        assert await reached(kc, namespace, "routed", "Attested")()

        # Reaped deletes the routing children itself: the Process stays as a Reaped record, so this is
        # not the garbage collector following ownerReferences.
        await signal(kc, namespace, "routed", "SIGTERM")
        await wait_for(reached(kc, namespace, "routed", "Reaped"), timeout=30, what="Reaped after SIGTERM")
        await wait_for(lambda: gone(kc, INGRESSES, INGRESS, namespace), timeout=30, what="the Ingress deleted")
        await wait_for(lambda: gone(kc, DNS_ENDPOINTS, DNS, namespace), timeout=30, what="the DNSEndpoint deleted")
        assert (await read(kc, PROCESSES, "routed", namespace))["metadata"].get("deletionTimestamp") is None


async def test_routing_children_cached_from_a_list_are_recognised(kc: KubeClient, namespace: str) -> None:
    # A LIST of a built-in kind leaves apiVersion and kind out of its items: a reconciler that starts after
    # the Ingress exists caches it from its list, and must still know it (no drift, deleted at Reaped).
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT, dns_lb_target="lb.example.test"):
        await kc.create(PROCESSES, routed_process(), namespace)
        await wait_for(reached(kc, namespace, "routed", "Attested"), timeout=60, what="Attested")
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT,
                                  dns_lb_target="lb.example.test") as manager:
        await wait_for(lambda: settled(manager), timeout=30, what="the restarted reconciler to settle")
        assert not [key for key in await events(kc, namespace) if key[0] == "PhaseReconverging"]
        await signal(kc, namespace, "routed", "SIGTERM")
        await wait_for(reached(kc, namespace, "routed", "Reaped"), timeout=30, what="Reaped after SIGTERM")
        await wait_for(lambda: gone(kc, INGRESSES, INGRESS, namespace), timeout=30, what="the Ingress deleted")
        await wait_for(lambda: gone(kc, DNS_ENDPOINTS, DNS, namespace), timeout=30, what="the DNSEndpoint deleted")


async def settled(manager: Manager) -> bool:
    return manager.has_synced() and manager.idle()
