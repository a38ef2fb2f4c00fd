"""RBAC documents the local tooling puts on a cluster: applying them, and the export worker's by hand.

``tatara up`` gives the example namespaces the ServiceAccount the reconciler names in its export Jobs
(``--export-worker-service-account``, default ``tatara-export-worker``) bound to the export worker's rules
(docs/architecture.md#tatara-up): from the reconciler chart when helm renders it, else the documents here —
a Role with the chart's rules (read the Process it exports, read ConfigMaps for a test report and the
receipts collected by annotation, create / server-side apply its receipt ConfigMap, write an Event).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from shared.domain.group import GROUP
from shared.kube.client import KubeClient, Resource

SERVICE_ACCOUNTS: Final = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES: Final = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS: Final = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES: Final = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS: Final = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings",
                                        "ClusterRoleBinding", namespaced=False)
RBAC_KINDS: Final = {"ServiceAccount": SERVICE_ACCOUNTS, "Role": ROLES, "ClusterRole": CLUSTER_ROLES,
                     "RoleBinding": ROLE_BINDINGS, "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS}
"""RBAC kinds, in the order they are applied (the subject first)."""

EXPORT_WORKER: Final = "tatara-export-worker"
"""Default name of the export worker's ServiceAccount, Role and RoleBinding."""
FIELD_MANAGER: Final = "tatara-up"

EXPORT_WORKER_RULES: Final = (
    {"apiGroups": [GROUP], "resources": ["processes"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
)
"""What the export worker does: GET its Process; GET a test report's ConfigMap and LIST the namespace's
ConfigMaps for receipts; server-side apply its receipt ConfigMap (a PATCH that may create it); an Event on
the Process about the outcome (created, or patched on a repeat)."""


def export_worker_rbac(namespace: str, name: str = EXPORT_WORKER,
                       rules: Iterable[dict[str, Any]] = EXPORT_WORKER_RULES) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding ``name`` in ``namespace`` granting ``rules``."""
    meta = {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "tatara"}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": list(rules)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
    ]


async def apply_rbac(client: KubeClient, docs: Iterable[dict[str, Any]]) -> None:
    """Server-side apply each RBAC document (ServiceAccount, Role, RoleBinding, ClusterRole,
    ClusterRoleBinding), in the given order.

    Raises:
        KeyError: a document of another kind.
        shared.kube.errors.ApiError: the API server refused one.
    """
    for doc in docs:
        resource = RBAC_KINDS[doc["kind"]]
        meta = doc["metadata"]
        namespace = meta.get("namespace") if resource.namespaced else None
        await client.apply(resource, meta["name"], doc, namespace, field_manager=FIELD_MANAGER)
