"""One in-memory API server for unit tests: :class:`FakeApi` implements :class:`shared.kube.api.KubeApi`.

What it does as the real API server does (each pinned by ``tests/unit/support/test_fake_api.py``, and the same
table runs against a real kube-apiserver in ``tests/integration/kube/test_fake_api_parity.py``):

- resourceVersions: one counter for the whole store (as etcd's revision), so every object's versions
  increase; a write that changes nothing (a no-op patch or apply) keeps the version;
- ``metadata.uid``, ``creationTimestamp``, ``generation`` (for kinds with a status subresource: moved by
  changes outside ``metadata`` and ``status`` only);
- 404 :class:`~shared.kube.errors.NotFound` for a missing object; 409 :class:`~shared.kube.errors.AlreadyExists`
  on a create of a taken name; 409 :class:`~shared.kube.errors.Conflict` when a PUT / merge patch / JSON patch /
  apply body or a DELETE precondition names a stale ``resourceVersion`` (or a PUT / DELETE another ``uid``);
  422 :class:`~shared.kube.errors.Invalid` for a patch that changes the (immutable) ``uid``;
- JSON merge patch (RFC 7386: ``null`` deletes a key, lists are replaced whole) and JSON patch (RFC 6902; a
  failed ``test`` or a missing path is 422 :class:`~shared.kube.errors.Invalid`);
- the status subresource: a write of the main resource keeps ``status``, a write of ``/status`` changes only
  ``status``;
- finalizers: a DELETE of an object holding some sets ``deletionTimestamp``; it is removed once the list is
  empty; a write adding a finalizer to a deleting object is 422 Invalid;
- watch: ADDED / MODIFIED / DELETED after a resourceVersion (from ``"0"`` or ``""``: the current objects as
  ADDED first), in order, filtered by namespace and label selector;
- watch-list (``send_initial_events``, ``resourceVersionMatch=NotOlderThan``): the current objects as ADDED
  whatever the resourceVersion, then a BOOKMARK annotated ``k8s.io/initial-events-end: "true"`` at the current
  resourceVersion, then the events after it; ``FakeApi(watch_list=False)`` refuses it with 422, as a server
  without the feature does.

Simplifications (say so in a test that relies on more):

- server-side apply tracks ownership per *leaf* path (a list is one leaf, as an atomic list); only applies
  own fields (merge patches and PUTs record no manager). An apply sets its leaves, removes the leaves its
  manager applied before and no longer does (unless another manager owns them too), and with
  ``force=False`` is refused with 409 Conflict when another manager owns a leaf it sets to another value
  (``force=True`` takes the leaf over). ``metadata.managedFields`` lists each manager with
  ``operation: Apply`` and a FieldsV1 set, without ``time``;
- no admission, no validation against a schema, no defaulting, no namespaces that must exist, no
  garbage collection of dependents (``propagation_policy`` is recorded only), no compaction (no 410 Gone),
  no bookmarks; ``list`` ignores ``resource_version`` (always the latest) and pages by offset; field
  selectors compare any dotted path of the document (``=``, ``==``, ``!=``);
- :meth:`FakeApi.request` serves object paths (``Resource.path``) only; any other path (discovery) is 404.

Test controls: :attr:`FakeApi.calls` records every call in order; :attr:`FakeApi.fail` makes a chosen call
raise; :attr:`FakeApi.before` runs an async hook before each call; :meth:`FakeApi.seed` stores an object as
it is (at a resourceVersion of its own if it names one); :meth:`FakeApi.remove` deletes one outright;
:meth:`FakeApi.object` reads one back.
"""

from __future__ import annotations

import builtins
import copy
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
import anyio.lowlevel
import msgspec

from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, JOBS, PROCESS_TABLES, PROCESSES
from shared.kube.api import KubeApi
from shared.kube.client import APPLY_PATCH, MERGE_PATCH, Resource, WatchEvent
from shared.kube.errors import AlreadyExists, ApiError, BadRequest, Conflict, Invalid, NotFound
from shared.kube.patch import merge_patch_applied

JSON_PATCH = "application/json-patch+json"

Doc = dict[str, Any]
Path = tuple[str, ...]

