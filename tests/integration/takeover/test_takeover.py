"""Taking over namespaces the Rust reference ran: our reconciler started on the state the reference left
(tests/fixtures/rust-state, loaded by tests/integration/takeover/conftest.py) must go on from it, not start
again (docs/migration.md#what-the-takeover-does).

Every test is parametrized over the fixture folders, so a new folder adds its cases. Expected values come from
the fixture (the reference's phases, PIDs, hashes, roots, table, finalizer) and from the API server's own
records (audit log, managedFields, resourceVersions), never from our reconciler's code. The tests run in
definition order on one takeover: first what a quiet takeover leaves alone, then the user's next signal,
create and delete.
"""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from typing import Any

import blake3
import pytest

from shared.domain.api.table import PROCESS_TABLE_NAME
from shared.domain.finalizers import PROCESS as OUR_FINALIZER
from shared.domain.resources import FLUX_KINDS, PROCESS_TABLES, PROCESSES
from shared.kube.client import EVENTS
from shared.kube.errors import NotFound
from tests.integration.takeover.conftest import SCENARIOS, Takeover, dumps, scenario_ids
from tests.support.rust_state import Json, Scenario, kind_resource
from tools.wait import wait_for

pytestmark = pytest.mark.anyio

by_scenario = pytest.mark.parametrize("scenario", SCENARIOS, ids=scenario_ids())

SIGNAL = "tatara.pleme.io/signal"
"""The signal annotation (docs/wire-format.md#annotations), spelled as the user's kubectl writes it."""

WAIT = 60.0
"""Deadline of every wait (a busy two-core machine; each wait ends as soon as its condition holds)."""

SEQUENCE = re.compile(r"\.(\d+)$")

FLUX_VERSIONS = {r.kind: r.api_version for r in FLUX_KINDS}


def served_api_version(kind: str) -> str:
    """The apiVersion Flux serves ``kind`` at in this plane (tools/crds/third_party)."""
    return FLUX_VERSIONS[kind]


def sequence(pid: str | None) -> int | None:
    """The sequence number of a PID (its last segment), None without one."""
    found = SEQUENCE.search(pid or "")
    return int(found.group(1)) if found else None


async def live(tk: Takeover, kind: str, api_version: str, name: str, namespace: str) -> Json | None:
    try:
        doc: Json = json.loads(await tk.admin.get(kind_resource(api_version, kind), name, namespace))
    except NotFound:
        return None
    return doc


async def process(tk: Takeover, scenario: Scenario, name: str) -> Json:
    doc = await live(tk, "Process", PROCESSES.api_version, name, scenario.namespace)
    assert doc is not None, f"{scenario.namespace}/{name} is gone"
    return doc


async def events_of(tk: Takeover, namespace: str, name: str) -> list[Json]:
    items: list[Json] = json.loads(await tk.admin.list(EVENTS, namespace))["items"]
    return [e for e in items if e["involvedObject"].get("kind") == "Process" and e["involvedObject"]["name"] == name]


def attested(scenario: Scenario) -> list[Json]:
    return [p for p in scenario.processes if p["status"].get("phase") == "Attested"]


def suspended(p: Json) -> bool:
    return bool(p["spec"].get("suspended"))


def deleting(p: Json) -> bool:
    """Deleted by the user, held by the finalizer: the reference's livelock in Exiting (docs/migration.md)."""
    return bool(p["metadata"].get("deletionTimestamp"))


def kept(scenario: Scenario) -> list[Json]:
    """The Processes a takeover must keep as they are (every one not being deleted)."""
    return [p for p in scenario.processes if not deleting(p)]


PASSING = frozenset({"Execing", "Running", "Reconverging"})
"""Phases a Process only passes through: one the reference left there (an apply it was refused) goes on."""


def settled(p: Json) -> bool:
    """A Process the reference left where it stays: not being deleted, not Reaped with children it still
    owns, not in a phase it only passes through (each repaired, ``test_inconsistent_states_are_repaired``)."""
    return not deleting(p) and p["status"].get("phase") not in {"Reaped", *PASSING}


