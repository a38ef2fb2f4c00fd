"""The local control plane is a real Kubernetes API: watch, merge patch, RBAC, CRDs, GC."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.support.kube import api_client, install_crds_async, third_party_crds, wait_for
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

THIRD_PARTY_CRD_NAMES = {
    "helmreleases.helm.toolkit.fluxcd.io",
    "kustomizations.kustomize.toolkit.fluxcd.io",
    "ocirepositories.source.toolkit.fluxcd.io",
    "gitrepositories.source.toolkit.fluxcd.io",
    "helmrepositories.source.toolkit.fluxcd.io",
    "dnsendpoints.externaldns.k8s.io",
}


async def test_a_merge_patch_to_a_configmap_is_seen_by_a_watch(kube: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    created = await core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "demo"}, "data": {"colour": "red"}}
    )
    seen: list[dict[str, Any]] = []

    async def watch_until_blue() -> None:
        w = watch.Watch()
        async with w.stream(
            core.list_namespaced_config_map, namespace,
            resource_version=created.metadata.resource_version, timeout_seconds=30,
        ) as stream:
            async for event in stream:
                seen.append({"type": event["type"], "data": event["object"].data})
                if event["object"].data.get("colour") == "blue":
                    return

    watcher = asyncio.create_task(watch_until_blue())
    await core.patch_namespaced_config_map(
        "demo", namespace, {"data": {"colour": "blue", "size": "xl"}},
        _content_type="application/merge-patch+json",
    )
    await asyncio.wait_for(watcher, timeout=30)

    assert seen[-1] == {"type": "MODIFIED", "data": {"colour": "blue", "size": "xl"}}
    stored = await core.read_namespaced_config_map("demo", namespace)
    assert stored.data == {"colour": "blue", "size": "xl"}


async def test_rbac_denies_an_unprivileged_user_with_403(control_plane: LocalControlPlane, namespace: str) -> None:
    nobody = await api_client(control_plane.kubeconfig_for("nobody", ("tatara:testers",)))
    try:
        with pytest.raises(ApiException) as denied:
            await client.CoreV1Api(nobody).list_namespaced_config_map(namespace)
        assert denied.value.status == 403
        status = json.loads(denied.value.body)
        assert status["reason"] == "Forbidden"
        assert 'User "nobody" cannot list resource "configmaps"' in status["message"]
    finally:
        await nobody.close()


async def test_rbac_allows_what_a_role_binding_grants(
    control_plane: LocalControlPlane, kube: client.ApiClient, namespace: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(kube)
    await rbac.create_namespaced_role(namespace, {
        "metadata": {"name": "cm-reader"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}],
    })
    await rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "reader"}],
    })
    reader = await api_client(control_plane.kubeconfig_for("reader"))
    try:
        listed = await client.CoreV1Api(reader).list_namespaced_config_map(namespace)
        assert listed.items == []
        with pytest.raises(ApiException) as denied:
            await client.CoreV1Api(reader).list_namespaced_secret(namespace)
        assert denied.value.status == 403
    finally:
        await reader.close()


async def test_flux_and_dnsendpoint_crds_become_established(kube: client.ApiClient) -> None:
    docs = third_party_crds()
    assert {d["metadata"]["name"] for d in docs} == THIRD_PARTY_CRD_NAMES
    await install_crds_async(kube, docs)
    crds = await client.ApiextensionsV1Api(kube).list_custom_resource_definition()
    established = {
        crd.metadata.name for crd in crds.items
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])
    }
    assert established >= THIRD_PARTY_CRD_NAMES


async def test_a_helmrelease_can_be_created(kube: client.ApiClient, namespace: str) -> None:
    await install_crds_async(kube, third_party_crds())
    custom = client.CustomObjectsApi(kube)
    body = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "podinfo"},
        "spec": {
            "interval": "5m",
            "chart": {"spec": {"chart": "podinfo", "version": "6.x",
                               "sourceRef": {"kind": "HelmRepository", "name": "podinfo"}}},
            "values": {"replicaCount": 2},
        },
    }
    await custom.create_namespaced_custom_object("helm.toolkit.fluxcd.io", "v2", namespace, "helmreleases", body)
    stored = await custom.get_namespaced_custom_object(
        "helm.toolkit.fluxcd.io", "v2", namespace, "helmreleases", "podinfo")
    assert stored["spec"]["chart"]["spec"]["sourceRef"] == {"kind": "HelmRepository", "name": "podinfo"}
    assert stored["spec"]["values"] == {"replicaCount": 2}


async def test_an_invalid_helmrelease_is_rejected_by_the_schema(kube: client.ApiClient, namespace: str) -> None:
    await install_crds_async(kube, third_party_crds())
    body = {"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "bad"}, "spec": {"interval": 5}}
    with pytest.raises(ApiException) as rejected:
        await client.CustomObjectsApi(kube).create_namespaced_custom_object(
            "helm.toolkit.fluxcd.io", "v2", namespace, "helmreleases", body)
    assert rejected.value.status == 422
    assert "spec.interval" in rejected.value.body


async def test_garbage_collector_deletes_dependents_of_a_deleted_owner(
    kube: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube)
    owner = await core.create_namespaced_config_map(namespace, {"metadata": {"name": f"owner-{uuid.uuid4().hex[:6]}"}})
    await core.create_namespaced_config_map(namespace, {"metadata": {
        "name": "dependent",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
                             "uid": owner.metadata.uid}],
    }})
    await core.delete_namespaced_config_map(owner.metadata.name, namespace)

    async def dependent_gone() -> bool:
        try:
            await core.read_namespaced_config_map("dependent", namespace)
        except ApiException as err:
            return err.status == 404
        return False

    assert await wait_for(dependent_gone, timeout=60, what="garbage collection of the dependent")


async def test_the_audit_log_records_service_account_requests_with_their_answers(
        control_plane: LocalControlPlane, namespace: str, tmp_path: Any) -> None:
    """With ``audit=True`` (the session's plane) every ServiceAccount request is in the audit log, allowed or
    refused, with its verb, resource and code; an admin's requests are not."""
    from shared.kube.client import CONFIG_MAPS, KubeClient
    from shared.kube.errors import Forbidden
    from tests.e2e.test_rbac import ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS, write_kubeconfig
    from tools.controlplane.audit import AuditEvent, parse_events, service_account_user

    assert control_plane.audit
    async with await KubeClient.from_kubeconfig(control_plane.kubeconfig) as admin:
        await admin.create(CONFIG_MAPS, {"metadata": {"name": "seen"}}, namespace)
        await admin.create(SERVICE_ACCOUNTS, {"metadata": {"name": "audited"}}, namespace)
        await admin.create(ROLES, {"metadata": {"name": "audited"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}, namespace)
        await admin.create(ROLE_BINDINGS, {"metadata": {"name": "audited"}, "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "audited"},
            "subjects": [{"kind": "ServiceAccount", "name": "audited", "namespace": namespace}]}, namespace)
        minted = json.loads(await admin.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/audited/token",
            body=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                             "spec": {"expirationSeconds": 600}}).encode()))
    kubeconfig = write_kubeconfig(control_plane.kubeconfig, minted["status"]["token"], tmp_path / "kubeconfig")
    async with await KubeClient.from_kubeconfig(kubeconfig) as sa:
        await sa.get(CONFIG_MAPS, "seen", namespace)
        with pytest.raises(Forbidden):
            await sa.list(CONFIG_MAPS, namespace)
    user = service_account_user(namespace, "audited")

    def ours() -> list[AuditEvent]:
        return [e for e in parse_events(control_plane.audit_log.read_text().splitlines()) if e.user == user]

    async def both() -> list[AuditEvent] | None:
        found = ours()
        return found if len(found) >= 2 else None

    events = await wait_for(both, timeout=30, what="the ServiceAccount's two requests in the audit log")
    got = [(e.verb, e.api_group, e.resource, e.namespace, e.name, e.code, e.decision) for e in events]
    assert got == [("get", "", "configmaps", namespace, "seen", 200, "allow"),
                   ("list", "", "configmaps", namespace, "", 403, "forbid")]
    admin_lines = [e for e in parse_events(control_plane.audit_log.read_text().splitlines())
                   if e.namespace == namespace and not e.user.startswith("system:serviceaccount:")]
    assert admin_lines == []
