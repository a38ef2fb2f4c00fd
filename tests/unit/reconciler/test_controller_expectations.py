"""reconciler.controller's expectations: what it just wrote counts until the caches show it
(docs/architecture.md#one-reconcile, docs/behaviour.md#releasing, docs/behaviour.md#maxconcurrent).

Real informers whose caches the tests fill; the executor records decisions and writes only the status (to the
in-memory API server), so the caches stay behind exactly as a lagging watch would leave them until a test
moves the Process cache on (:func:`caught_up`). The expectations' window runs on an injected clock
(:class:`tests.support.clock.FakeClock`), moved by the tests.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from reconciler.controller import EXPECTATION_SECONDS, ProcessReconciler
from reconciler.decision import Decision
from reconciler.executor import Executor
from shared.domain.api.codec import convert, to_wire
from shared.domain.api.process import Process
from shared.domain.manifests.batch import Job, ObservedJob
from shared.domain.resources import JOBS, PROCESSES
from shared.kube.controller import Request
from shared.kube.informer import Informer, WatchEventType
from shared.kube.meta import as_json
from tests.support.clock import FakeClock
from tests.unit.reconciler.test_controller import FakeExecutor

pytestmark = pytest.mark.anyio

FIN = "tatara.pleme.io/process-finalizer"
MARKER: dict[str, Any] = {"source": {"runMarker": {}}, "channel": {"stdout": {}}}


def proc(name: str, phase: str, *, created: str = "2025-06-01T11:00:00Z", spec: dict[str, Any] | None = None,
         **status: Any) -> Process:
    return convert({
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": "1",
                     "finalizers": [FIN], "creationTimestamp": created,
                     "annotations": {"tatara.pleme.io/released-from": "Attested"}},
        "spec": {"classification": {"pointType": "Gate", "substrate": "Compute"},
                 "intent": {"aplicacao": {"chartRef": "oci://charts/demo", "version": "1.0.0"}},
                 **(spec or {})},
        "status": {"phase": phase, "phaseSince": "2025-06-01T11:59:00Z", **status},
    }, Process)


def setup(*cached: Process, pids: bool = False, clock: FakeClock | None = None) -> tuple[ProcessReconciler,
                                                                                         FakeExecutor]:
    reconciler, executor, _ = setup_with_jobs(*cached, pids=pids, clock=clock)
    return reconciler, executor


def setup_with_jobs(*cached: Process, pids: bool = False,
                    clock: FakeClock | None = None) -> tuple[ProcessReconciler, FakeExecutor, Informer[ObservedJob]]:
    executor = FakeExecutor()
    client = executor.api
    processes: Informer[Process] = Informer(client, PROCESSES, Process)
    jobs: Informer[ObservedJob] = Informer(client, JOBS, ObservedJob)
    handed_out: list[str] = []

    async def allocate(p: Process) -> str:
        assert pids, "no PID expected"
        handed_out.append(f"seph.{len(handed_out) + 1}")
        return handed_out[-1]

    reconciler = ProcessReconciler(client, processes, cast(Executor, executor), allocate, jobs=jobs,
                                   monotonic=clock or FakeClock())
    for p in cached:
        client.seed(PROCESSES, to_wire(p))
        processes.store.apply(WatchEventType.ADDED, p)
    return reconciler, executor, jobs


def releasing_after_its_jobs_started() -> Process:
    """``pr`` in Releasing with one export, its Job applied by an earlier pass (reason ExportsRunning)."""
    started = [{"type": "Ready", "status": "False", "reason": "ExportsRunning", "message": "m",
                "lastTransitionTime": "2025-06-01T11:59:00Z"}]
    return proc("pr", "Releasing", spec={"lifetime": {"ephemeral": {"exports": [MARKER]}}},
                message="m", conditions=started)


def last(executor: FakeExecutor) -> Decision:
    return executor.done[-1][1]


def caught_up(reconciler: ProcessReconciler, executor: FakeExecutor, name: str) -> None:
    """The Process cache shows the status ``executor`` last wrote of ``name`` (its watch delivered it; until
    then the reconciler does not decide on it: docs/runtime.md#own-writes)."""
    live = executor.api.object(PROCESSES, name, "ns")
    assert live is not None
    reconciler.processes.store.apply(WatchEventType.MODIFIED, convert(live, Process))


async def test_a_job_just_applied_counts_as_running_until_the_job_cache_has_it() -> None:
    reconciler, executor = setup(releasing_after_its_jobs_started())
    await reconciler.reconcile(Request("ns", "pr"))
    first = last(executor)
    assert [j.metadata.name for j in first.apply if isinstance(j, Job)] == ["pr-export-0"]
    assert [e.reason for e in first.events] == ["ExportJobLost"]  # a Job gone after it was started

    caught_up(reconciler, executor, "pr")
    await reconciler.reconcile(Request("ns", "pr"))  # the Job cache has not caught up yet
    assert len(executor.done) == 2
    second = last(executor)
    assert second.apply == ()
    assert [e.reason for e in second.events] == []
    assert as_json(second.status)["message"] == "releasing — waiting for 1 export Job(s) (succeeded=0, failed=0)"


async def test_a_job_deleted_before_a_pass_saw_it_cached_is_applied_again_at_once() -> None:
    """The Job cache shows the applied Job and then its deletion, with no pass in between (a watch wakes
    one pass for both): the next pass must not take the deleted Job for a running one."""
    reconciler, executor = setup(releasing_after_its_jobs_started())
    await reconciler.reconcile(Request("ns", "pr"))
    assert [j.metadata.name for j in last(executor).apply if isinstance(j, Job)] == ["pr-export-0"]
    assert reconciler.jobs is not None
    job = convert({"metadata": {"name": "pr-export-0", "namespace": "ns", "uid": "j1",
                                "labels": {"tatara.pleme.io/export-index": "0"},
                                "ownerReferences": [{"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process",
                                                     "name": "pr", "uid": "u-pr", "controller": True}]}},
                  ObservedJob)
    reconciler.jobs.store.apply(WatchEventType.ADDED, job)
    reconciler.jobs.store.apply(WatchEventType.DELETED, job)

    caught_up(reconciler, executor, "pr")
    await reconciler.reconcile(Request("ns", "pr"))
    assert len(executor.done) == 2
    again = last(executor)
    assert [j.metadata.name for j in again.apply if isinstance(j, Job)] == ["pr-export-0"]
    assert [e.reason for e in again.events] == ["ExportJobLost"]


async def test_a_process_just_admitted_holds_its_slot_while_the_cache_still_shows_it_pending() -> None:
    capped = {"lifetime": {"ephemeral": {"maxConcurrent": 1}}}
    older = proc("a", "Pending", created="2025-06-01T11:00:00Z", spec=capped)
    younger = proc("b", "Pending", created="2025-06-01T11:00:05Z", spec=capped)
    reconciler, executor = setup(older, younger, pids=True)
    await reconciler.reconcile(Request("ns", "a"))  # admitted, and on through the phases it passes through
    first = last(executor).transitions[0]
    assert (first.source.value, first.target.value) == ("Pending", "Forking")

    await reconciler.reconcile(Request("ns", "b"))  # "a" is still Pending in the cache
    waiting = last(executor)
    assert waiting.transition is None
    assert as_json(waiting.status)["message"] == "waiting: 1 of maxConcurrent=1 running: ns/a"


def applied_jobs(executor: FakeExecutor) -> list[str | None]:
    return [j.metadata.name for j in last(executor).apply if isinstance(j, Job)]


async def test_a_job_the_cache_never_shows_counts_as_running_for_the_window_then_is_lost_again() -> None:
    """The Job's watch event was lost: the expectation holds for EXPECTATION_SECONDS on the reconciler's
    clock, and after that the cache is believed (the Job is missing, so it is applied again)."""
    clock = FakeClock()
    reconciler, executor = setup(releasing_after_its_jobs_started(), clock=clock)
    await reconciler.reconcile(Request("ns", "pr"))
    assert applied_jobs(executor) == ["pr-export-0"]
    caught_up(reconciler, executor, "pr")  # only the Job's event is lost; the Process cache has our write
    clock.advance(EXPECTATION_SECONDS)  # the window's last moment: still expected
    await reconciler.reconcile(Request("ns", "pr"))
    assert applied_jobs(executor) == []
    caught_up(reconciler, executor, "pr")
    clock.advance(0.1)
    await reconciler.reconcile(Request("ns", "pr"))
    assert applied_jobs(executor) == ["pr-export-0"]
    assert [e.reason for e in last(executor).events] == ["ExportJobLost"]


async def test_an_admission_the_cache_never_shows_holds_the_slot_for_the_window_only() -> None:
    clock = FakeClock()
    capped = {"lifetime": {"ephemeral": {"maxConcurrent": 1}}}
    older = proc("a", "Pending", created="2025-06-01T11:00:00Z", spec=capped)
    younger = proc("b", "Pending", created="2025-06-01T11:00:05Z", spec=capped)
    reconciler, executor = setup(older, younger, pids=True, clock=clock)
    await reconciler.reconcile(Request("ns", "a"))  # admitted; the cache will show "a" Pending throughout
    clock.advance(EXPECTATION_SECONDS)
    await reconciler.reconcile(Request("ns", "b"))
    assert last(executor).transition is None
    assert as_json(last(executor).status)["message"] == "waiting: 1 of maxConcurrent=1 running: ns/a"
    caught_up(reconciler, executor, "b")  # b's own status write reached its cache; a's admission never does
    clock.advance(0.1)  # the window has passed: the cache is believed, "a" is Pending and ahead in line
    await reconciler.reconcile(Request("ns", "b"))
    assert last(executor).transition is None
    assert as_json(last(executor).status)["message"] == "waiting: 0 of maxConcurrent=1 running; ahead in line: ns/a"