def staying(scenario: Scenario) -> list[Json]:
    """The Processes whose phase a takeover must not move."""
    return [p for p in kept(scenario) if p["status"].get("phase") not in PASSING]


async def adopted(tk: Takeover) -> None:
    """Every Process our reconciler decides on (not a SIGSTOPped one: it waits without writes) carries our
    ``observedGeneration``, and the reconciler has gone round every Process twice more since (HEARTBEAT), so a
    write it was going to make would have been made."""
    names = [(s, p["metadata"]["name"]) for s in SCENARIOS for p in kept(s) if not suspended(p)]

    async def written() -> bool:
        for scenario, name in names:
            doc = await process(tk, scenario, name)
            if (doc.get("status") or {}).get("observedGeneration") != doc["metadata"]["generation"]:
                return False
        return True

    await wait_for(written, timeout=WAIT, what="our first status write on every Process")
    await _passes(tk, 2 * sum(len(s.processes) for s in SCENARIOS))
    await wait_for(lambda: _true(tk.manager.idle()), timeout=WAIT, what="an idle reconciler")


async def _true(value: bool) -> bool:
    return value


@pytest.fixture
async def tk(takeover: Takeover) -> Takeover:
    """The takeover, once its quiet part has settled (waited for by the first test only)."""
    if not takeover.settled:
        await adopted(takeover)
        takeover.settled = True
    return takeover


# ── the state loaded is the reference's ─────────────────────────────────────────


@by_scenario
async def test_loading_reproduces_the_reference_state(tk: Takeover, scenario: Scenario) -> None:
    """Spec, status, finalizers, generation and field managers as the fixture has them, before ours ran."""
    assert tk.problems[scenario.name] == []


# ── a quiet takeover ────────────────────────────────────────────────────────────


@by_scenario
async def test_no_phase_regresses(tk: Takeover, scenario: Scenario) -> None:
    """Each Process keeps the reference's phase, PID, identity (snake_case keys), attestation and generation
    (one left in a phase it only passes through goes on: ``test_inconsistent_states_are_repaired``)."""
    for fixture in staying(scenario):
        doc = await process(tk, scenario, fixture["metadata"]["name"])
        want, got = fixture["status"], doc["status"]
        assert (got["phase"], got.get("pid"), got["identity"]) == (want["phase"], want.get("pid"),
                                                                   want["identity"]), dumps(got)
        assert got.get("attestation") == want.get("attestation"), dumps(got)
        assert doc["metadata"]["generation"] == fixture["metadata"]["generation"]
        assert doc["spec"] == fixture["spec"]


@by_scenario
async def test_a_quiet_attested_process_gets_no_write_to_its_children(tk: Takeover, scenario: Scenario) -> None:
    """Counted server-side: no request of ours wrote a child of an Attested Process (audit log), and each such
    child's resourceVersion and field managers are those loaded."""
    quiet = [p for p in attested(scenario) if settled(p)]
    children = {(c["kind"], c["metadata"]["name"]) for p in quiet for c in scenario.children_of(p)}
    plurals = {kind: kind_resource(o.fixture["apiVersion"], kind).plural
               for o in tk.loaded[scenario.name].objects for kind in [o.fixture["kind"]]}
    names = {(plurals[kind], name) for kind, name in children}
    writes = [e for e in tk.writes(scenario.namespace) if (e.resource.split("/")[0], e.name) in names]
    assert writes == []
    for item in tk.loaded[scenario.name].objects:
        if (item.fixture["kind"], item.fixture["metadata"]["name"]) not in children:
            continue
        doc = await live(tk, item.fixture["kind"], item.fixture["apiVersion"], item.fixture["metadata"]["name"],
                         scenario.namespace)
        assert doc is not None
        assert doc["metadata"]["resourceVersion"] == item.live["metadata"]["resourceVersion"]
        assert doc["metadata"]["managedFields"] == item.live["metadata"]["managedFields"]