DEFAULT_STATUS_SUBRESOURCES: frozenset[Resource] = frozenset(
    {PROCESSES, PROCESS_TABLES, EPHEMERAL_POOLS, EPHEMERAL_ALLOCATIONS, JOBS})
"""The kinds served with a status subresource by default (ours, as the CRDs declare, and Jobs)."""

_IDENTITY: frozenset[Path] = frozenset({("apiVersion",), ("kind",), ("metadata", "name"), ("metadata", "namespace"),
                                        ("metadata", "resourceVersion"), ("metadata", "uid")})
"""Apply-configuration leaves that name the object rather than set a field (not owned)."""

_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "deletionTimestamp",
               "deletionGracePeriodSeconds")


@dataclass(frozen=True)
class Call:
    """One call the fake answered (or refused).

    ``verb``: get, list, create, replace, merge_patch, json_patch, apply, delete or watch; ``body``: the
    decoded JSON sent (None when none); ``options``: the keyword options given (field_manager, force,
    preconditions, selectors, ...).
    """

    verb: str
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None = None
    body: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        """``<plural>/<name>[/<subresource>]`` (``<plural>`` alone for list / watch)."""
        parts = [self.resource.plural, *(p for p in (self.name, self.subresource) if p)]
        return "/".join(parts)


def _key(resource: Resource, namespace: str | None, name: str) -> tuple[str, str, str, str]:
    return resource.group, resource.plural, (namespace or "") if resource.namespaced else "", name


def _decoded(body: bytes | Any) -> Any:
    if isinstance(body, bytes | bytearray):
        return json.loads(body)
    return msgspec.json.decode(msgspec.json.encode(body))  # Structs, dicts, ... as plain JSON values


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 ``MergePatch(target, patch)`` on a copy (the runtime's own :func:`merge_patch_applied`, which
    tests/unit/support/test_fake_api.py holds to the RFC's example)."""
    return copy.deepcopy(merge_patch_applied(target, patch))


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f"JSON pointer {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _invalid(message: str) -> Invalid:
    return Invalid(422, "Invalid", message)


def _parent(doc: Any, tokens: list[str]) -> tuple[Any, str]:
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token)
    return node, tokens[-1]


def _child(node: Any, token: str) -> Any:
    if isinstance(node, dict) and token in node:
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise _invalid(f"path element {token!r} not found")


def json_patch(doc: Any, ops: Iterable[Mapping[str, Any]]) -> Any:
    """RFC 6902 on a copy of ``doc``. Raises Invalid (422) on a failed ``test`` or a missing path."""
    doc = copy.deepcopy(doc)
    for op in ops:
        kind, tokens = op["op"], _pointer(op["path"])
        if kind == "test":
            node = doc
            for token in tokens:
                node = _child(node, token)
            if node != op.get("value"):
                raise _invalid(f"testing value {op['path']} failed")
            continue
        if kind in ("move", "copy"):
            source = doc
            for token in _pointer(op["from"]):
                source = _child(source, token)
            value = copy.deepcopy(source)
            if kind == "move":
                doc = json_patch(doc, [{"op": "remove", "path": op["from"]}])
            doc = json_patch(doc, [{"op": "add", "path": op["path"], "value": value}])
            continue
        if not tokens:
            if kind == "remove":
                raise _invalid("cannot remove the whole document")
            doc = copy.deepcopy(op["value"])
            continue
        parent, last = _parent(doc, tokens)
        if kind == "remove" or kind == "replace":
            if isinstance(parent, dict) and last in parent:
                if kind == "remove":
                    del parent[last]
                else:
                    parent[last] = copy.deepcopy(op["value"])
            elif isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
                if kind == "remove":
                    del parent[int(last)]
                else:
                    parent[int(last)] = copy.deepcopy(op["value"])
            else:
                raise _invalid(f"{kind} of missing path {op['path']}")
        elif kind == "add":
            if isinstance(parent, dict):
                parent[last] = copy.deepcopy(op["value"])
            elif isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if index > len(parent):
                    raise _invalid(f"add beyond the end of {op['path']}")
                parent.insert(index, copy.deepcopy(op["value"]))
            else:
                raise _invalid(f"add under a scalar at {op['path']}")
        else:
            raise BadRequest(400, "BadRequest", f"unknown JSON patch op {kind!r}")
    return doc


