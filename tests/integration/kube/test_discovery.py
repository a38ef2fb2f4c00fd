"""Kinds resolve to resources through the API server's discovery documents."""

from __future__ import annotations

import anyio
import pytest

from shared.kube.client import KubeClient, Resource
from shared.kube.discovery import RESTMapper, UnknownKind
from tests.support.kube import install_crds, widget_crd
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("api_version", "kind", "expected"),
    [
        ("v1", "ConfigMap", Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)),
        ("v1", "Namespace", Resource("", "v1", "namespaces", "Namespace", namespaced=False)),
        ("coordination.k8s.io/v1", "Lease", Resource("coordination.k8s.io", "v1", "leases", "Lease")),
        ("networking.k8s.io/v1", "Ingress", Resource("networking.k8s.io", "v1", "ingresses", "Ingress")),
    ],
    ids=["a core namespaced kind", "a core cluster-scoped kind", "a grouped kind", "an irregular plural"],
)
async def test_builtin_kinds_resolve(kclient: KubeClient, api_version: str, kind: str, expected: Resource) -> None:
    assert await RESTMapper(kclient).resource_for(api_version, kind) == expected


async def test_an_unknown_kind_is_a_clear_error(kclient: KubeClient) -> None:
    with pytest.raises(UnknownKind, match=r"no kind Gizmo in nowhere\.example/v9"):
        await RESTMapper(kclient).resource_for("nowhere.example/v9", "Gizmo")


async def test_a_crd_installed_after_the_first_lookup_is_found(
    private_plane: LocalControlPlane, kclient: KubeClient
) -> None:
    mapper = RESTMapper(kclient)
    widgets, crd = widget_crd("late.tatara.test")
    with pytest.raises(UnknownKind):
        await mapper.resource_for("late.tatara.test/v1", "Widget")
    await anyio.to_thread.run_sync(install_crds, private_plane.kubeconfig, [crd])
    assert await mapper.resource_for("late.tatara.test/v1", "Widget") == widgets
