"""An export Job's pod passes the Pod Security Standards' ``restricted`` profile, as the real API server's
PodSecurity admission judges it (docs/divergences.md#export-pod-security).

The pod is the export Job's template, created with ``dryRun=All`` in a namespace labelled
``pod-security.kubernetes.io/enforce: restricted``: admission runs in full and nothing is stored. The same
template without its security contexts is refused, so the namespace does enforce the profile.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.exports import ExportJobConfig, applicable, export_job
from shared.domain.api.phase import ProcessPhase
from shared.kube.client import NAMESPACES, KubeClient
from shared.kube.errors import Forbidden
from shared.kube.meta import as_json
from tests.unit.reconciler.test_exports import MARKER, process

pytestmark = pytest.mark.anyio

NS = "export-pod-security"


def export_pod() -> dict[str, Any]:
    """A Pod made of export 0's Job template, named as the Job controller would not (no generateName here)."""
    p = process([MARKER])
    (index, export), = applicable(p, ProcessPhase.ATTESTED)
    template = as_json(export_job(p, index, export, owner_uid="u-1", config=ExportJobConfig()))["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "export-0", "namespace": NS, **template["metadata"]}, "spec": template["spec"]}


async def create_dry_run(kc: KubeClient, pod: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = msgspec.json.decode(await kc.request(
        "POST", f"/api/v1/namespaces/{NS}/pods", query={"dryRun": "All"}, body=msgspec.json.encode(pod)))
    return answer


async def test_the_export_pod_is_admitted_where_the_restricted_profile_is_enforced(kc: KubeClient) -> None:
    await kc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": NS, "labels": {"pod-security.kubernetes.io/enforce": "restricted",
                               "pod-security.kubernetes.io/enforce-version": "latest"}}})
    admitted = await create_dry_run(kc, export_pod())
    assert admitted["kind"] == "Pod"
    assert admitted["spec"]["securityContext"]["runAsNonRoot"] is True

    bare = export_pod()
    bare["spec"].pop("securityContext")
    for container in bare["spec"]["containers"]:
        container.pop("securityContext")
    with pytest.raises(Forbidden) as refused:
        await create_dry_run(kc, bare)
    assert 'violates PodSecurity "restricted:latest"' in str(refused.value)
