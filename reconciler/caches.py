"""What the Process controller's caches hold and how it reads them (docs/architecture.md#one-reconcile):
the cached child types, the names and functions of the informers' indices, the event predicates, and
the read-only views of the caches an :class:`~reconciler.decision.Observed` snapshot carries.

All pure: no I/O; :mod:`reconciler.controller` wires them onto its informers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import msgspec

from reconciler.concurrency import concurrency_key
from reconciler.dependencies import depends_on_refs
from reconciler.routing import STABLE, served_hosts
from shared.domain import labels
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.api.table import ClaimRecord, ProcessTable
from shared.domain.manifests.batch import ObservedJob
from shared.kube.client import Resource
from shared.kube.informer import Informer, WatchEventType
from shared.kube.meta import ObjectMeta

__all__ = [
    "CLAIM_APP",
    "CLAIM_KEY",
    "CONCURRENCY",
    "DEPENDS_ON",
    "OWNER_UID",
    "OWN_PID",
    "OWN_SEQUENCE",
    "PARENT_PID",
    "STABLE_HOST",
    "CacheView",
    "ChildObject",
    "PidView",
    "RouteView",
    "RoutingChildObject",
    "child_document",
    "claim_apps",
    "claims_moved",
    "claims_of",
    "concurrency_group",
    "controller_owner_uids",
    "dependency_refs",
    "leaves_slot",
    "own_pid",
    "own_sequence",
    "parent_pid",
    "route_gone",
    "stable_hosts",
]

OWNER_UID = "owner-uid"
"""Index of children by their controller ownerReference's UID."""

PARENT_PID = "parent-pid"
"""Index of Processes by ``spec.identity.parent``."""

OWN_PID = "pid"
"""Index of Processes by their own ``status.pid``."""

OWN_SEQUENCE = "sequence"
"""Index of Processes by the sequence number of their own ``status.pid`` (its last segment): two entries
under one key are the reference's duplicates (docs/migration.md#duplicate-pids)."""

CLAIM_KEY = "claim-key"
"""Index of Processes by each claims key (``<cluster>/<app>``) they bid for."""

CLAIM_APP = "claim-app"
"""Index of Processes by the ``app`` of each hostname whose stable name they bid for."""

STABLE_HOST = "stable-host"
"""Index of stable routing children (Ingress, DNSEndpoint) by the host names they serve."""

DEPENDS_ON = "depends-on"
"""Index of Processes by the ``<ns>/<name>`` of each Process their ``spec.dependsOn`` names."""

CONCURRENCY = "concurrency-key"
"""Index of Processes by their ``maxConcurrent`` group (:func:`~reconciler.concurrency.concurrency_key`)."""

class ChildObject(msgspec.Struct):
    """A rendered child as cached: identity, metadata and status — what readiness parsing reads.

    ``spec`` is not kept: HelmRelease values can be large, and the desired spec is re-rendered
    from the Process anyway."""

    apiVersion: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    status: dict[str, object] = {}


class RoutingChildObject(ChildObject):
    """A routing child (Ingress, DNSEndpoint) as cached, ``spec`` included: small, and compared with the
    render to notice a hand edit (:func:`reconciler.routing.drift`)."""

    spec: dict[str, object] = {}


def claims_of(table: ProcessTable | None) -> Mapping[str, ClaimRecord]:
    """The stored ``status.claims`` of ``table`` (none for a missing table or status)."""
    return table.status.claims if table is not None and table.status is not None else {}


def claims_moved(event: WatchEventType, old: ProcessTable | None, new: ProcessTable) -> bool:
    """Keep a table event only when its ``status.claims`` changed (adds and deletes always)."""
    return event is not WatchEventType.MODIFIED or claims_of(old) != claims_of(new)


def child_document(resource: Resource, child: ChildObject) -> dict[str, object]:
    """``child`` as JSON data with the ``apiVersion`` and ``kind`` of the ``resource`` its informer lists.

    The API server leaves both out of the items of a LIST of a built-in kind (an Ingress cached from
    the informer's list has neither; one from a watch event has both), so they come from the resource."""
    doc: dict[str, object] = msgspec.to_builtins(child)
    doc["apiVersion"], doc["kind"] = resource.api_version, resource.kind
    return doc


