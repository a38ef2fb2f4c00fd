"""The audit log reader: events from kube-apiserver's JSON lines, grants from RBAC documents as the RBAC
authorizer applies them, and which grants a set of requests used."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tools.controlplane.audit import (
    AuditEvent,
    Grant,
    authorizes,
    denied,
    grants_of,
    parse_events,
    unexercised,
    watch_list_fallbacks,
)

SA = "system:serviceaccount:sys:ctl"


def line(audit_id: str, stage: str, verb: str, *, ref: dict[str, str] | None = None, uri: str = "/x",
         code: int = 200, decision: str = "allow", user: str = SA, received: str | None = None) -> str:
    doc: dict[str, Any] = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": audit_id,
                           "stage": stage, "requestURI": uri, "verb": verb, "user": {"username": user},
                           "responseStatus": {"metadata": {}, "code": code},
                           "annotations": {"authorization.k8s.io/decision": decision}}
    if ref is not None:
        doc["objectRef"] = ref
    if received is not None:
        doc["requestReceivedTimestamp"] = received
    return json.dumps(doc)


def test_one_event_per_request_the_last_stage_winning() -> None:
    lines = [
        line("a", "ResponseStarted", "watch", ref={"resource": "jobs", "apiGroup": "batch", "namespace": "n"},
             uri="/apis/batch/v1/namespaces/n/jobs?watch=true", code=200),
        line("b", "ResponseComplete", "patch", ref={"resource": "processes", "subresource": "status",
                                                    "apiGroup": "tatara.pleme.io", "namespace": "n", "name": "p"},
             received="2026-12-06T01:02:03.000004Z"),
        "",
        line("a", "ResponseComplete", "watch", ref={"resource": "jobs", "apiGroup": "batch", "namespace": "n"},
             uri="/apis/batch/v1/namespaces/n/jobs?watch=true", code=500),
        line("c", "ResponseComplete", "get", uri="/apis/batch/v1?timeout=32s", code=403, decision="forbid"),
    ]
    assert parse_events(lines) == [
        AuditEvent(SA, "watch", "batch", "jobs", "n", code=500, decision="allow",
                   uri="/apis/batch/v1/namespaces/n/jobs?watch=true"),
        AuditEvent(SA, "patch", "tatara.pleme.io", "processes/status", "n", "p", code=200, decision="allow", uri="/x",
                   received="2026-12-06T01:02:03.000004Z"),
        AuditEvent(SA, "get", path="/apis/batch/v1", code=403, decision="forbid", uri="/apis/batch/v1?timeout=32s"),
    ]


def role(kind: str, name: str, rules: list[dict[str, Any]], namespace: str | None = None) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": kind, "metadata": meta, "rules": rules}


def binding(kind: str, name: str, role_kind: str, role_name: str, namespace: str | None = None,
            subject_ns: str = "sys") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"kind": kind, "metadata": meta, "roleRef": {"kind": role_kind, "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": subject_ns}]}


DOCS = [
    role("ClusterRole", "main", [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "create"]},
        {"nonResourceURLs": ["/apis/*"], "verbs": ["get"]},
    ]),
    role("Role", "lease", [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                            "resourceNames": ["l"], "verbs": ["update"]}], namespace="sys"),
    role("ClusterRole", "unbound", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]),
    binding("RoleBinding", "main", "ClusterRole", "main", namespace="a"),
    binding("ClusterRoleBinding", "main", "ClusterRole", "main"),
    binding("RoleBinding", "lease", "Role", "lease", namespace="sys"),
    binding("RoleBinding", "dangling", "Role", "absent", namespace="a"),
]


def test_grants_of_bindings_as_the_rbac_authorizer_applies_them() -> None:
    got = {(g.namespace, g.api_group, g.resource, g.verb, g.name, g.url, g.binding) for g in grants_of(DOCS)}
    assert got == {
        # the RoleBinding: namespaced resources of its namespace, never non-resource URLs
        ("a", "batch", "jobs", "get", None, "", "RoleBinding/a/main"),
        ("a", "batch", "jobs", "create", None, "", "RoleBinding/a/main"),
        # the ClusterRoleBinding: everywhere, the URL too
        (None, "batch", "jobs", "get", None, "", "ClusterRoleBinding/main"),
        (None, "batch", "jobs", "create", None, "", "ClusterRoleBinding/main"),
        (None, "", "", "get", None, "/apis/*", "ClusterRoleBinding/main"),
        # a Role's resourceNames
        ("sys", "coordination.k8s.io", "leases", "update", "l", "", "RoleBinding/sys/lease"),
    }
    assert {g.user for g in grants_of(DOCS)} == {SA}


JOBS_IN_A = Grant(SA, "a", "batch", "jobs", "create")
JOBS_ANYWHERE = Grant(SA, None, "batch", "jobs", "get")
LEASE = Grant(SA, "sys", "coordination.k8s.io", "leases", "update", "l")
APIS = Grant(SA, None, "", "", "get", url="/apis/*")


@pytest.mark.parametrize(("grant", "event", "expected"), [
    (JOBS_IN_A, AuditEvent(SA, "create", "batch", "jobs", "a"), True),
    (JOBS_IN_A, AuditEvent(SA, "create", "batch", "jobs", "b"), False),  # another namespace
    (JOBS_IN_A, AuditEvent(SA, "create", "batch", "jobs", ""), False),  # across all namespaces
    (JOBS_IN_A, AuditEvent("someone-else", "create", "batch", "jobs", "a"), False),
    (JOBS_IN_A, AuditEvent(SA, "patch", "batch", "jobs", "a", "j", code=201), True),  # apply that created
    (JOBS_IN_A, AuditEvent(SA, "patch", "batch", "jobs", "a", "j", code=200), False),  # apply that updated
    (JOBS_IN_A, AuditEvent(SA, "create", "batch", "jobs/status", "a"), False),  # a subresource is its own
    (JOBS_IN_A, AuditEvent(SA, "create", "", "jobs", "a"), False),  # another group
    (JOBS_ANYWHERE, AuditEvent(SA, "get", "batch", "jobs", "zz", "j"), True),
    (JOBS_ANYWHERE, AuditEvent(SA, "list", "batch", "jobs", ""), False),  # another verb
    (LEASE, AuditEvent(SA, "update", "coordination.k8s.io", "leases", "sys", "l"), True),
    (LEASE, AuditEvent(SA, "update", "coordination.k8s.io", "leases", "sys", "other"), False),
    (APIS, AuditEvent(SA, "get", path="/apis/batch/v1"), True),
    (APIS, AuditEvent(SA, "get", path="/api/v1"), False),
    (Grant(SA, None, "", "", "get", url="/api"), AuditEvent(SA, "get", path="/api"), True),
    (Grant(SA, None, "", "", "get", url="/api"), AuditEvent(SA, "get", path="/api/v1"), False),
    (APIS, AuditEvent(SA, "get", "batch", "jobs", "a"), False),  # a URL grant never covers a resource
    (JOBS_ANYWHERE, AuditEvent(SA, "get", path="/apis/batch/v1"), False),
])
def test_authorizes(grant: Grant, event: AuditEvent, expected: bool) -> None:
    assert authorizes(grant, event) is expected


def test_unexercised_counts_only_allowed_requests_and_denied_names_the_refusals() -> None:
    events = [
        AuditEvent(SA, "create", "batch", "jobs", "a", code=201, decision="allow"),
        AuditEvent(SA, "get", "batch", "jobs", "a", code=403, decision="forbid"),
        AuditEvent(SA, "get", path="/apis/x", code=403, decision="allow"),  # 403 from elsewhere is a refusal too
        AuditEvent("other", "get", "", "secrets", "a", code=403, decision="forbid"),
    ]
    assert unexercised([JOBS_IN_A, JOBS_ANYWHERE, APIS], events) == [JOBS_ANYWHERE, APIS]
    assert denied(events, [SA]) == events[1:3]
    assert denied(events, []) == []


def test_a_request_a_namespaced_grant_covers_does_not_use_the_cluster_wide_one() -> None:
    jobs_everywhere = Grant(SA, None, "batch", "jobs", "create")
    create_in_a = AuditEvent(SA, "create", "batch", "jobs", "a", code=201, decision="allow")
    create_in_b = AuditEvent(SA, "create", "batch", "jobs", "b", code=201, decision="allow")
    # Only a: the RoleBinding's grant is the one needed; the cluster-wide one duplicates it.
    assert unexercised([JOBS_IN_A, jobs_everywhere], [create_in_a]) == [jobs_everywhere]
    # b too: only the cluster-wide grant covers it.
    assert unexercised([JOBS_IN_A, jobs_everywhere], [create_in_a, create_in_b]) == []
    # Without a namespaced grant the cluster-wide one is used by a namespaced request.
    assert unexercised([jobs_everywhere], [create_in_a]) == []


def test_a_list_grant_is_a_watch_list_fallback_only_where_its_watch_twin_allowed_a_watch_list() -> None:
    lists_in_a = Grant(SA, "a", "", "configmaps", "list")
    lists_in_b = Grant(SA, "b", "", "configmaps", "list")
    lists_jobs = Grant(SA, "a", "batch", "jobs", "list")
    gets_in_a = Grant(SA, "a", "", "configmaps", "get")
    streamed = AuditEvent(SA, "watch", "", "configmaps", namespace="a", code=200, decision="allow",
                          uri="/api/v1/namespaces/a/configmaps?allowWatchBookmarks=true&resourceVersionMatch="
                              "NotOlderThan&sendInitialEvents=true&watch=true")
    watched_jobs = AuditEvent(SA, "watch", "batch", "jobs", namespace="a", code=200, decision="allow",
                              uri="/apis/batch/v1/namespaces/a/jobs?resourceVersion=5&watch=true")  # a plain watch
    refused = AuditEvent(SA, "watch", "", "configmaps", namespace="b", code=403, decision="forbid",
                         uri="/api/v1/namespaces/b/configmaps?sendInitialEvents=true&watch=true")
    assert watch_list_fallbacks([lists_in_a, lists_in_b, lists_jobs, gets_in_a], [streamed, watched_jobs, refused]) \
        == [lists_in_a]
