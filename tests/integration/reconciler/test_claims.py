"""Stable-name claims with the reconciler running on the real API server (docs/behaviour.md#stable-name-claims):
two Processes bidding for one stable name, one holder in ``ProcessTable.status.claims`` and only its stable
Ingress/DNSEndpoint, the loser told why; the holder kept across a restart; the claim moving when the holder
is deleted; a hand-deleted or hand-edited stable Ingress put back in place."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest

from shared.domain.api.table import PROCESS_TABLE_NAME
from shared.domain.resources import DNS_ENDPOINTS, INGRESSES, PROCESS_TABLES, PROCESSES
from shared.kube.client import EVENTS, KubeClient
from tests.integration.reconciler.conftest import NO_HEARTBEAT, reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, read
from tests.integration.reconciler.test_routing import settled
from tests.integration.reconciler.test_scenarios import gone, reached, signal
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio

APP = "claimed"
KEY = f"pleme-dev/{APP}"
"""The claims key: ``--fleet-cluster`` (default ``pleme-dev``) and the hostname's app."""
STABLE_HOST = f"{APP}.pleme-dev.use1.quero.lol"
"""``<app>.<cluster>.<location>.<domain>`` with the default fleet settings (docs/wire-format.md#hostnames)."""
LB = "lb.example.test"


def bidder(name: str, app: str = APP) -> dict[str, Any]:
    process = flux_process(name)
    process["spec"]["routing"] = {"hostnames": [{"app": app, "instance": name}],
                                  "backend": {"service": "svc", "port": 80}, "stableNameClaim": True}
    return process


async def claims(kc: KubeClient) -> dict[str, Any]:
    table = await read(kc, PROCESS_TABLES, PROCESS_TABLE_NAME, None)
    found: dict[str, Any] = (table.get("status") or {}).get("claims") or {}
    return found


def held_by(kc: KubeClient, ref: str, key: str = KEY) -> Any:
    async def probe() -> dict[str, Any] | None:
        record = (await claims(kc)).get(key)
        return record if record is not None and record["holder"] == ref else None

    return probe


async def exists(kc: KubeClient, resource: Any, name: str, ns: str) -> dict[str, Any] | None:
    try:
        return await read(kc, resource, name, ns)
    except Exception:
        return None


def stable_name_condition(kc: KubeClient, ns: str, name: str, reason: str) -> Any:
    async def probe() -> dict[str, Any] | None:
        status = (await read(kc, PROCESSES, name, ns)).get("status") or {}
        return next((c for c in status.get("conditions", []) if c["type"] == "StableName" and c["reason"] == reason),
                    None)

    return probe


async def events_of(kc: KubeClient, ns: str, name: str) -> dict[tuple[str, str], int]:
    items = msgspec.json.decode(await kc.list(EVENTS, ns))["items"]
    return {(e["reason"], e["message"]): e["count"] for e in items if e["involvedObject"]["name"] == name}


