"""Reconciler restarts on this module's own, empty control plane (tests/faults/conftest.py), with the
reconciler as a real subprocess and the Flux stand-in in-process:

- a fresh start, on a cluster that never had a ProcessTable, creates one without the Warning
  ``ProcessTableRecreated``; the same table deleted while a PID is held is recreated with it
  (docs/behaviour.md#a-missing-or-deleted-table). This test runs first, while the plane is empty (it
  checks that it is);
- the handover crash of issue 28: the holder of a stable name gets SIGTERM while the reconciler is down,
  then the reconciler starts again. What it reads from the API afterwards must agree — the table's
  claims, the ``StableName`` conditions, the Events and the stable Ingresses and DNSEndpoints: no Reaped
  or Zombie Process says ``StableName=True`` (docs/behaviour.md#handing-a-stable-name-over).

The handover's order is made deterministic rather than seeded: the signal is sent while no reconciler
runs, so the restarted one meets it on its first pass of the holder, and its table writer runs its
first pass at once (its Process cache synced) and its next only ``--table-status-interval`` (20 s)
later. The holder's three steps Exiting → Zombie → Reaped (one TICK apart) therefore always happen
before any pass of the writer sees it leave: the ordering the crash was once seen with.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from shared.domain import annotations as ann
from shared.domain import finalizers
from shared.domain.api.table import PROCESS_TABLE_NAME
from shared.domain.resources import DNS_ENDPOINTS, INGRESSES, PROCESS_TABLES, PROCESSES
from shared.kube.client import EVENTS, KubeClient
from shared.kube.errors import NotFound
from tests.faults.harness import Binaries, create, flux, items, retried
from tests.integration.reconciler.test_claims import APP, KEY, LB, STABLE_HOST, bidder
from tests.integration.reconciler.test_lifecycle import flux_process
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio

DNS = ("--dns-lb-target", LB)
SLOW_WRITER = ("--table-status-interval", "20")
"""The restarted reconciler's table writer: one pass at start, the next 20 s later (module docstring)."""


async def table(kc: KubeClient) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = msgspec.json.decode(await retried(lambda: kc.get(PROCESS_TABLES, PROCESS_TABLE_NAME),
                                                                what="the ProcessTable"))
    except NotFound:
        return None
    return doc


async def process(kc: KubeClient, ns: str, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = msgspec.json.decode(await retried(lambda: kc.get(PROCESSES, name, ns), what=name))
    return doc


def phase_of(doc: dict[str, Any]) -> str | None:
    phase: str | None = (doc.get("status") or {}).get("phase")
    return phase


def condition(doc: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (doc.get("status") or {}).get("conditions", []) if c["type"] == type_), None)


async def recreations(kc: KubeClient) -> list[dict[str, Any]]:
    """The ``ProcessTableRecreated`` Events of the cluster (the table is cluster-scoped: its Events are
    in ``default``)."""
    return [e for e in await items(kc, EVENTS, None) if e.get("reason") == "ProcessTableRecreated"]


async def test_a_fresh_start_creates_the_table_without_calling_it_recreated(admin: KubeClient, ns: str,
                                                                            binaries: Binaries) -> None:
    assert await table(admin) is None, "this test needs a plane that never had a ProcessTable"
    assert await items(admin, PROCESSES, None) == [], "this test needs a plane without Processes"
    # what a fresh install applies (examples/upstream/observability-stack.yaml): a child naming a parent
    # PID nobody holds yet, and a root that gets a PID
    child = flux_process("child")
    child["spec"]["identity"] = {"parent": "seph.1"}
    await create(admin, PROCESSES, child, ns)
    await create(admin, PROCESSES, flux_process("root"), ns)
    binaries.start("reconciler")
    done: list[str] = []
    async with flux(admin, ns, binaries, done):
        async def counted() -> dict[str, Any] | None:
            doc = await table(admin)
            return doc if doc is not None and (doc.get("status") or {}).get("processCount") == 2 else None

        # the table's first status write follows its creation and the creation's Event, if any, in one pass
        created = await wait_for(counted, timeout=60, what="the ProcessTable created and counted")
        assert created["spec"]["nextSequence"] >= 2  # still past the number the child names
        root = await wait_for(lambda: pid_held(admin, ns, "root"), timeout=60, what="the root's PID")
        assert int(root.rsplit(".", 1)[1]) >= 2
        assert await recreations(admin) == []

        # deleted while a PID is held, its protection stripped by hand: recreated, and said so
        await retried(lambda: admin.delete(PROCESS_TABLES, PROCESS_TABLE_NAME), what="deleting the table")
        await retried(lambda: admin.merge_patch(PROCESS_TABLES, PROCESS_TABLE_NAME,
                                                {"metadata": {"finalizers": None}}), what="stripping its finalizer")

        async def recreated() -> dict[str, Any] | None:
            doc = await table(admin)
            return doc if doc is not None and doc["metadata"]["uid"] != created["metadata"]["uid"] else None

        again = await wait_for(recreated, timeout=60, what="the ProcessTable recreated")
        assert finalizers.TABLE in again["metadata"]["finalizers"]

        async def warned() -> list[dict[str, Any]] | None:
            found = [e for e in await recreations(admin) if e["involvedObject"]["uid"] == again["metadata"]["uid"]]
            return found or None

        (event,) = await wait_for(warned, timeout=30, what="the ProcessTableRecreated Warning")
        assert event["type"] == "Warning"
        assert [e["involvedObject"]["uid"] for e in await recreations(admin)] == [again["metadata"]["uid"]]


async def pid_held(kc: KubeClient, ns: str, name: str) -> str | None:
    pid: str | None = ((await process(kc, ns, name)).get("status") or {}).get("pid")
    return pid