def _leaves(doc: Any, prefix: Path = ()) -> dict[Path, Any]:
    """Every leaf path of ``doc`` (a dict's members, recursively; lists and scalars are leaves)."""
    if isinstance(doc, dict) and (doc or not prefix):
        found: dict[Path, Any] = {}
        for name, value in doc.items():
            found.update(_leaves(value, (*prefix, name)))
        return found
    return {prefix: doc}


def _lookup(doc: Any, path: Path) -> tuple[bool, Any]:
    node = doc
    for name in path:
        if not isinstance(node, dict) or name not in node:
            return False, None
        node = node[name]
    return True, node


def _remove(doc: Doc, path: Path) -> None:
    node: Any = doc
    for name in path[:-1]:
        node = node.get(name) if isinstance(node, dict) else None
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _fields_v1(paths: Iterable[Path]) -> Doc:
    tree: Doc = {}
    for path in sorted(paths):
        node = tree
        for name in path:
            node = node.setdefault(f"f:{name}", {})
    return tree


def _selected(labels: Mapping[str, str], selector: str | None) -> bool:
    """Equality-based label selector (``a=b``, ``a==b``, ``a!=b``, ``a``, ``!a``), requirements ANDed."""
    for requirement in filter(None, (r.strip() for r in (selector or "").split(","))):
        if "!=" in requirement:
            name, value = requirement.split("!=", 1)
            if labels.get(name.strip()) == value.strip():
                return False
        elif "=" in requirement:
            name, value = requirement.replace("==", "=").split("=", 1)
            if labels.get(name.strip()) != value.strip():
                return False
        elif requirement.startswith("!"):
            if requirement[1:].strip() in labels:
                return False
        elif requirement not in labels:
            return False
    return True


def _fields_selected(doc: Doc, selector: str | None) -> bool:
    for requirement in filter(None, (r.strip() for r in (selector or "").split(","))):
        negate = "!=" in requirement
        name, value = requirement.replace("!=", "=").replace("==", "=").split("=", 1)
        found, actual = _lookup(doc, tuple(name.strip().split(".")))
        text = str(actual).lower() if isinstance(actual, bool) else str(actual)
        matches = found and text == value.strip()
        if matches == negate:
            return False
    return True


@dataclass
class _Stored:
    resource: Resource
    doc: Doc
    owners: dict[tuple[str, str | None], set[Path]] = field(default_factory=dict)
    """``(field manager, subresource)`` → the leaf paths its applies own."""


@dataclass
class _Event:
    version: int
    type: str
    resource: Resource
    doc: Doc