async def test_two_bidders_one_holder_kept_across_a_restart_and_passed_on_when_it_is_deleted(
    kc: KubeClient, namespace: str
) -> None:
    first, second = f"{namespace}/first", f"{namespace}/second"
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT, dns_lb_target=LB):
        await kc.create(PROCESSES, bidder("first"), namespace)
        await wait_for(reached(kc, namespace, "first", "Attested"), timeout=60, what="first Attested")
        await kc.create(PROCESSES, bidder("second"), namespace)
        await wait_for(reached(kc, namespace, "second", "Attested"), timeout=60, what="second Attested")

        # first was created first, at equal priority: it holds the name (docs/behaviour.md#stable-name-claims)
        record = await wait_for(held_by(kc, first), timeout=30, what="first holding the claim")
        process = await read(kc, PROCESSES, "first", namespace)
        assert record["pid"] == process["status"]["pid"]
        assert record["priority"] == 0
        ingress = await wait_for(lambda: exists(kc, INGRESSES, f"first-{APP}-stable", namespace), timeout=30,
                                 what="the holder's stable Ingress")
        assert ingress["spec"]["rules"][0]["host"] == STABLE_HOST
        assert ingress["metadata"]["labels"]["tatara.pleme.io/routing-form"] == "stable"
        dns = await wait_for(lambda: exists(kc, DNS_ENDPOINTS, f"first-{APP}-stable-dns", namespace), timeout=30,
                             what="the holder's stable DNSEndpoint")
        assert dns["spec"]["endpoints"][0]["dnsName"] == STABLE_HOST
        granted = await wait_for(stable_name_condition(kc, namespace, "first", "StableNameGranted"), timeout=30,
                                 what="the holder's StableName condition")
        assert granted["status"] == "True"

        # the loser is told who holds the name, and has no stable objects
        lost = await wait_for(stable_name_condition(kc, namespace, "second", "StableNameHeld"), timeout=30,
                              what="the loser's StableName condition")
        assert lost["status"] == "False"
        assert lost["message"] == f"stable name {KEY} is held by {first}"
        assert await gone(kc, INGRESSES, f"second-{APP}-stable", namespace)
        assert await gone(kc, DNS_ENDPOINTS, f"second-{APP}-stable-dns", namespace)
        assert await exists(kc, INGRESSES, f"second-{APP}-second", namespace) is not None

    # a restarted reconciler reads the holder back from the table: same record, nothing transferred
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT, dns_lb_target=LB) as manager:
        await wait_for(lambda: settled(manager), timeout=30, what="the restarted reconciler to settle")
        assert (await claims(kc))[KEY] == record
        seen = await events_of(kc, namespace, "second")
        assert seen[("StableNameHeld", f"stable name {KEY} is held by {first}")] == 1  # once, not per pass

        # the holder is deleted: it runs down to Reaped, and the name passes to the other bidder
        await kc.delete(PROCESSES, "first", namespace)
        await wait_for(held_by(kc, second), timeout=60, what="the claim moving to second")
        await wait_for(lambda: gone(kc, INGRESSES, f"first-{APP}-stable", namespace), timeout=30,
                       what="the old holder's stable Ingress deleted")
        moved = await wait_for(lambda: exists(kc, INGRESSES, f"second-{APP}-stable", namespace), timeout=30,
                               what="the new holder's stable Ingress")
        assert moved["spec"]["rules"][0]["host"] == STABLE_HOST
        await wait_for(lambda: exists(kc, DNS_ENDPOINTS, f"second-{APP}-stable-dns", namespace), timeout=30,
                       what="the new holder's stable DNSEndpoint")
        await wait_for(stable_name_condition(kc, namespace, "second", "StableNameGranted"), timeout=30,
                       what="the new holder's StableName condition")
        assert await phase_is(kc, namespace, "second", "Attested")

        # the last holder is deleted: the key is vacated
        await kc.delete(PROCESSES, "second", namespace)
        await wait_for(lambda: gone(kc, PROCESSES, "second", namespace), timeout=60, what="second gone")
        await wait_for(lambda: vacated(kc), timeout=30, what="the claim vacated")


async def phase_is(kc: KubeClient, ns: str, name: str, phase: str) -> bool:
    return bool(await reached(kc, ns, name, phase)())


async def vacated(kc: KubeClient) -> bool:
    return KEY not in await claims(kc)


POKE = "test.tatara.pleme.io/poke"
"""An annotation of the test's own: each change of it wakes a pass of the Process (a metadata change)."""


@asynccontextmanager
async def poking(kc: KubeClient, ns: str, name: str) -> AsyncIterator[None]:
    """While the block runs, change ``POKE`` on the Process back to back: every reconciler pass that such a
    wake starts between the reconciler's own apply and its cache showing it would find the old state."""
    async def poke() -> None:
        count = 0
        while True:
            count += 1
            await kc.merge_patch(PROCESSES, name, {"metadata": {"annotations": {POKE: str(count)}}}, ns)

    async with anyio.create_task_group() as tg:
        tg.start_soon(poke)
        try:
            yield
        finally:
            tg.cancel_scope.cancel()