async def holder(kc: KubeClient) -> str | None:
    doc = await table(kc)
    record = ((doc or {}).get("status") or {}).get("claims", {}).get(KEY)
    return record["holder"] if record else None


def stable_children(listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in listed if o["metadata"].get("labels", {}).get("tatara.pleme.io/routing-form") == "stable"]


def owner_uid(obj: dict[str, Any]) -> str:
    (uid,) = [r["uid"] for r in obj["metadata"].get("ownerReferences", []) if r.get("controller")]
    found: str = uid
    return found


async def test_a_holder_signalled_while_the_reconciler_is_down_hands_its_name_over_cleanly(
    admin: KubeClient, ns: str, binaries: Binaries
) -> None:
    first, second = f"{ns}/first", f"{ns}/second"
    binaries.start("reconciler", extra=DNS)
    done: list[str] = []
    async with flux(admin, ns, binaries, done):
        await create(admin, PROCESSES, bidder("first"), ns)
        await wait_for(lambda: phase_is(admin, ns, "first", "Attested"), timeout=60, what="first Attested")
        await create(admin, PROCESSES, bidder("second"), ns)
        await wait_for(lambda: phase_is(admin, ns, "second", "Attested"), timeout=60, what="second Attested")
        await wait_for(lambda: named(admin, first), timeout=30, what="first holding the claim")
        await wait_for(lambda: told(admin, ns, "first", "True"), timeout=30, what="first's StableName True")
        await wait_for(lambda: stable_owned_by(admin, ns, "first"), timeout=30, what="first's stable pair")

        (running,) = binaries.alive("reconciler")
        binaries.kill(running)
        done.append("SIGKILL the reconciler")
        await retried(lambda: admin.merge_patch(PROCESSES, "first", {"metadata": {"annotations": {
            ann.SIGNAL: "SIGTERM"}}}, ns), what="signalling first")
        done.append("SIGTERM to first while no reconciler runs")
        binaries.start("reconciler", extra=(*DNS, *SLOW_WRITER))
        done.append("the reconciler started again")

        try:
            await wait_for(lambda: phase_is(admin, ns, "first", "Reaped"), timeout=60, what="first Reaped")
            await wait_for(lambda: named(admin, second), timeout=60, what="the claim passed to second")
            await wait_for(lambda: told(admin, ns, "second", "True"), timeout=60, what="second's StableName True")
            await wait_for(lambda: stable_owned_by(admin, ns, "second"), timeout=60,
                           what="only second's stable pair")
            await check_stable_names(admin, ns)
            await wait_for(lambda: released_event(admin, ns, "first"), timeout=30,
                           what="first's StableNameReleased Event")
        except (AssertionError, TimeoutError) as err:
            raise AssertionError(f"{'; '.join(done)}\n{err}\n{binaries.report()}") from None


async def phase_is(kc: KubeClient, ns: str, name: str, phase: str) -> bool:
    return phase_of(await process(kc, ns, name)) == phase


async def named(kc: KubeClient, ref: str) -> bool:
    return await holder(kc) == ref


async def told(kc: KubeClient, ns: str, name: str, status: str) -> bool:
    found = condition(await process(kc, ns, name), "StableName")
    return found is not None and found["status"] == status


async def stable_owned_by(kc: KubeClient, ns: str, name: str) -> bool:
    """The namespace's stable Ingresses and DNSEndpoints are exactly ``name``'s pair."""
    uid = (await process(kc, ns, name))["metadata"]["uid"]
    ingresses = stable_children(await items(kc, INGRESSES, ns))
    dns = stable_children(await items(kc, DNS_ENDPOINTS, ns))
    return (len(ingresses) == 1 and len(dns) == 1
            and all(owner_uid(o) == uid for o in (*ingresses, *dns)))


async def released_event(kc: KubeClient, ns: str, name: str) -> bool:
    return any(e["involvedObject"]["name"] == name and e["reason"] == "StableNameReleased"
               for e in await items(kc, EVENTS, ns))


async def check_stable_names(kc: KubeClient, ns: str) -> None:
    """The table, the conditions and the routing children say the same thing: no Process out of Running
    and Attested says ``StableName=True``; a Process says it exactly when the table names it; the stable
    Ingress and DNSEndpoint of the key serve the stable host and belong to the holder."""
    procs = {p["metadata"]["name"]: p for p in await items(kc, PROCESSES, ns)}
    ref = await holder(kc)
    stale = sorted(n for n, p in procs.items() if phase_of(p) not in ("Running", "Attested")
                   and (condition(p, "StableName") or {}).get("status") == "True")
    assert stale == [], f"Processes out of Running/Attested still say StableName=True: " \
                        f"{[(n, condition(procs[n], 'StableName')) for n in stale]}; the table names {ref}"
    saying = sorted(f"{ns}/{n}" for n, p in procs.items() if (condition(p, "StableName") or {}).get("status") == "True")
    assert saying == ([ref] if ref else []), f"StableName=True on {saying}, the table names {ref}"
    assert ref is not None
    holder_uid = procs[ref.partition("/")[2]]["metadata"]["uid"]
    ingresses = stable_children(await items(kc, INGRESSES, ns))
    dns = stable_children(await items(kc, DNS_ENDPOINTS, ns))
    assert [(owner_uid(i), i["spec"]["rules"][0]["host"]) for i in ingresses] == [(holder_uid, STABLE_HOST)]
    assert [(owner_uid(d), d["spec"]["endpoints"][0]["dnsName"]) for d in dns] == [(holder_uid, STABLE_HOST)]
    assert all(i["metadata"]["labels"]["tatara.pleme.io/app"] == APP for i in ingresses)