@by_scenario
async def test_what_ours_rewrites_is_rewritten_once_with_an_event(tk: Takeover, scenario: Scenario) -> None:
    """The reference writes no conditions or ``observedGeneration``: ours writes each Process's status once
    (one merge patch of ``/status``, none of the Process itself), with a Normal Event ``Adopted`` naming what
    it rewrote, and nothing else of the status changes. A SIGSTOPped Process is not written."""
    writes = defaultdict(list)
    for e in tk.writes(scenario.namespace):
        if e.resource.startswith("processes"):
            writes[e.name].append(e.resource)
    for fixture in staying(scenario):
        name = fixture["metadata"]["name"]
        adoption = [e for e in await events_of(tk, scenario.namespace, name) if e["reason"] == "Adopted"]
        if suspended(fixture):
            assert writes[name] == [], "a SIGSTOPped Process waits without writes"
            assert adoption == []
            continue
        assert writes[name] == ["processes/status"], writes[name]
        assert len(adoption) == 1, adoption
        assert adoption[0]["type"] == "Normal", adoption
        message = adoption[0]["message"]
        assert "observedGeneration" in message, message
        doc = await process(tk, scenario, name)
        changed = {k for k in set(doc["status"]) | set(fixture["status"])
                   if doc["status"].get(k) != fixture["status"].get(k)}
        later_duplicate = any(c["type"] == "PidConflict" for c in doc["status"]["conditions"])
        assert changed == {"observedGeneration", "conditions"}, (changed, later_duplicate)
        assert doc["status"]["observedGeneration"] == doc["metadata"]["generation"]
        ready = {c["type"]: c for c in doc["status"]["conditions"]}["Ready"]
        assert ready["status"] == ("True" if fixture["status"]["phase"] == "Attested" else "False"), ready


@by_scenario
async def test_ours_reads_the_references_child_versions(tk: Takeover, scenario: Scenario) -> None:
    """A ``fluxResources`` entry the reference wrote at a version we do not render (``v1beta2``
    OCIRepository) is the same object to ours: Ready as the child says, so no drift. The entries stay as
    written, since the reference's ``artifactHash`` is BLAKE3 over their ``apiVersion/kind/namespace/name``
    lines (computed here from the stored status alone); the OCIRepository's ``ref.tag`` (a version
    constraint) is left as the reference wrote it."""
    for fixture in attested(scenario):
        doc = await process(tk, scenario, fixture["metadata"]["name"])
        refs = doc["status"].get("fluxResources", [])
        assert refs == fixture["status"].get("fluxResources", [])
        lines = "".join(f"{r['apiVersion']}/{r['kind']}/{r['namespace']}/{r['name']}\n" for r in refs)
        want = doc["status"]["attestation"]["artifactHash"]
        assert (blake3.blake3(lines.encode()).hexdigest() if refs else "") == want
    for item in tk.loaded[scenario.name].objects:
        if item.fixture["kind"] == "OCIRepository":
            doc = await live(tk, "OCIRepository", item.fixture["apiVersion"], item.fixture["metadata"]["name"],
                             scenario.namespace)
            assert doc is not None
            assert doc["spec"]["ref"] == item.fixture["spec"]["ref"]