async def test_a_hand_deleted_or_edited_stable_ingress_is_put_back_without_reconverging(
    kc: KubeClient, namespace: str
) -> None:
    name = f"only-{APP}-stable"
    missing = ("RoutingDrift", f"routing drift corrected: Ingress {namespace}/{name} missing")
    changed = ("RoutingDrift", f"routing drift corrected: Ingress {namespace}/{name} changed")
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT, dns_lb_target=LB) as manager:
        await kc.create(PROCESSES, bidder("only"), namespace)
        await wait_for(reached(kc, namespace, "only", "Attested"), timeout=60, what="Attested")
        first = await wait_for(lambda: exists(kc, INGRESSES, name, namespace), timeout=30, what="the stable Ingress")
        await wait_for(lambda: settled(manager), timeout=30, what="the reconciler to settle")
        before = await events_of(kc, namespace, "only")

        async def recreated() -> dict[str, Any] | None:
            again = await exists(kc, INGRESSES, name, namespace)
            return again if again is not None and again["metadata"]["uid"] != first["metadata"]["uid"] else None

        async def restored() -> bool:
            again = await exists(kc, INGRESSES, name, namespace)
            return again is not None and again["spec"]["rules"][0]["host"] == STABLE_HOST

        # the Process is woken over and over while each repair happens, so passes do start between the
        # reconciler's re-apply and its Ingress cache showing it
        async with poking(kc, namespace, "only"):
            await kc.delete(INGRESSES, name, namespace)
            await wait_for(recreated, timeout=30, what="the stable Ingress applied again")

        spec = {"rules": [{"host": "elsewhere.example.test", "http": first["spec"]["rules"][0]["http"]}]}
        async with poking(kc, namespace, "only"):
            await kc.merge_patch(INGRESSES, name, {"spec": spec}, namespace)
            await wait_for(restored, timeout=30, what="the hand edit undone")
        assert (await claims(kc))[KEY]["holder"] == f"{namespace}/only"

        async def both_repairs_told() -> dict[tuple[str, str], int] | None:
            # the Events come after the writes they tell of (the executor's last step)
            seen = await events_of(kc, namespace, "only")
            told = seen.get(missing, 0) > before.get(missing, 0) and seen.get(changed, 0) > before.get(changed, 0)
            return seen if told else None

        seen = await wait_for(both_repairs_told, timeout=30, what="a RoutingDrift Event for each repair")
        assert not [key for key in seen if key[0] == "PhaseReconverging"]
        # one repair each: a pass woken before the Ingress cache shows the re-apply (a requeue, another
        # child's event) waits for it instead of repairing again (docs/runtime.md#own-writes)
        assert seen[missing] - before.get(missing, 0) == 1
        assert seen[changed] - before.get(changed, 0) == 1
        assert await phase_is(kc, namespace, "only", "Attested")


# ── the handover order: break before make (docs/behaviour.md#handing-a-stable-name-over) ──────────────

STABLE_SELECTOR = "tatara.pleme.io/routing-form=stable"
HANDED = "handed"
HOLD = "test.tatara.pleme.io/hold"
"""A finalizer of the test's own: a deleted routing child stays (Terminating) until the test removes it."""
"""The app of the handover test: a key of its own (the session plane's table may still name a holder of
``APP`` from another test's namespace, kept while it lives)."""


class StableWatch:
    """The namespace's stable Ingresses and DNSEndpoints, from a LIST and then a watch from its
    resourceVersion: every ADDED/DELETED event in the order the API server sent it, per kind."""

    def __init__(self, kc: KubeClient, namespace: str) -> None:
        self.kc, self.namespace = kc, namespace
        self.start: dict[str, set[str]] = {}
        self.log: dict[str, list[tuple[str, str]]] = {"Ingress": [], "DNSEndpoint": []}

    async def _watch(self, resource: Any, started: anyio.Event) -> None:
        listed = msgspec.json.decode(await self.kc.list(resource, self.namespace, label_selector=STABLE_SELECTOR))
        self.start[resource.kind] = {i["metadata"]["name"] for i in listed["items"]}
        started.set()
        since = listed["metadata"]["resourceVersion"]
        async for event in self.kc.watch(resource, self.namespace, resource_version=since, timeout_seconds=300,
                                         inactivity_timeout=120, label_selector=STABLE_SELECTOR):
            if event.type in ("ADDED", "DELETED"):
                self.log[resource.kind].append((event.type, msgspec.json.decode(event.object)["metadata"]["name"]))

    @asynccontextmanager
    async def running(self) -> AsyncIterator[StableWatch]:
        async with anyio.create_task_group() as tg:
            for resource in (INGRESSES, DNS_ENDPOINTS):
                started = anyio.Event()
                tg.start_soon(self._watch, resource, started)
                await started.wait()
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    def added(self, kind: str, name: str) -> Callable[[], Awaitable[bool]]:
        """A probe: the stream has shown ``name`` (of ``kind``) ADDED."""
        async def probe() -> bool:
            return ("ADDED", name) in self.log[kind]

        return probe

    def assert_break_before_make(self, kind: str, old: str, new: str) -> None:
        """``old`` was deleted before ``new`` was added, and at no point of the stream were two stable
        children of ``kind`` (every one serves the one stable host) alive together."""
        log = self.log[kind]
        assert ("DELETED", old) in log, log
        assert ("ADDED", new) in log, log
        assert log.index(("DELETED", old)) < log.index(("ADDED", new)), f"{kind}: made before broken: {log}"
        alive = set(self.start[kind])
        for event, name in log:
            if event == "ADDED":
                alive.add(name)
            else:
                alive.discard(name)
            assert len(alive) <= 1, f"{kind}: {sorted(alive)} served {STABLE_HOST} together: {log}"


