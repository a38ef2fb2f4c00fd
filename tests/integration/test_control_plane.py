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
