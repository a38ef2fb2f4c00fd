"""kube-apiserver's audit log, read back: which grants of a set of RBAC objects the requests used, and which
requests were refused.

The local plane writes the log with :data:`SERVICE_ACCOUNT_POLICY` (``LocalControlPlane(audit=True)``). Pure
functions over parsed data:

- :func:`parse_events`: the log's JSON lines → :class:`AuditEvent`, one per request (a long-running
  request's ``ResponseStarted`` line is superseded by its ``ResponseComplete`` one);
- :func:`grants_of`: RBAC documents (ClusterRoles, Roles, their bindings) → every :class:`Grant` they give a
  subject, one per (scope, API group, resource, verb, name): a ClusterRoleBinding's rules apply everywhere, a
  RoleBinding's to namespaced resources of its namespace only (and never to non-resource URLs), as the RBAC
  authorizer reads them;
- :func:`authorizes`: whether a grant covers an event. A server-side apply that made the object (a ``patch``
  answered ``201 Created``) is also authorized as ``create``: the API server checks both verbs;
- :func:`unexercised`: the grants no event used (a request a RoleBinding covers does not count for a
  cluster-wide grant too); :func:`denied`: the events RBAC refused;
- :func:`watch_list_fallbacks`: of some unused grants, the ``list`` ones an informer needs only to fall back to
  a LIST, because it streamed its state with a watch-list (a ``watch`` with ``sendInitialEvents=true``) that the
  same scope's ``watch`` grant allowed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

SERVICE_ACCOUNT_POLICY: Final[dict[str, Any]] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts"]},
        {"level": "None"},
    ],
}
"""Every request of a ServiceAccount at ``Metadata`` (user, verb, object reference, answer code, the
authorizer's decision), nothing else."""

_DECISION: Final = "authorization.k8s.io/decision"


@dataclass(frozen=True)
class AuditEvent:
    """One request as the audit log records it.

    ``resource`` includes the subresource (``processes/status``); ``path`` is set for a non-resource request
    (``/apis/batch/v1``) and ``resource`` is then empty. ``namespace`` is empty for a cluster-scoped object or a
    request across all namespaces. ``code`` is the HTTP status of the answer (0 when none was recorded).
    """

    user: str
    verb: str
    api_group: str = ""
    resource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    code: int = 0
    decision: str = ""
    uri: str = ""
    received: str = ""
    """``requestReceivedTimestamp``: when the API server received the request (RFC 3339, microseconds)."""


@dataclass(frozen=True)
class Grant:
    """One verb on one resource (or non-resource URL) for ``user``, where a binding applies it.

    ``namespace`` None: everywhere (a ClusterRoleBinding); else that namespace only (a RoleBinding). ``name``
    None: any object; else only the object of that name (``resourceNames``). ``url`` is set for a
    non-resource grant (a trailing ``*`` matches any suffix) and ``resource`` is then empty.
    """

    user: str
    namespace: str | None
    api_group: str
    resource: str
    verb: str
    name: str | None = None
    url: str = ""
    binding: str = ""
    """``<kind>/<namespace>/<name>`` of the binding that gives it (for messages)."""

    def describe(self) -> str:
        where = "cluster-wide" if self.namespace is None else f"in {self.namespace}"
        what = self.url or f"{self.api_group or 'core'}/{self.resource}" + (f" {self.name!r}" if self.name else "")
        return f"{self.verb} {what} {where} ({self.binding})"


def parse_events(lines: Iterable[str]) -> list[AuditEvent]:
    """The events of an audit log's JSON lines, one per request (by ``auditID``, the last stage wins), in the
    order their requests first appear. Blank lines are skipped.

    Raises:
        json.JSONDecodeError: a line is not JSON.
    """
    by_id: dict[str, AuditEvent] = {}
    for line in lines:
        if not line.strip():
            continue
        doc = json.loads(line)
        ref = doc.get("objectRef") or {}
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        uri = str(doc.get("requestURI", ""))
        event = AuditEvent(
            user=str((doc.get("user") or {}).get("username", "")),
            verb=str(doc.get("verb", "")),
            api_group=str(ref.get("apiGroup", "")),
            resource=resource,
            namespace=str(ref.get("namespace", "")),
            name=str(ref.get("name", "")),
            path="" if ref else uri.split("?", 1)[0],
            code=int((doc.get("responseStatus") or {}).get("code", 0)),
            decision=str((doc.get("annotations") or {}).get(_DECISION, "")),
            uri=uri,
            received=str(doc.get("requestReceivedTimestamp", "")),
        )
        by_id[str(doc.get("auditID", len(by_id)))] = event
    return list(by_id.values())


def service_account_user(namespace: str, name: str) -> str:
    """The user name a ServiceAccount's token authenticates as."""
    return f"system:serviceaccount:{namespace}:{name}"


def _subjects(binding: Mapping[str, Any]) -> list[str]:
    out = []
    for subject in binding.get("subjects") or []:
        if subject.get("kind") == "ServiceAccount":
            out.append(service_account_user(subject.get("namespace") or binding["metadata"].get("namespace", ""),
                                            subject["name"]))
        elif subject.get("kind") == "User":
            out.append(subject["name"])
    return out


def grants_of(docs: Iterable[Mapping[str, Any]]) -> list[Grant]:
    """Every grant the bindings among ``docs`` give their subjects, from the ClusterRoles and Roles among
    ``docs`` (a binding to a role not in ``docs`` gives nothing here). Sorted, without duplicates."""
    docs = list(docs)
    roles = {(d["kind"], d["metadata"].get("namespace") if d["kind"] == "Role" else None, d["metadata"]["name"]): d
             for d in docs if d.get("kind") in ("ClusterRole", "Role")}
    out: set[Grant] = set()
    for binding in docs:
        kind = binding.get("kind")
        if kind not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        namespace = binding["metadata"].get("namespace") if kind == "RoleBinding" else None
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else None, ref["name"]))
        if role is None:
            continue
        label = f"{kind}/{namespace or ''}/{binding['metadata']['name']}".replace("//", "/")
        for user in _subjects(binding):
            for rule in role.get("rules") or []:
                for verb in rule.get("verbs") or []:
                    for url in rule.get("nonResourceURLs") or []:
                        if namespace is None:  # a RoleBinding never grants non-resource URLs
                            out.add(Grant(user, None, "", "", verb, url=url, binding=label))
                    for group in rule.get("apiGroups") or []:
                        for resource in rule.get("resources") or []:
                            for name in rule.get("resourceNames") or [None]:
                                out.add(Grant(user, namespace, group, resource, verb, name, binding=label))
    return sorted(out, key=lambda g: (g.user, g.namespace or "", g.api_group, g.resource, g.verb, g.name or "",
                                      g.url, g.binding))