class FakeApi:
    """An in-memory API server (see the module docstring for what it models and what it simplifies).

    Args:
        status_subresources: the kinds served with a ``/status`` subresource (default
            :data:`DEFAULT_STATUS_SUBRESOURCES`); compared by group and plural.
        now: wall time for ``creationTimestamp`` / ``deletionTimestamp`` (default: a fixed instant).
        watch_list: serve watch-lists (``send_initial_events``); False: refuse them with 422 Invalid.
    """

    def __init__(self, *, status_subresources: Iterable[Resource] = DEFAULT_STATUS_SUBRESOURCES,
                 now: Callable[[], datetime] = lambda: datetime(2026, 1, 1, tzinfo=UTC),
                 watch_list: bool = True) -> None:
        self.watch_list = watch_list
        self._status_kinds = {(r.group, r.plural) for r in status_subresources}
        self._now = now
        self._objects: dict[tuple[str, str, str, str], _Stored] = {}
        self._version = 100  # as a real store, never "0" (which a LIST or watch reads as "any version")
        self._events: list[_Event] = []
        self._changed = anyio.Event()
        self.calls: list[Call] = []
        """Every call, in order (also those that raised)."""
        self.fail: dict[tuple[str, str], ApiError] = {}
        """``(verb, Call.path)`` → the error that call raises (every time, before it does anything)."""
        self.before: list[Callable[[Call], Awaitable[None]]] = []
        """Hooks awaited before each call is served (after it is recorded); one may raise or write."""

    # -- test controls -----------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The store's current resourceVersion (the last write's)."""
        return str(self._version)

    def seed(self, resource: Resource, doc: Mapping[str, Any] | Any) -> Doc:
        """Store ``doc`` as it is (no checks, no hooks; a namespaced one needs ``metadata.namespace``), with a
        uid / creationTimestamp when it has none; the stored document.

        The resourceVersion is ``doc``'s own when it names one (a test that writes versions as literals; it
        must be above the object's present one, and later writes continue above it), else a fresh one.

        Raises:
            ValueError: ``doc`` names a resourceVersion not above the stored object's.
        """
        body = _decoded(doc)
        meta = body.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", self._timestamp())
        key = _key(resource, meta.get("namespace"), meta["name"])
        old = self._objects.get(key)
        given = meta.get("resourceVersion")
        if given:
            if old is not None and int(given) <= int(old.doc["metadata"]["resourceVersion"]):
                raise ValueError(f"resourceVersion {given} is not above the stored {old.doc['metadata']}")
            self._version = max(self._version, int(given) - 1)
        stored = self._store(key, resource, body, old.doc if old else None, owners=old.owners if old else {})
        if given:
            self._objects[key].doc["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"] = given
        return stored

    def remove(self, resource: Resource, name: str, namespace: str | None = None) -> None:
        """Delete an object outright (finalizers or not; no hooks), as another client's delete would."""
        self._drop(self._existing(resource, namespace, name))

    def object(self, resource: Resource, name: str, namespace: str | None = None) -> Doc | None:
        """The stored document (a copy), None when absent."""
        stored = self._objects.get(_key(resource, namespace, name))
        return copy.deepcopy(stored.doc) if stored else None

    def calls_of(self, verb: str) -> list[Call]:
        return [c for c in self.calls if c.verb == verb]

    # -- the KubeApi verbs -----------------------------------------------------------------

    async def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                      body: bytes | None = None, content_type: str | None = None,
                      request_timeout: float | None = None) -> bytes:
        """The verb for ``method`` on an object path; any other path is NotFound."""
        split = urlsplit(path)
        params = {k: v[-1] for k, v in parse_qs(split.query).items()} | dict(query or {})
        resource, namespace, name, subresource = _parse_path(split.path)
        decoded = json.loads(body) if body else None
        if method == "GET" and name is None:
            return await self.list(resource, namespace, label_selector=params.get("labelSelector"),
                                   field_selector=params.get("fieldSelector"), limit=params.get("limit"),
                                   continue_=params.get("continue"))
        if method == "GET" and name is not None:
            return await self.get(resource, name, namespace, subresource=subresource)
        if method == "POST" and name is None:
            return await self.create(resource, decoded, namespace)
        if method == "PUT" and name is not None:
            return await self.replace(resource, name, decoded, namespace, subresource=subresource)
        if method == "DELETE" and name is not None:
            preconditions = (decoded or {}).get("preconditions") or {}
            return await self.delete(resource, name, namespace,
                                     propagation_policy=(decoded or {}).get("propagationPolicy"),
                                     uid=preconditions.get("uid"),
                                     resource_version=preconditions.get("resourceVersion"))
        if method == "PATCH" and name is not None:
            if content_type == MERGE_PATCH:
                return await self.merge_patch(resource, name, decoded, namespace, subresource=subresource)
            if content_type == APPLY_PATCH:
                force = params.get("force", False)
                return await self.apply(resource, name, decoded, namespace, field_manager=params["fieldManager"],
                                        force=force is True or force == "true", subresource=subresource)
            if content_type == JSON_PATCH:
                return await self.json_patch(resource, name, decoded, namespace, subresource=subresource)
            raise ApiError(415, "UnsupportedMediaType", f"PATCH of {content_type}")
        raise ApiError(405, "MethodNotAllowed", f"{method} {path}")

    async def get(self, resource: Resource, name: str, namespace: str | None = None,
                  *, subresource: str | None = None) -> bytes:
        await self._enter(Call("get", resource, namespace, name, subresource))
        return msgspec.json.encode(self._existing(resource, namespace, name).doc)

    async def list(self, resource: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                   field_selector: str | None = None, limit: int | None = None, continue_: str | None = None,
                   resource_version: str | None = None, request_timeout: float | None = None) -> bytes:
        options = {k: v for k, v in (("label_selector", label_selector), ("field_selector", field_selector),
                                     ("limit", limit), ("continue_", continue_)) if v is not None}
        await self._enter(Call("list", resource, namespace, None, options=options))
        items = [copy.deepcopy(s.doc) for k, s in sorted(self._objects.items())
                 if self._matches(s.resource, s.doc, resource, namespace, label_selector)
                 and _fields_selected(s.doc, field_selector)]
        start = int(continue_) if continue_ else 0
        end = len(items) if not limit else start + int(limit)
        meta: Doc = {"resourceVersion": self.resource_version}
        if end < len(items):
            meta["continue"] = str(end)
        return msgspec.json.encode({"apiVersion": resource.api_version, "kind": f"{resource.kind}List",
                                    "metadata": meta, "items": items[start:end]})

    async def create(self, resource: Resource, body: bytes | Any, namespace: str | None = None) -> bytes:
        doc = _decoded(body)
        await self._enter(Call("create", resource, namespace, doc.get("metadata", {}).get("name"),
                               body=copy.deepcopy(doc)))
        return msgspec.json.encode(self._insert(resource, doc, namespace))

    async def replace(self, resource: Resource, name: str, body: bytes | Any, namespace: str | None = None,
                      *, subresource: str | None = None) -> bytes:
        doc = _decoded(body)
        await self._enter(Call("replace", resource, namespace, name, subresource, body=copy.deepcopy(doc)))
        stored = self._existing(resource, namespace, name)
        return msgspec.json.encode(self._update(stored, doc, subresource))

    async def merge_patch(self, resource: Resource, name: str, patch: bytes | Any, namespace: str | None = None,
                          *, subresource: str | None = None) -> bytes:
        body = _decoded(patch)
        await self._enter(Call("merge_patch", resource, namespace, name, subresource, body=body))
        stored = self._existing(resource, namespace, name)
        return msgspec.json.encode(self._update(stored, _same_uid(stored, merge_patch(stored.doc, body)), subresource))

    async def json_patch(self, resource: Resource, name: str, ops: bytes | Any, namespace: str | None = None,
                         *, subresource: str | None = None) -> bytes:
        """RFC 6902 (what ``request("PATCH", ..., content_type=JSON_PATCH)`` sends); not a KubeApi verb."""
        body = _decoded(ops)
        await self._enter(Call("json_patch", resource, namespace, name, subresource, body=body))
        stored = self._existing(resource, namespace, name)
        return msgspec.json.encode(self._update(stored, _same_uid(stored, json_patch(stored.doc, body)), subresource))

    async def apply(self, resource: Resource, name: str, obj: bytes | Any, namespace: str | None = None, *,
                    field_manager: str, force: bool = True, subresource: str | None = None) -> bytes:
        config = _decoded(obj)
        await self._enter(Call("apply", resource, namespace, name, subresource, body=config,
                               options={"field_manager": field_manager, "force": force}))
        if not config.get("apiVersion") or not config.get("kind"):
            raise BadRequest(400, "BadRequest", "apiVersion and kind must be set")
        key = _key(resource, namespace, name)
        stored = self._objects.get(key)
        leaves = {p: v for p, v in _leaves(self._scoped(resource, config, subresource)).items()
                  if p not in _IDENTITY and p != ()}
        if stored is None:
            if subresource:
                raise NotFound(404, "NotFound", f'{resource.plural} "{name}" not found')
            self._insert(resource, {**copy.deepcopy(config), "metadata": {**config.get("metadata", {}), "name": name}},
                         namespace)
            stored = self._objects[key]
            stored.owners[(field_manager, None)] = set(leaves)
            stored.doc["metadata"]["managedFields"] = self._managed(stored)
            return msgspec.json.encode(stored.doc)
        doc = copy.deepcopy(stored.doc)
        owners = {k: set(v) for k, v in stored.owners.items()}
        me = (field_manager, subresource)
        conflicts = [(other, path) for other, paths in owners.items() if other != me for path in paths
                     if path in leaves and _lookup(doc, path) != (True, leaves[path])]
        if conflicts and not force:
            listed = "; ".join(f'conflict with "{m}": .{".".join(p)}' for (m, _), p in sorted(conflicts, key=str))
            raise Conflict(409, "Conflict", f"Apply failed with {len(conflicts)} conflicts: {listed}")
        for other, path in conflicts:
            owners[other].discard(path)
        still_owned = {p for k, paths in owners.items() if k != me for p in paths}
        for path in owners.get(me, set()) - set(leaves) - still_owned:
            _remove(doc, path)
        meta = config.get("metadata", {})
        if meta.get("resourceVersion") not in (None, stored.doc["metadata"].get("resourceVersion")):
            raise _conflict(resource, name)
        for path, value in leaves.items():
            node = doc
            for part in path[:-1]:
                if not isinstance(node.get(part), dict):
                    node[part] = {}
                node = node[part]
            node[path[-1]] = copy.deepcopy(value)
        owners[me] = set(leaves)
        return msgspec.json.encode(self._update(stored, doc, subresource, owners=owners))

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None, uid: str | None = None,
                     resource_version: str | None = None) -> bytes:
        options = {k: v for k, v in (("propagation_policy", propagation_policy), ("uid", uid),
                                     ("resource_version", resource_version)) if v}
        await self._enter(Call("delete", resource, namespace, name, options=options))
        stored = self._existing(resource, namespace, name)
        meta = stored.doc["metadata"]
        if (uid and uid != meta.get("uid")) or (resource_version and resource_version != meta.get("resourceVersion")):
            raise Conflict(409, "Conflict", f"Precondition failed for {resource.plural} {name!r}")
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return msgspec.json.encode(stored.doc)
            doc = copy.deepcopy(stored.doc)
            doc["metadata"].update(deletionTimestamp=self._timestamp(), deletionGracePeriodSeconds=0)
            return msgspec.json.encode(self._store(_key(resource, namespace, name), resource, doc, stored.doc,
                                                   owners=stored.owners))
        return msgspec.json.encode(self._drop(stored))

    async def watch(self, resource: Resource, namespace: str | None = None, *, resource_version: str,
                    timeout_seconds: int, inactivity_timeout: float, label_selector: str | None = None,
                    allow_bookmarks: bool = True, send_initial_events: bool = False) -> AsyncIterator[WatchEvent]:
        """The events after ``resource_version`` (``""``/``"0"``, or a watch-list: the current objects as ADDED
        first; a watch-list then its initial-events-end BOOKMARK), then each new one as it happens; never ends
        by itself (no timeouts: cancel the consumer)."""
        options: dict[str, Any] = {"resource_version": resource_version, "label_selector": label_selector}
        if send_initial_events:
            options["send_initial_events"] = True
        await self._enter(Call("watch", resource, namespace, None, options=options))
        if send_initial_events and not self.watch_list:
            raise _invalid("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the "
                           "WatchList feature gate is enabled")
        if send_initial_events or resource_version in ("", "0"):
            since = self._version
            for stored in [s for _, s in sorted(self._objects.items())]:
                if self._matches(stored.resource, stored.doc, resource, namespace, label_selector):
                    yield WatchEvent("ADDED", msgspec.Raw(msgspec.json.encode(stored.doc)))
            if send_initial_events:
                yield WatchEvent("BOOKMARK", msgspec.Raw(msgspec.json.encode({
                    "kind": resource.kind, "apiVersion": resource.api_version,
                    "metadata": {"resourceVersion": str(since),
                                 "annotations": {"k8s.io/initial-events-end": "true"}}})))
        else:
            since = int(resource_version)
        while True:
            pending = [e for e in self._events if e.version > since
                       and self._matches(e.resource, e.doc, resource, namespace, label_selector)]
            changed = self._changed
            for event in pending:
                since = event.version
                yield WatchEvent(event.type, msgspec.Raw(msgspec.json.encode(event.doc)))
            if not pending:
                since = self._version
                await changed.wait()

    # -- the store ------------------------------------------------------------------------

    async def _enter(self, call: Call) -> None:
        self.calls.append(call)
        await anyio.lowlevel.checkpoint()
        for hook in self.before:
            await hook(call)
        error = self.fail.get((call.verb, call.path))
        if error is not None:
            raise error

    def _insert(self, resource: Resource, doc: Doc, namespace: str | None) -> Doc:
        """Create ``doc``: a name (or generateName), not taken; server-set metadata replaced; no status on a
        kind with a status subresource (as the API server's create strategy drops it)."""
        meta = doc.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name") or ""
        if not name:
            raise _invalid("metadata.name: Required value: name or generateName is required")
        key = _key(resource, namespace, name)
        if key in self._objects:
            raise AlreadyExists(409, "AlreadyExists", f'{resource.plural} "{name}" already exists')
        for server_set in _SERVER_SET:
            meta.pop(server_set, None)
        if resource.namespaced:
            meta["namespace"] = namespace
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=self._timestamp())
        if self._has_status(resource):
            meta["generation"] = 1
            doc.pop("status", None)
        return self._store(key, resource, doc, None)

    def _timestamp(self) -> str:
        return self._now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _has_status(self, resource: Resource) -> bool:
        return (resource.group, resource.plural) in self._status_kinds

    def _scoped(self, resource: Resource, doc: Doc, subresource: str | None) -> Doc:
        """What of ``doc`` a write of ``subresource`` may set: status alone on ``/status``; everything
        but status on the main resource of a kind with a status subresource."""
        if subresource == "status":
            return {"status": doc["status"]} if "status" in doc else {}
        if self._has_status(resource):
            return {k: v for k, v in doc.items() if k != "status"}
        return doc

    def _existing(self, resource: Resource, namespace: str | None, name: str) -> _Stored:
        stored = self._objects.get(_key(resource, namespace, name))
        if stored is None:
            raise NotFound(404, "NotFound", f'{resource.plural} "{name}" not found')
        return stored

    def _matches(self, kind: Resource, doc: Doc, resource: Resource, namespace: str | None,
                 label_selector: str | None) -> bool:
        meta = doc.get("metadata", {})
        return ((kind.group, kind.plural) == (resource.group, resource.plural)
                and (namespace is None or not resource.namespaced or meta.get("namespace") == namespace)
                and _selected(meta.get("labels") or {}, label_selector))

    def _update(self, stored: _Stored, wanted: Doc, subresource: str | None,
                owners: dict[tuple[str, str | None], set[Path]] | None = None) -> Doc:
        """Write ``wanted`` over ``stored`` as a PUT/PATCH of ``subresource`` does: the preconditions it
        carries (resourceVersion, uid), the subresource's scope, generation, finalizers on a deleting object."""
        old = stored.doc
        meta, old_meta = wanted.get("metadata") or {}, old["metadata"]
        if meta.get("resourceVersion") not in (None, "", old_meta.get("resourceVersion")):
            raise _conflict(stored.resource, old_meta["name"])
        if meta.get("uid") not in (None, "", old_meta.get("uid")):
            raise Conflict(409, "Conflict", f"Precondition failed: UID in precondition: {meta.get('uid')}, "
                                            f"UID in object meta: {old_meta.get('uid')}")
        if subresource == "status":
            doc = {**copy.deepcopy(old), **({"status": wanted["status"]} if "status" in wanted else {})}
            if "status" not in wanted:
                doc.pop("status", None)
        else:
            doc = copy.deepcopy(wanted)
            doc["metadata"] = {**{k: v for k, v in (doc.get("metadata") or {}).items() if k not in _SERVER_SET},
                               **{k: old_meta[k] for k in _SERVER_SET if k in old_meta}}
            for identity in ("name", "namespace"):
                if identity in old_meta:
                    doc["metadata"][identity] = old_meta[identity]
            if self._has_status(stored.resource):
                doc.pop("status", None)
                if "status" in old:
                    doc["status"] = copy.deepcopy(old["status"])
            if "generation" in old_meta and _spec_of(doc) != _spec_of(old):
                doc["metadata"]["generation"] = old_meta["generation"] + 1
        added = set(doc["metadata"].get("finalizers") or []) - set(old_meta.get("finalizers") or [])
        if old_meta.get("deletionTimestamp") and added:
            raise _invalid("metadata.finalizers: Forbidden: no new finalizers can be added if the object is "
                           "being deleted")
        if owners is not None:
            candidate = _Stored(stored.resource, doc, owners)
            doc["metadata"]["managedFields"] = self._managed(candidate)
        if doc == old:
            return copy.deepcopy(old)  # nothing changed: no new resourceVersion, no event
        if old_meta.get("deletionTimestamp") and not doc["metadata"].get("finalizers"):
            return self._drop(stored, doc)
        key = _key(stored.resource, old_meta.get("namespace"), old_meta["name"])
        return self._store(key, stored.resource, doc, old, owners=owners if owners is not None else stored.owners)

    def _managed(self, stored: _Stored) -> builtins.list[Doc]:
        return [{"manager": manager, "operation": "Apply", "apiVersion": stored.doc.get("apiVersion", ""),
                 "fieldsType": "FieldsV1", "fieldsV1": _fields_v1(paths),
                 **({"subresource": subresource} if subresource else {})}
                for (manager, subresource), paths in sorted(stored.owners.items(), key=lambda kv: (kv[0][0],
                                                                                                    kv[0][1] or ""))
                if paths]

    def _store(self, key: tuple[str, str, str, str], resource: Resource, doc: Doc, old: Doc | None,
               owners: dict[tuple[str, str | None], set[Path]] | None = None) -> Doc:
        self._version += 1
        doc["metadata"]["resourceVersion"] = str(self._version)
        self._objects[key] = _Stored(resource, doc, owners if owners is not None else {})
        self._notify("ADDED" if old is None else "MODIFIED", resource, doc)
        return copy.deepcopy(doc)

    def _drop(self, stored: _Stored, last: Doc | None = None) -> Doc:
        doc = copy.deepcopy(last if last is not None else stored.doc)
        meta = doc["metadata"]
        del self._objects[_key(stored.resource, meta.get("namespace"), meta["name"])]
        self._version += 1
        meta["resourceVersion"] = str(self._version)
        self._notify("DELETED", stored.resource, doc)
        return copy.deepcopy(doc)

    def _notify(self, kind: str, resource: Resource, doc: Doc) -> None:
        self._events.append(_Event(self._version, kind, resource, copy.deepcopy(doc)))
        self._changed.set()
        self._changed = anyio.Event()


