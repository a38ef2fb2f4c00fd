"""A child write the API server refuses is surfaced, not only logged (docs/behaviour.md#write-failures):
the reconciler runs as a ServiceAccount whose ClusterRole is the chart's minus the right to write
Kustomizations; the Process keeps its stored phase (Pending: its first pass is folded through Forking and
Execing, and nothing of it is written) with ``Stalled=True`` reason ``WriteRefused`` naming the
Kustomization and the server's 403, one aggregated Warning Event, no crash; once the right is granted
it goes on to Attested and the stall is gone."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from shared.domain.resources import PROCESSES
from shared.kube.client import EVENTS, KubeClient
from tests.e2e.test_rbac import write_kubeconfig
from tests.integration.reconciler.conftest import reconciler_running
from tests.integration.reconciler.test_lifecycle import flux_process, read
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane
from tools.rbac import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, SERVICE_ACCOUNTS

pytestmark = pytest.mark.anyio

RULES = Path(__file__).resolve().parents[3] / "charts" / "tatara-reconciler" / "templates" / "_rules.tpl"


def chart_rules(*, write_kustomizations: bool) -> list[dict[str, Any]]:
    """The chart's rules (``tatara.rules``, ``tatara.clusterRules`` outside its ``if`` blocks, ``tatara.jobRules``)
    in one ClusterRole, Kustomizations read-only unless ``write_kustomizations``."""
    rules: list[dict[str, Any]] = []
    for define in ("tatara.rules", "tatara.clusterRules", "tatara.jobRules"):
        body = re.search(rf'define "{re.escape(define)}" -}}}}\n(.*?)\n{{{{- end }}}}\n(?:\n|$)', RULES.read_text(),
                         re.S)
        assert body is not None, define
        plain = re.sub(r"\{\{- if .*?\{\{- end \}\}\n?", "", body.group(1), flags=re.S)
        rules += yaml.safe_load(plain)
    if not write_kustomizations:
        for rule in rules:
            if rule.get("resources") == ["kustomizations"]:
                rule["verbs"] = ["get", "list", "watch"]
    return rules


def stalled(process: dict[str, Any]) -> dict[str, Any] | None:
    conds = {c["type"]: c for c in process.get("status", {}).get("conditions", [])}
    cond = conds.get("Stalled")
    return cond if cond is not None and cond["status"] == "True" else None


async def test_a_refused_apply_is_a_stall_with_a_warning_and_clears_once_allowed(
        kc: KubeClient, namespace: str, control_plane: LocalControlPlane, tmp_path: Path) -> None:
    name = f"{namespace}-reconciler"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": chart_rules(write_kustomizations=False)}
    await kc.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                       "metadata": {"name": "reconciler"}}, namespace)
    await kc.create(CLUSTER_ROLES, role, None)
    await kc.create(CLUSTER_ROLE_BINDINGS, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "reconciler", "namespace": namespace}]}, None)
    try:
        minted = msgspec.json.decode(await kc.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/reconciler/token",
            body=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": 3600}}).encode()))
        kubeconfig = write_kubeconfig(control_plane.kubeconfig, minted["status"]["token"], tmp_path / "kubeconfig")
        async with await KubeClient.from_kubeconfig(kubeconfig) as as_sa, \
                reconciler_running(as_sa, namespace, flux_client=kc):
            await kc.create(PROCESSES, flux_process("web"), namespace)

            async def refused() -> dict[str, Any] | None:
                process = await read(kc, PROCESSES, "web", namespace)
                return process if stalled(process) else None

            process = await wait_for(refused, timeout=60, what="web Stalled by the refused Kustomization apply")
            cond = stalled(process)
            assert cond is not None
            assert process["status"]["phase"] == "Pending"  # the fold's writes all come after the apply
            assert cond["reason"] == "WriteRefused"
            assert cond["message"].startswith(f"apply Kustomization {namespace}/")
            assert "403" in cond["message"]
            assert f"system:serviceaccount:{namespace}:reconciler" in cond["message"]
            assert cond["observedGeneration"] == process["metadata"]["generation"]
            assert process["status"]["observedGeneration"] == process["metadata"]["generation"]
            assert {c["type"]: c["status"] for c in process["status"]["conditions"]}["Ready"] == "False"

            async def warned() -> list[dict[str, Any]] | None:
                events = msgspec.json.decode(await kc.list(EVENTS, namespace))["items"]
                mine = [e for e in events if e["reason"] == "WriteRefused" and e["type"] == "Warning"
                        and e["involvedObject"]["name"] == "web"]
                return mine or None

            events = await wait_for(warned, timeout=30, what="a WriteRefused Warning Event on web")
            assert len(events) == 1  # repeats are aggregated into one Event's count, not a storm
            assert events[0]["message"] == cond["message"]

            await kc.merge_patch(CLUSTER_ROLES, name, {"rules": chart_rules(write_kustomizations=True)}, None)

            async def attested() -> dict[str, Any] | None:
                process = await read(kc, PROCESSES, "web", namespace)
                return process if process.get("status", {}).get("phase") == "Attested" else None

            done = await wait_for(attested, timeout=120, what="web Attested once Kustomizations may be written")
            assert stalled(done) is None
            assert {c["type"]: c["status"] for c in done["status"]["conditions"]}["Ready"] == "True"
    finally:
        await kc.delete(CLUSTER_ROLE_BINDINGS, name, None)
        await kc.delete(CLUSTER_ROLES, name, None)