@by_scenario
async def test_duplicate_sequence_numbers_are_kept_and_reported_on_the_later_process(
        tk: Takeover, scenario: Scenario) -> None:
    """Where the reference left two Processes holding one sequence number (here: s2b ran on a cluster of its
    own, so its PID's number is s1's too), both keep PID and phase; the later one (creationTimestamp, then
    ``<namespace>/<name>``) has ``PidConflict=True`` and a Warning Event ``DuplicatePid`` naming the earlier;
    the earlier has neither."""
    holders: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for s in SCENARIOS:
        for p in kept(s):
            seq = sequence(p["status"].get("pid"))
            if seq is not None:
                doc = await process(tk, s, p["metadata"]["name"])
                holders[seq].append((doc["metadata"]["creationTimestamp"], s.namespace, p["metadata"]["name"]))
    for fixture in kept(scenario):
        name = fixture["metadata"]["name"]
        doc = await process(tk, scenario, name)
        seq = sequence(fixture["status"].get("pid"))
        group = sorted(holders.get(seq, [])) if seq is not None else []
        later = len(group) > 1 and (group[0][1], group[0][2]) != (scenario.namespace, name)
        conditions = {c["type"]: c for c in doc["status"].get("conditions", [])}
        warnings = [e for e in await events_of(tk, scenario.namespace, name) if e["reason"] == "DuplicatePid"]
        if deleting(fixture):
            continue
        assert doc["status"].get("pid") == fixture["status"].get("pid")
        if fixture["status"]["phase"] not in PASSING:
            assert doc["status"]["phase"] == fixture["status"]["phase"]
        if later:
            assert conditions.get("PidConflict", {}).get("status") == "True", dumps(doc["status"])
            assert len(warnings) == 1, warnings
            assert f"{group[0][1]}/{group[0][2]}" in warnings[0]["message"], warnings
        else:
            assert "PidConflict" not in conditions
            assert warnings == []


@by_scenario
async def test_the_finalizer_is_ours(tk: Takeover, scenario: Scenario) -> None:
    """The reference's finalizer string is ours, so deleting after the takeover runs our cleanup; a Process
    whose finalizer the reference already removed (Reaped) does not get one again."""
    for fixture in kept(scenario):
        assert fixture["metadata"].get("finalizers", [OUR_FINALIZER]) == [OUR_FINALIZER]
        doc = await process(tk, scenario, fixture["metadata"]["name"])
        assert doc["metadata"].get("finalizers") == fixture["metadata"].get("finalizers")


@by_scenario
async def test_inconsistent_states_are_repaired(tk: Takeover, scenario: Scenario) -> None:
    """What the reference leaves half done, ours finishes, with the ``Adopted`` Event saying so: a deleted
    Process stuck in Exiting goes (its children with it); a Reaped Process keeps its status, PID and
    attestation, and the children the reference left in place are deleted; a Process left in Execing by a
    refused apply is applied and attested with its PID."""
    for fixture in scenario.processes:
        name = fixture["metadata"]["name"]
        children = scenario.children_of(fixture)
        if deleting(fixture):
            await wait_for(functools.partial(_gone, tk, "Process", PROCESSES.api_version, name, scenario.namespace),
                           timeout=WAIT, what=f"{name} deleted")
            message = await wait_for(functools.partial(_adopted_message, tk, scenario.namespace, name),
                                     timeout=WAIT, what=f"the Adopted Event of {name}")
            assert f"phase {fixture['status']['phase']} → " in message, message
        elif fixture["status"].get("phase") in PASSING:
            message = await wait_for(functools.partial(_adopted_message, tk, scenario.namespace, name),
                                     timeout=WAIT, what=f"the Adopted Event of {name}")
            assert f"phase {fixture['status']['phase']} → " in message, message
            doc = await wait_for(functools.partial(_attested_at, tk, scenario, name, 0), timeout=WAIT,
                                 what=f"{name} attested")
            assert (doc["status"]["pid"], doc["status"]["identity"]) == (fixture["status"]["pid"],
                                                                         fixture["status"]["identity"])
            refs = [(r["kind"], r["name"]) for r in doc["status"]["fluxResources"]]
            assert refs, "its children are applied now"
            for kind, child in refs:
                now = await live(tk, kind, served_api_version(kind), child, scenario.namespace)
                assert now is not None
                assert [e["manager"] for e in now["metadata"]["managedFields"] if e["operation"] == "Apply"] == [
                    "tatara-reconciler"]
            continue
        elif fixture["status"].get("phase") == "Reaped":
            message = await wait_for(functools.partial(_adopted_message, tk, scenario.namespace, name),
                                     timeout=WAIT, what=f"the Adopted Event of {name}")
            for child in children:
                assert f"{child['kind']} {scenario.namespace}/{child['metadata']['name']}" in message, message
            doc = await process(tk, scenario, name)
            assert doc["status"]["phase"] == "Reaped"
            assert (doc["status"]["pid"], doc["status"]["attestation"]) == (fixture["status"]["pid"],
                                                                            fixture["status"]["attestation"])
        else:
            continue
        for child in children:
            await wait_for(functools.partial(_gone, tk, child["kind"], child["apiVersion"], child["metadata"]["name"],
                                             scenario.namespace), timeout=WAIT, what=f"{child['kind']} gone")