def _same_uid(stored: _Stored, patched: Doc) -> Doc:
    """``patched``, unless the patch changed ``metadata.uid``: 422, the field is immutable (a PUT's other uid
    is a failed precondition instead, 409)."""
    uid = (patched.get("metadata") or {}).get("uid")
    if uid != stored.doc["metadata"].get("uid"):
        raise _invalid(f"metadata.uid: Invalid value: {uid!r}: field is immutable")
    return patched


def _spec_of(doc: Doc) -> Doc:
    return {k: v for k, v in doc.items() if k not in ("metadata", "status")}


def _conflict(resource: Resource, name: str) -> Conflict:
    return Conflict(409, "Conflict", f'Operation cannot be fulfilled on {resource.plural} "{name}": the object has '
                                     "been modified; please apply your changes to the latest version and try again")


def _parse_path(path: str) -> tuple[Resource, str | None, str | None, str | None]:
    """``Resource.path(...)`` read back: (resource, namespace, name, subresource); NotFound otherwise."""
    parts = [unquote(p) for p in path.strip("/").split("/")]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise NotFound(404, "NotFound", f"the server could not find the requested resource ({path})")
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    plural, name, subresource = rest[0], rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    return Resource(group, version, plural, "", namespaced=namespace is not None), namespace, name, subresource


_: type[KubeApi] = FakeApi
"""mypy proves the fake has every verb of the Protocol, typed alike."""

__all__ = ["DEFAULT_STATUS_SUBRESOURCES", "JSON_PATCH", "Call", "FakeApi", "json_patch", "merge_patch"]