def _verbs(event: AuditEvent) -> set[str]:
    # A server-side apply that made the object was authorized as create too.
    return {event.verb, "create"} if event.verb == "patch" and event.code == 201 else {event.verb}


def authorizes(grant: Grant, event: AuditEvent) -> bool:
    """True when ``grant`` allows ``event``'s request (``event.user`` included)."""
    if grant.user != event.user or grant.verb not in _verbs(event):
        return False
    if grant.url or event.path:
        if not (grant.url and event.path):
            return False
        return event.path.startswith(grant.url[:-1]) if grant.url.endswith("*") else event.path == grant.url
    if grant.api_group != event.api_group or grant.resource != event.resource:
        return False
    if grant.namespace is not None and grant.namespace != event.namespace:
        return False
    return grant.name is None or grant.name == event.name


def allowed(event: AuditEvent) -> bool:
    """The request passed authorization (the authorizer said allow and the answer was not 403)."""
    return event.decision != "forbid" and event.code != 403


def unexercised(grants: Iterable[Grant], events: Iterable[AuditEvent]) -> list[Grant]:
    """The grants no allowed event used, in the order given.

    An event several grants authorize uses the narrowest only: those of a RoleBinding when one covers it, else
    the cluster-wide ones. A cluster-wide grant that only ever duplicates a namespaced one is not needed.
    """
    grants = list(grants)
    used: set[int] = set()
    for event in (e for e in events if allowed(e)):
        covering = [i for i, g in enumerate(grants) if authorizes(g, event)]
        narrow = [i for i in covering if grants[i].namespace is not None]
        used.update(narrow or covering)
    return [g for i, g in enumerate(grants) if i not in used]


def is_watch_list(event: AuditEvent) -> bool:
    """The request was a watch-list: a ``watch`` asking for its initial state (``sendInitialEvents=true``)."""
    query = parse_qs(urlsplit(event.uri).query)
    return event.verb == "watch" and query.get("sendInitialEvents") == ["true"]


def watch_list_fallbacks(grants: Iterable[Grant], events: Iterable[AuditEvent]) -> list[Grant]:
    """The ``list`` grants of ``grants`` whose ``watch`` twin (same user, scope, group, resource) allowed a
    watch-list: an informer that streams its state sends no LIST, yet needs ``list`` to fall back to one when an
    API server refuses watch-lists (docs/runtime.md#informer). Other grants are not returned."""
    streamed = [e for e in events if allowed(e) and is_watch_list(e)]
    return [g for g in grants if g.verb == "list"
            and any(authorizes(replace(g, verb="watch"), e) for e in streamed)]


def denied(events: Iterable[AuditEvent], users: Iterable[str]) -> list[AuditEvent]:
    """The events of ``users`` that RBAC refused."""
    wanted = set(users)
    return [e for e in events if e.user in wanted and not allowed(e)]
