"""The Job runner stand-in against the real API server with the real ``tatara-export-worker``: it runs an export
Job's container as a local process under a TokenRequest token of the Job's ServiceAccount and writes the status
the Job controller would, which the 1.36 API server's Job-status validation accepts. The stand-in's own
mechanics (a missing ServiceAccount, restarts, concurrency, deletion) use a small ConfigMap writer or sleeper."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
import yaml
from blake3 import blake3

from shared.domain.identity import compose_root
from shared.domain.labels import EXPORT_INDEX, MANAGED_BY, ROLE, ROLE_EXPORT
from shared.domain.resources import JOBS
from shared.kube.client import CONFIG_MAPS, EVENTS, KubeClient
from shared.kube.errors import Invalid, NotFound
from tests.integration.reconciler.test_releasing import gone
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane
from tools.http_receiver import HttpReceiver
from tools.rbac import EXPORT_WORKER, EXPORT_WORKER_RULES, apply_rbac, export_worker_rbac
from tools.standins.jobs import JobRunnerStandIn
from tools.up_exports import LOCAL_EXPORT_WORKER_IMAGE, export_worker_command, export_worker_rbac_docs

pytestmark = pytest.mark.anyio

WRITER = "example.test/configmap-writer:1"
"""An image the tests map to :data:`WRITER_SCRIPT` (args: ConfigMap name, namespace)."""
WRITER_SCRIPT = """
import sys, anyio
from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.errors import ApiError
async def main(name, namespace):
    async with await KubeClient.from_kubeconfig() as kc:
        await kc.apply(CONFIG_MAPS, name, {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "namespace": namespace}, "data": {"by": "job"}},
                       namespace, field_manager="writer")
try:
    anyio.run(main, *sys.argv[1:])
except ApiError as err:
    print(f"refused: {err}", flush=True)
    sys.exit(1)
"""
ENTRYPOINTS = {WRITER: [sys.executable, "-c", WRITER_SCRIPT], LOCAL_EXPORT_WORKER_IMAGE: export_worker_command()}


def export_job(name: str, *, args: Sequence[str] = (), command: Sequence[str] = (), image: str = WRITER,
               account: str = EXPORT_WORKER, backoff_limit: int = 1) -> dict[str, Any]:
    """A Job shaped like the reconciler's export Jobs (labels, one container, backoffLimit)."""
    labels = {MANAGED_BY: "tatara-reconciler", ROLE: ROLE_EXPORT, EXPORT_INDEX: "0"}
    container: dict[str, Any] = {"name": "export", "image": image, "args": list(args)}
    if command:
        container["command"] = list(command)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
            "spec": {"backoffLimit": backoff_limit, "ttlSecondsAfterFinished": 3600,
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "restartPolicy": "Never", "serviceAccountName": account, "containers": [container]}}}}


async def job_status(kc: KubeClient, ns: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = msgspec.json.decode(await kc.get(JOBS, name, ns)).get("status") or {}
    return status


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or ()}