async def _gone(tk: Takeover, kind: str, api_version: str, name: str, namespace: str) -> bool:
    return await live(tk, kind, api_version, name, namespace) is None


async def _adopted_message(tk: Takeover, namespace: str, name: str) -> str | None:
    found = [e["message"] for e in await events_of(tk, namespace, name) if e["reason"] == "Adopted"]
    return found[0] if found else None


async def test_the_table_is_adopted(tk: Takeover) -> None:
    """The reference's table (``spec`` only) gets our finalizer and status; its ``nextSequence`` is where it was
    (nothing was allocated yet)."""
    table = json.loads(await tk.admin.get(PROCESS_TABLES, PROCESS_TABLE_NAME))
    assert table["metadata"]["uid"] == tk.table["metadata"]["uid"], "the reference's table, not a new one"
    assert table["spec"]["nextSequence"] == tk.table["spec"]["nextSequence"]


# ── the user's next move ────────────────────────────────────────────────────────


@by_scenario
async def test_new_pids_continue_after_the_references_table(tk: Takeover, scenario: Scenario) -> None:
    """A Process created after the takeover gets a sequence number at or past the reference's ``nextSequence``,
    held by no other Process."""
    template = scenario.processes[0]
    name = f"{template['metadata']['name']}-after"
    spec: dict[str, Any] = json.loads(json.dumps(template["spec"]))
    spec.pop("dependsOn", None)
    spec["suspended"] = False
    spec["identity"] = {}
    spec["intent"] = {"flux": {"gitRepository": "infra", "path": f"./apps/{name}"}}
    await tk.admin.create(PROCESSES, {"apiVersion": PROCESSES.api_version, "kind": "Process",
                                      "metadata": {"name": name, "namespace": scenario.namespace}, "spec": spec},
                          scenario.namespace)

    async def pid() -> str | None:
        doc = await process(tk, scenario, name)
        found: str | None = (doc.get("status") or {}).get("pid")
        return found

    got = sequence(await wait_for(pid, timeout=WAIT, what=f"a PID for {name}"))
    assert got is not None
    assert got >= int(tk.table["spec"]["nextSequence"])
    others = [sequence((p.get("status") or {}).get("pid"))
              for p in json.loads(await tk.admin.list(PROCESSES))["items"] if p["metadata"]["name"] != name]
    assert got not in others


@by_scenario
async def test_sighup_after_the_takeover_extends_the_references_chain(tk: Takeover, scenario: Scenario) -> None:
    """SIGHUP on an Attested Process: Attested again at attestation generation + 1, ``previousRoot`` the
    reference's ``composedRoot``, same PID; its children are then ours by server-side apply (manager
    ``tatara-reconciler``, one Apply entry each) and no apply of ours met a conflict."""
    for fixture in attested(scenario):
        if suspended(fixture):
            continue
        name = fixture["metadata"]["name"]
        root = fixture["status"]["attestation"]["composedRoot"]
        generation = fixture["status"]["attestation"]["generation"]
        await tk.admin.merge_patch(PROCESSES, name, {"metadata": {"annotations": {SIGNAL: "SIGHUP"}}},
                                   scenario.namespace)

        doc = await wait_for(functools.partial(_attested_at, tk, scenario, name, generation + 1), timeout=WAIT,
                             what=f"{name} attested again")
        assert doc["status"]["attestation"]["previousRoot"] == root
        assert doc["status"]["pid"] == fixture["status"]["pid"]
        for child in scenario.children_of(fixture):
            now = await live(tk, child["kind"], child["apiVersion"], child["metadata"]["name"], scenario.namespace)
            assert now is not None
            appliers = [(e["manager"], e["apiVersion"]) for e in now["metadata"]["managedFields"]
                        if e["operation"] == "Apply"]
            assert appliers == [("tatara-reconciler", child["apiVersion"])], dumps(now["metadata"]["managedFields"])
    conflicts = [e for e in tk.writes(scenario.namespace) if e.code == 409 and not e.resource.endswith("/status")]
    assert conflicts == []
    # no apply loop: at most one apply per child for the one render, and none more while the Processes are
    # decided again (HEARTBEAT) after attesting
    children = {(kind_resource(c["apiVersion"], c["kind"]).plural, c["metadata"]["name"])
                for p in attested(scenario) if not suspended(p) for c in scenario.children_of(p)}
    applies = _applies(tk, scenario.namespace, children)
    assert all(n <= 1 for n in applies.values()), applies
    await _passes(tk, 2 * sum(len(s.processes) for s in SCENARIOS))
    assert _applies(tk, scenario.namespace, children) == applies