async def test_a_handover_deletes_the_old_stable_pair_before_the_new_one_is_made(kc: KubeClient,
                                                                                  namespace: str) -> None:
    async with reconciler_running(kc, namespace, heartbeat_seconds=NO_HEARTBEAT, dns_lb_target=LB):
        for name in ("first", "second"):
            await kc.create(PROCESSES, bidder(name, HANDED), namespace)
            await wait_for(reached(kc, namespace, name, "Attested"), timeout=60, what=f"{name} Attested")
        await wait_for(lambda: exists(kc, INGRESSES, f"first-{HANDED}-stable", namespace), timeout=30,
                       what="the holder's stable Ingress")
        await wait_for(lambda: exists(kc, DNS_ENDPOINTS, f"first-{HANDED}-stable-dns", namespace), timeout=30,
                       what="the holder's stable DNSEndpoint")

        # the holder leaves (SIGTERM): the name passes to second
        async with StableWatch(kc, namespace).running() as watch:
            await signal(kc, namespace, "first", "SIGTERM")
            for kind, name in (("Ingress", f"second-{HANDED}-stable"), ("DNSEndpoint", f"second-{HANDED}-stable-dns")):
                await wait_for(watch.added(kind, name), timeout=60, what=f"second's stable {kind}")
        watch.assert_break_before_make("Ingress", f"first-{HANDED}-stable", f"second-{HANDED}-stable")
        watch.assert_break_before_make("DNSEndpoint", f"first-{HANDED}-stable-dns", f"second-{HANDED}-stable-dns")

        # a higher priority takes the name from an Attested holder (which stays eligible): the same order,
        # even while the old pair takes its time to go (a finalizer, as some ingress controllers put on)
        old = ((INGRESSES, f"second-{HANDED}-stable"), (DNS_ENDPOINTS, f"second-{HANDED}-stable-dns"))
        for resource, name in old:
            await kc.merge_patch(resource, name, {"metadata": {"finalizers": [HOLD]}}, namespace)
        third = bidder("third", HANDED)
        third["spec"]["routing"]["priority"] = 10
        async with StableWatch(kc, namespace).running() as watch:
            await kc.create(PROCESSES, third, namespace)
            await wait_for(held_by(kc, f"{namespace}/third", f"pleme-dev/{HANDED}"), timeout=60,
                           what="the claim taken by third")
            for resource, name in old:
                await wait_for(terminating(kc, resource, name, namespace), timeout=30,
                               what=f"second deleting its {name}")
            # the old pair still serves the host: the new one waits for it
            assert not [entry for entries in watch.log.values() for entry in entries if entry[0] == "ADDED"]
            for resource, name in old:
                await kc.merge_patch(resource, name, {"metadata": {"finalizers": None}}, namespace)
            for kind, name in (("Ingress", f"third-{HANDED}-stable"), ("DNSEndpoint", f"third-{HANDED}-stable-dns")):
                await wait_for(watch.added(kind, name), timeout=60, what=f"third's stable {kind}")
        watch.assert_break_before_make("Ingress", f"second-{HANDED}-stable", f"third-{HANDED}-stable")
        watch.assert_break_before_make("DNSEndpoint", f"second-{HANDED}-stable-dns", f"third-{HANDED}-stable-dns")
        assert (await claims(kc))[f"pleme-dev/{HANDED}"]["holder"] == f"{namespace}/third"


def terminating(kc: KubeClient, resource: Any, name: str, ns: str) -> Callable[[], Awaitable[bool]]:
    """A probe: ``name`` is being deleted (its ``deletionTimestamp`` set, a finalizer still on it)."""
    async def probe() -> bool:
        found = await exists(kc, resource, name, ns)
        return found is not None and bool(found["metadata"].get("deletionTimestamp"))

    return probe