async def finished(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    status = await job_status(kc, ns, name)
    kinds = conditions(status)
    return status if "Complete" in kinds or "Failed" in kinds else None


async def events_of(kc: KubeClient, ns: str, name: str) -> list[dict[str, Any]]:
    items = msgspec.json.decode(await kc.list(EVENTS, ns, field_selector=f"involvedObject.name={name}"))["items"]
    return list(items)


@asynccontextmanager
async def stand_in(kc: KubeClient, plane: LocalControlPlane, ns: str, logs: Path,
                   entrypoints: dict[str, list[str]] | None = None) -> AsyncIterator[JobRunnerStandIn]:
    runner = JobRunnerStandIn(kc, server=plane.server, ca_file=plane.ca_file, logs=logs, namespace=ns,
                              entrypoints=ENTRYPOINTS if entrypoints is None else entrypoints, retry_base=0.2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run)
        yield runner
        tg.cancel_scope.cancel()


def worker_args(spec: dict[str, Any], namespace: str, process: str, index: int) -> list[str]:
    """The export worker's arguments as the reconciler writes them on an export Job."""
    return ["--spec", json.dumps(spec, separators=(",", ":")), "--process-namespace", namespace,
            "--process-name", process, "--receipt-configmap", f"{process}-export-{index}-receipt"]


async def receipt(kc: KubeClient, ns: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The receipt ConfigMap ``name`` and its parsed ``receipt.yaml``."""
    cm = msgspec.json.decode(await kc.get(CONFIG_MAPS, name, ns))
    return cm, yaml.safe_load(cm["data"]["receipt.yaml"])


async def test_the_real_worker_runs_with_the_charts_rbac_ships_to_stdout_and_the_job_completes(
    kc: KubeClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path, helm: Path
) -> None:
    docs, source = export_worker_rbac_docs([namespace], helm=helm)
    assert source.startswith("from the chart"), source
    await apply_rbac(kc, docs)
    spec = {"source": {"runMarker": {"labels": {"suite": "smoke"}}}, "channel": {"stdout": {"pretty": False}}}
    async with stand_in(kc, control_plane, namespace, tmp_path) as runner:
        await kc.create(JOBS, export_job("proc-export-0", image=LOCAL_EXPORT_WORKER_IMAGE,
                                         args=worker_args(spec, namespace, "proc", 0)), namespace)
        status = await wait_for(lambda: finished(kc, namespace, "proc-export-0"), timeout=90,
                                what="the Job to finish")

        async def completed_event() -> bool:
            return "Completed" in {e["reason"] for e in await events_of(kc, namespace, "proc-export-0")}

        # the Event follows the status write: wait for it while the stand-in still runs
        await wait_for(completed_event, what="the Completed Event")
    cm, envelope = await receipt(kc, namespace, "proc-export-0-receipt")
    # Written by the worker under the ServiceAccount's token (the API server records who applied it).
    assert {f["manager"] for f in cm["metadata"]["managedFields"]} == {"tatara-export-worker"}
    assert (envelope["kind"], envelope["evidence"]["outcome"]) == ("tatara.export", "Shipped")
    # The event the worker printed is in the Job's log, and the receipt's hashes are those of its bytes.
    log = runner.log_file(namespace, "proc-export-0").read_text()
    (line,) = [ln for ln in log.splitlines() if ln.startswith("{") and '"run_id"' in ln]
    event = json.loads(line)
    assert (event["run_id"], event["labels"]) == (f"{namespace}/proc", {"run_id": f"{namespace}/proc",
                                                                       "suite": "smoke"})
    assert envelope["artifact_hash"] == blake3(line.encode()).hexdigest()
    assert envelope["composed_root"] == compose_root(envelope["artifact_hash"], envelope["control_hash"] or None,
                                                     envelope["intent_hash"], None)
    kinds = conditions(status)
    assert set(kinds) == {"SuccessCriteriaMet", "Complete"}
    assert {c["reason"] for c in kinds.values()} == {"CompletionsReached"}
    assert kinds["Complete"]["message"] == "Reached expected number of succeeded pods"
    assert (status["succeeded"], status.get("active", 0), status.get("failed", 0)) == (1, 0, 0)
    assert status["startTime"] <= status["completionTime"]
    assert runner.runs == 1


async def warning_events(kc: KubeClient, namespace: str, name: str) -> list[dict[str, Any]] | None:
    """The Warning Events about ``name``, or None while there are none."""
    return [e for e in await events_of(kc, namespace, name) if e["type"] == "Warning"] or None


async def test_an_export_the_receiver_rejects_is_retried_per_backoff_limit_then_failed(
    kc: KubeClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path, helm: Path
) -> None:
    await apply_rbac(kc, export_worker_rbac_docs([namespace], helm=helm)[0])
    async with HttpReceiver(status=500) as receiver:
        spec = {"source": {"runMarker": {}},
                "channel": {"httpEvent": {"endpoint": f"{receiver.url}/events", "signalType": "marker"}}}
        async with stand_in(kc, control_plane, namespace, tmp_path) as runner:
            await kc.create(JOBS, export_job("proc-export-1", image=LOCAL_EXPORT_WORKER_IMAGE, backoff_limit=1,
                                             args=worker_args(spec, namespace, "proc", 1)), namespace)
            status = await wait_for(lambda: finished(kc, namespace, "proc-export-1"), timeout=90,
                                    what="the Job to fail")
            # the Event follows the status write that failed the Job: wait for it while the stand-in runs
            warnings = await wait_for(lambda: warning_events(kc, namespace, "proc-export-1"),
                                      what="the Warning Event")
        assert len(receiver.requests) == 2, "one POST per run: the first run and its one retry"
        assert {r.header("X-Tatara-Signal-Type") for r in receiver.requests} == {"marker"}
    kinds = conditions(status)
    assert set(kinds) == {"FailureTarget", "Failed"}
    assert {c["reason"] for c in kinds.values()} == {"BackoffLimitExceeded"}
    assert kinds["Failed"]["message"] == "Job has reached the specified backoff limit"
    assert (status["failed"], status.get("active", 0), status.get("succeeded", 0)) == (2, 0, 0)
    assert "completionTime" not in status
    assert runner.runs == 2
    _, envelope = await receipt(kc, namespace, "proc-export-1-receipt")
    assert envelope["evidence"]["outcome"] == "Rejected"
    assert envelope["evidence"]["error"].startswith("HTTP 500")
    assert [e["reason"] for e in warnings] == ["BackoffLimitExceeded"]


async def test_a_service_account_without_rbac_is_refused_so_the_token_is_really_the_accounts(
    kc: KubeClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> None:
    bare = [doc for doc in export_worker_rbac(namespace, "no-rights") if doc["kind"] == "ServiceAccount"]
    await apply_rbac(kc, bare)
    spec: dict[str, Any] = {"source": {"runMarker": {}}, "channel": {"stdout": {}}}
    async with stand_in(kc, control_plane, namespace, tmp_path) as runner:
        await kc.create(JOBS, export_job("proc-export-2", image=LOCAL_EXPORT_WORKER_IMAGE, account="no-rights",
                                         backoff_limit=0, args=worker_args(spec, namespace, "proc", 2)), namespace)
        status = await wait_for(lambda: finished(kc, namespace, "proc-export-2"), timeout=90, what="the Job to fail")
    assert "Failed" in conditions(status)
    log = runner.log_file(namespace, "proc-export-2").read_text()
    assert f"system:serviceaccount:{namespace}:no-rights" in log, log
    assert "forbidden" in log.lower(), log
    with pytest.raises(NotFound):
        await kc.get(CONFIG_MAPS, "proc-export-2-receipt", namespace)


async def test_a_missing_service_account_leaves_the_job_waiting_with_failed_create_until_it_exists(
    kc: KubeClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> None:
    async with stand_in(kc, control_plane, namespace, tmp_path) as runner:
        await kc.create(JOBS, export_job("waits", args=["waits-receipt", namespace]), namespace)

        async def failed_create() -> bool:
            return any(e["reason"] == "FailedCreate" for e in await events_of(kc, namespace, "waits"))

        await wait_for(failed_create, timeout=30, what="a FailedCreate Event")
        (event,) = [e for e in await events_of(kc, namespace, "waits") if e["reason"] == "FailedCreate"]
        assert event["type"] == "Warning"
        assert f'serviceaccount "{EXPORT_WORKER}" not found' in event["message"]
        assert runner.runs == 0
        assert await job_status(kc, namespace, "waits") == {}
        await apply_rbac(kc, export_worker_rbac(namespace))
        status = await wait_for(lambda: finished(kc, namespace, "waits"), timeout=90, what="the Job to run")
    assert "Complete" in conditions(status)


async def test_a_restarted_stand_in_never_reruns_a_finished_job_and_counts_a_lost_run_as_failed(
    kc: KubeClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> None:
    await apply_rbac(kc, export_worker_rbac(namespace))
    async with stand_in(kc, control_plane, namespace, tmp_path) as first:
        await kc.create(JOBS, export_job("done", args=["done-receipt", namespace]), namespace)
        await wait_for(lambda: finished(kc, namespace, "done"), timeout=60, what="the Job to finish")
    assert first.runs == 1
    # A Job the previous stand-in had started (active) but never saw end.
    await kc.create(JOBS, export_job("lost", args=["lost-receipt", namespace], backoff_limit=0), namespace)
    await kc.merge_patch(JOBS, "lost", {"status": {"startTime": "2026-01-01T00:00:00Z", "active": 1}}, namespace,
                         subresource="status")
    async with stand_in(kc, control_plane, namespace, tmp_path) as second:
        status = await wait_for(lambda: finished(kc, namespace, "lost"), timeout=60, what="the lost Job to fail")
        marker = export_job("marker", args=["marker-receipt", namespace])
        await kc.create(JOBS, marker, namespace)
        await wait_for(lambda: finished(kc, namespace, "marker"), timeout=60, what="a later Job to finish")
    assert second.runs == 1, "the finished Job was run again, or the lost one was retried past its backoffLimit"
    assert status["failed"] == 1
    assert conditions(status)["Failed"]["reason"] == "BackoffLimitExceeded"


async def test_jobs_run_concurrently_and_a_job_deleted_mid_run_has_its_process_stopped(
    kc: KubeClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> None:
    await apply_rbac(kc, export_worker_rbac(namespace))
    gate = tmp_path / "gate"
    # Each run announces itself, then waits until the gate file exists: two runs at once open the gate.
    script = ("import pathlib, sys, time\n"
              f"pathlib.Path({str(tmp_path)!r}, sys.argv[1]).touch()\n"
              f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.05)\n")
    wait = [sys.executable, "-c", script]
    async with stand_in(kc, control_plane, namespace, tmp_path / "logs") as runner:
        for name in ("one", "two", "stuck"):
            await kc.create(JOBS, export_job(name, command=wait if name != "stuck" else
                                             [sys.executable, "-c", "import signal; signal.pause()"],
                                             args=[name] if name != "stuck" else []), namespace)
        async def both_running() -> bool:
            return all((tmp_path / n).exists() for n in ("one", "two"))

        await wait_for(both_running, timeout=60, what="both runs to be running at once")
        gate.touch()
        for name in ("one", "two"):
            await wait_for(partial(finished, kc, namespace, name), timeout=60, what=f"Job {name}")

        async def stuck_active() -> bool:
            return bool((await job_status(kc, namespace, "stuck")).get("ready"))

        await wait_for(stuck_active, timeout=30, what="the stuck Job's process to be up")
        await kc.delete(JOBS, "stuck", namespace, propagation_policy="Background")
        async def stopped() -> bool:
            return not runner.running_jobs

        await wait_for(stopped, timeout=30, what="the deleted Job's process to stop")


async def test_a_run_whose_job_was_deleted_is_not_counted_against_a_new_job_of_the_same_name(
    kc: KubeClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The reconciler recreates a deleted export Job under the same name at once (ExportJobLost): the old
    run, ending after that, must not write its failure onto the new Job (a real Job's pods belong to its UID)."""
    await apply_rbac(kc, export_worker_rbac(namespace))
    up, release = tmp_path / "up", tmp_path / "release"
    # ignores SIGTERM until released, then fails: its end comes after the new Job exists
    holdout = ("import pathlib, signal, sys, time\n"
               "signal.signal(signal.SIGTERM, lambda *_: None)\n"
               f"pathlib.Path({str(up)!r}).touch()\n"
               f"while not pathlib.Path({str(release)!r}).exists(): time.sleep(0.05)\n"
               "sys.exit(1)\n")
    async with stand_in(kc, control_plane, namespace, tmp_path / "logs") as runner:
        await kc.create(JOBS, export_job("again", command=[sys.executable, "-c", holdout]), namespace)

        async def holdout_up() -> bool:
            return up.exists()

        await wait_for(holdout_up, timeout=60, what="the first Job's process to be up")
        await kc.delete(JOBS, "again", namespace, propagation_policy="Background")
        await wait_for(partial(gone, kc, JOBS, "again", namespace), timeout=30, what="the first Job to be deleted")
        await kc.create(JOBS, export_job("again", command=[sys.executable, "-c", "pass"]), namespace)
        release.touch()
        status = await wait_for(partial(finished, kc, namespace, "again"), timeout=60, what="the second Job")
        assert "Complete" in conditions(status)
        assert "failed" not in status, status
        assert status["succeeded"] == 1
        assert runner.runs == 2


async def test_the_api_server_refuses_a_complete_job_without_success_criteria_met(
    kc: KubeClient, namespace: str
) -> None:
    """Why the stand-in writes the interim condition first: 1.36 validates Job status transitions."""
    await kc.create(JOBS, export_job("strict", args=["x", namespace]), namespace)
    now = "2026-01-01T00:00:00Z"
    complete = {"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "m",
                "lastProbeTime": now, "lastTransitionTime": now}
    with pytest.raises(Invalid, match="SuccessCriteriaMet"):
        await kc.merge_patch(JOBS, "strict", {"status": {"startTime": now, "succeeded": 1, "completionTime": now,
                                                         "conditions": [complete]}}, namespace,
                             subresource="status")
    failed = {**complete, "type": "Failed", "reason": "BackoffLimitExceeded"}
    with pytest.raises(Invalid, match="FailureTarget"):
        await kc.merge_patch(JOBS, "strict", {"status": {"startTime": now, "failed": 1, "conditions": [failed]}},
                             namespace, subresource="status")



def test_the_hand_written_export_worker_rules_are_the_charts(helm: Path) -> None:
    """``tatara up`` falls back to tools/rbac.py without helm: the same rules as the chart's ClusterRole."""
    docs, _ = export_worker_rbac_docs(["ns"], helm=helm)
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    assert sorted(map(str, role["rules"])) == sorted(map(str, EXPORT_WORKER_RULES))
    assert {d["kind"] for d in export_worker_rbac("ns")} == {"ServiceAccount", "Role", "RoleBinding"}


async def test_a_command_that_cannot_start_is_a_failed_run(
    kc: KubeClient, control_plane: LocalControlPlane, namespace: str, tmp_path: Path
) -> None:
    await apply_rbac(kc, export_worker_rbac(namespace))
    async with stand_in(kc, control_plane, namespace, tmp_path) as runner:
        await kc.create(JOBS, export_job("missing", command=[str(tmp_path / "no-such-binary")], backoff_limit=0),
                        namespace)
        status = await wait_for(lambda: finished(kc, namespace, "missing"), timeout=60, what="the Job to fail")
    assert conditions(status)["Failed"]["reason"] == "BackoffLimitExceeded"
    assert status["failed"] == 1
    assert "cannot start" in runner.log_file(namespace, "missing").read_text()