def _applies(tk: Takeover, namespace: str, children: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    counts = dict.fromkeys(children, 0)
    for e in tk.writes(namespace):
        if e.verb == "patch" and (e.resource, e.name) in counts:
            counts[(e.resource, e.name)] += 1
    return counts


async def _passes(tk: Takeover, count: int) -> None:
    start = tk.reconciles()
    await wait_for(lambda: _true(tk.reconciles() >= start + count), timeout=WAIT, what=f"{count} more passes")


async def _attested_at(tk: Takeover, scenario: Scenario, name: str, generation: int) -> Json | None:
    doc = await process(tk, scenario, name)
    att = (doc.get("status") or {}).get("attestation") or {}
    return doc if doc["status"]["phase"] == "Attested" and att.get("generation") == generation else None


async def _resumed(tk: Takeover, scenario: Scenario, name: str) -> Json | None:
    doc = await process(tk, scenario, name)
    status = doc.get("status") or {}
    written = status.get("observedGeneration") == doc["metadata"]["generation"]
    return doc if not doc["spec"].get("suspended") and written else None


@by_scenario
async def test_sigcont_resumes_a_process_the_reference_stopped(tk: Takeover, scenario: Scenario) -> None:
    """``spec.suspended: true`` is the reference's SIGSTOP: SIGCONT clears it and the Process stays Attested
    with the reference's attestation."""
    for fixture in [p for p in scenario.processes if suspended(p)]:
        name = fixture["metadata"]["name"]
        await tk.admin.merge_patch(PROCESSES, name, {"metadata": {"annotations": {SIGNAL: "SIGCONT"}}},
                                   scenario.namespace)

        doc = await wait_for(functools.partial(_resumed, tk, scenario, name), timeout=WAIT, what=f"{name} resumed")
        assert doc["status"]["phase"] == fixture["status"]["phase"]
        assert doc["status"]["attestation"] == fixture["status"]["attestation"]


@by_scenario
async def test_deletion_after_the_takeover_runs_our_cleanup(tk: Takeover, scenario: Scenario) -> None:
    """Deleting every Process: each goes (our finalizer comes off after our cleanup), and so do its children."""
    names = [p["metadata"]["name"] for p in json.loads(await tk.admin.list(PROCESSES, scenario.namespace))["items"]]
    for name in names:
        await tk.admin.delete(PROCESSES, name, scenario.namespace)

    async def gone() -> bool:
        return json.loads(await tk.admin.list(PROCESSES, scenario.namespace))["items"] == []

    await wait_for(gone, timeout=WAIT, what=f"every Process of {scenario.namespace} gone")
    for item in tk.loaded[scenario.name].objects:
        if item.fixture["kind"] != "Process":
            async def child_gone(item: Any = item) -> bool:
                return await live(tk, item.fixture["kind"], item.fixture["apiVersion"],
                                  item.fixture["metadata"]["name"], scenario.namespace) is None

            await wait_for(child_gone, timeout=WAIT, what=f"{item.fixture['kind']} gone")