def stable_hosts(child: ChildObject) -> list[str]:
    """The hosts a cached stable routing child (label ``routing-form: stable``) serves; none for others."""
    if child.metadata.labels.get(labels.ROUTING_FORM) != STABLE:
        return []
    return served_hosts(child.spec) if isinstance(child, RoutingChildObject) else []


def route_gone(event: WatchEventType, old: ChildObject | None, new: ChildObject) -> bool:
    """Keep what a new holder's stable pair waits for: the deletion of a routing child, or a change of the
    stable hosts one serves (a host it stops serving is free)."""
    if event is WatchEventType.DELETED:
        return True
    return event is WatchEventType.MODIFIED and old is not None and stable_hosts(old) != stable_hosts(new)


def claim_apps(process: Process) -> list[str]:
    routing = process.spec.routing
    if routing is None or not routing.stable_name_claim:
        return []
    return sorted({host.app for host in routing.hostnames})


def controller_owner_uids(obj: ChildObject | ObservedJob) -> list[str]:
    """UIDs of ``obj``'s controller ownerReferences (a rendered child has exactly one)."""
    return [ref.uid for ref in obj.metadata.owner_references if ref.controller]


def dependency_refs(process: Process) -> list[str]:
    return depends_on_refs(process)


def own_pid(process: Process) -> list[str]:
    pid = process.status.pid if process.status else None
    return [pid] if pid else []


def own_sequence(process: Process) -> list[str]:
    """The sequence number of ``process``'s own PID (``family.3.4`` → ``4``), none without a numeric one."""
    pid = process.status.pid if process.status else None
    last = pid.rpartition(".")[2] if pid else ""
    return [last] if last.isdigit() else []


def parent_pid(process: Process) -> list[str]:
    parent = process.spec.identity.parent if process.spec.identity else None
    return [parent] if parent else []


def concurrency_group(process: Process) -> list[str]:
    key = concurrency_key(process)
    return [key] if key else []


def leaves_slot(event: WatchEventType, old: Process | None, new: Process) -> bool:
    """A change that frees a ``maxConcurrent`` slot or a place in line, or takes one (so the waiting
    Processes' messages stay true): a Process deleted, being deleted, reaching Reaped, leaving Pending,
    or moving to another group."""
    if event is WatchEventType.DELETED:
        return True
    if old is None:
        return False
    return ((new.phase is ProcessPhase.REAPED and old.phase is not ProcessPhase.REAPED)
            or (old.phase is ProcessPhase.PENDING and new.phase is not ProcessPhase.PENDING)
            or (new.metadata.deletion_timestamp is not None and old.metadata.deletion_timestamp is None)
            or concurrency_key(old) != concurrency_key(new))


class CacheView(Mapping[str, Process]):
    """Read-only ``"<ns>/<name>" → Process`` over the informer cache."""

    def __init__(self, informer: Informer[Process]) -> None:
        self._informer = informer

    def __getitem__(self, key: str) -> Process:
        found = self._informer.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._informer.keys())

    def __len__(self) -> int:
        return len(self._informer)


class PidView(Mapping[str, Process]):
    """Read-only ``status.pid → Process`` over the informer's :data:`OWN_PID` index (the first holder
    when, against the allocator's guarantee, two hold one PID)."""

    def __init__(self, informer: Informer[Process]) -> None:
        self._informer = informer

    def __getitem__(self, pid: str) -> Process:
        found = self._informer.by_index(OWN_PID, pid)
        if not found:
            raise KeyError(pid)
        return found[0]

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({pid for p in self._informer.objects() for pid in own_pid(p)}))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class RouteView(Mapping[str, frozenset[str]]):
    """Read-only ``host → UIDs of the Processes owning a cached stable routing child that serves it`` over
    the routing informers' :data:`STABLE_HOST` index."""

    def __init__(self, informers: list[Informer[ChildObject]]) -> None:
        self._informers = informers

    def __getitem__(self, host: str) -> frozenset[str]:
        owners = frozenset(uid for informer in self._informers for child in informer.by_index(STABLE_HOST, host)
                           for uid in controller_owner_uids(child))
        if not owners:
            raise KeyError(host)
        return owners

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({h for informer in self._informers for h in informer.index_values(STABLE_HOST)}))

    def __len__(self) -> int:
        return sum(1 for _ in self)
