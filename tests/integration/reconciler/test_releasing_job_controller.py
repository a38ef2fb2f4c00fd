"""Releasing against a real Job controller: an export Job whose pods cannot be created says why on the
Process (docs/behaviour.md#releasing).

The session's control plane runs no Job controller (tests finish Jobs themselves) and no ServiceAccount
admission, so this module starts its own: kube-controller-manager with ``job-controller`` and the API
server with the ServiceAccount admission plugin, as a cluster has them. No node is needed: a Job naming a
missing ServiceAccount never gets a pod, and the Job controller says so with a Warning Event
``FailedCreate`` on the Job (``Error creating: pods "<job>-" is forbidden: error looking up service account
…``); with the ServiceAccount there, the pod is created and stays Pending (no scheduler), which is all a
running export Job needs to be here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.domain.resources import JOBS, PROCESSES
from shared.kube.client import EVENTS, NAMESPACES, KubeClient, Resource
from tests.integration.conftest import CHARTS
from tests.integration.reconciler.conftest import NO_HEARTBEAT, reconciler_running
from tests.integration.reconciler.test_lifecycle import read
from tests.integration.reconciler.test_releasing import MARKER, ephemeral, events_of, job_of
from tests.support.kube import install_crds, load_yaml_docs, third_party_crds, wait_for
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ACCOUNT = "exporter"
NS = "releasing-jobs"


@pytest.fixture(scope="module")
def job_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """This module's own plane: the Job controller on, ServiceAccount admission on, every CRD installed."""
    with LocalControlPlane(work_dir=Path(tmp_path_factory.mktemp("job-plane")), extra_controllers=("job-controller",),
                           service_account_admission=True) as plane:
        install_crds(plane.kubeconfig, [*(doc for path in sorted(CHARTS.glob("*/crds/*.yaml"))
                                          for doc in load_yaml_docs(path)), *third_party_crds()])
        yield plane


@pytest.fixture
async def jc(job_plane: LocalControlPlane) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(job_plane.kubeconfig) as client:
        yield client


async def job_events(kc: KubeClient, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = msgspec.json.decode(await kc.list(EVENTS, NS))["items"]
    return [e for e in items if e["involvedObject"]["kind"] == "Job" and e["involvedObject"]["name"] == name]


async def test_an_export_job_that_cannot_create_its_pod_says_why_on_the_process(jc: KubeClient) -> None:
    await jc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    async with reconciler_running(jc, NS, heartbeat_seconds=NO_HEARTBEAT, export_worker_service_account=ACCOUNT):
        await jc.create(PROCESSES, ephemeral("pr", [MARKER]), NS)
        await wait_for(lambda: job_of(jc, NS, "pr-export-0"), timeout=60, what="the export Job")

        # the Job controller's own account of it: a Warning FailedCreate on the Job
        async def failed_create() -> dict[str, Any] | None:
            found = [e for e in await job_events(jc, "pr-export-0") if e["reason"] == "FailedCreate"]
            return found[0] if found else None

        controller = await wait_for(failed_create, timeout=60, what="the Job controller's FailedCreate")
        assert controller["type"] == "Warning"
        assert f'serviceaccount "{ACCOUNT}" not found' in controller["message"]
        expected = (f"releasing — waiting for 1 export Job(s) (succeeded=0, failed=0); "
                    f"export 0 (Job pr-export-0): FailedCreate: {controller['message']}")

        async def says_why() -> dict[str, Any] | None:
            status = (await read(jc, PROCESSES, "pr", NS))["status"]
            ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
            return status if ready.get("reason") == "ExportJobWaiting" else None

        status = await wait_for(says_why, timeout=60, what="the Process to say why its export Job waits")
        assert status["phase"] == "Releasing"
        assert status["message"] == expected
        conditions = {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}
        assert conditions["Ready"] == ("False", "ExportJobWaiting", expected)
        assert conditions["Reconciling"] == ("True", "ExportJobWaiting", expected)  # it can still recover

        # the Job controller retries (its Event's count grows); the Process keeps one Event of its own
        async def retried() -> bool:
            found = await failed_create()
            return found is not None and int(found.get("count") or 1) > int(controller.get("count") or 1)

        await wait_for(retried, timeout=120, what="the Job controller to retry the pod")
        waiting = [e for e in await events_of(jc, NS, "pr") if e["reason"] == "ExportJobWaiting"]
        assert [(e["type"], e["message"], e.get("count", 1)) for e in waiting] == [
            ("Warning", f"export 0 (Job pr-export-0): FailedCreate: {controller['message']}", 1)]

        # the ServiceAccount arrives: the pod is created (Pending: no scheduler), and the reason goes
        await jc.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                           "metadata": {"name": ACCOUNT}}, NS)

        async def running() -> dict[str, Any] | None:
            job = await job_of(jc, NS, "pr-export-0")
            status = (await read(jc, PROCESSES, "pr", NS))["status"]
            active = job is not None and (job.get("status", {}).get("active") or 0) > 0
            return status if active and status["message"] == (
                "releasing — waiting for 1 export Job(s) (succeeded=0, failed=0)") else None

        status = await wait_for(running, timeout=120, what="the pod created and the Process back to ExportsRunning")
        assert next(c for c in status["conditions"] if c["type"] == "Ready")["reason"] == "ExportsRunning"
        assert msgspec.json.decode(await jc.get(JOBS, "pr-export-0", NS))["status"]["active"] == 1
