"""Cluster state as the Rust reference controller left it (tests/fixtures/rust-state), loaded into a real API
server the way the reference wrote it, so that our reconciler can take it over (docs/migration.md).

A scenario folder holds ``objects.json`` (every object of one namespace as read from the API, ``managedFields``
included), ``events.json``, ``processtable-after.json`` and ``notes.json`` (the folder's README.md says what
each scenario is). :func:`scenarios` lists the folders; adding one adds its cases to the takeover tier.

Loading replays each object's ``managedFields`` in order, so that field ownership is the reference's:

- the first entry of the main resource makes the object: an ``Apply`` entry is a server-side apply with its
  manager (``tatara-reconciler`` for children, force, at the entry's ``apiVersion``: ``v1beta2`` for the
  reference's OCIRepositories), an ``Update`` entry a POST of the fields it owns (``kubectl`` for Processes);
- each later ``Update`` entry is a JSON merge patch of the fields it owns, sent without a field manager: the
  API server then names the manager after the ``User-Agent``, which is the entry's manager (``unknown`` for
  the reference's own writes, whose client sends none);
- ``status`` entries are merge patches of ``/status`` the same way;
- an object with a ``deletionTimestamp`` is then deleted (its finalizer holds it, as in the reference's
  cluster).

The fields an entry owns are its ``fieldsV1`` set projected onto the object (:func:`project`). A UID inside an
object (ownerReferences, and the ``k:{"uid":…}`` keys that name them) is the reference's cluster's, mapped to
the new owner's UID. :func:`differences` compares what was loaded with the fixture, so a loading that does not
reproduce the reference's state fails before any assertion about our reconciler.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from shared.domain.resources import FLUX_KINDS, PROCESS_TABLES, PROCESSES
from shared.kube.client import KubeClient, Resource
from tests.support.kube import FIXTURES

__all__ = ["RUST_STATE", "Loaded", "LoadedObject", "Scenario", "differences", "kind_resource", "load_scenario",
           "load_table", "project", "scenarios", "table_fixture", "with_v1beta2"]

RUST_STATE: Final = FIXTURES / "rust-state"
"""The scenario folders (copied from the team's fixtures; tests read only the repository)."""

_KINDS: Final[dict[str, Resource]] = {r.kind: r for r in (PROCESSES, PROCESS_TABLES, *FLUX_KINDS)}

Json = dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    """One fixture folder: the objects of one namespace as the reference left them."""

    path: Path
    objects: list[Json]
    events: list[Json]
    table: Json
    notes: Json

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def namespace(self) -> str:
        namespace: str = self.notes.get("namespace") or self.objects[0]["metadata"]["namespace"]
        return namespace

    def of_kind(self, kind: str) -> list[Json]:
        return [o for o in self.objects if o["kind"] == kind]

    @property
    def processes(self) -> list[Json]:
        return self.of_kind("Process")

    def children_of(self, process: Json) -> list[Json]:
        """The objects whose controller ownerReference is ``process``."""
        uid = process["metadata"]["uid"]
        return [o for o in self.objects
                if any(ref.get("uid") == uid for ref in o["metadata"].get("ownerReferences", []))]


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def table_fixture(path: Path) -> Json:
    """The ProcessTable of ``processtable-after.json`` (a List of one item)."""
    doc = _read(path)
    items = doc.get("items", [doc]) if doc.get("kind") == "List" else [doc]
    table: Json = items[0]
    return table


def scenarios(root: Path = RUST_STATE) -> list[Scenario]:
    """Every scenario folder under ``root`` (a folder holding ``objects.json``), in name order."""
    return [Scenario(path=folder, objects=_read(folder / "objects.json"), events=_read(folder / "events.json"),
                     table=table_fixture(folder / "processtable-after.json"), notes=_read(folder / "notes.json"))
            for folder in sorted(root.iterdir()) if (folder / "objects.json").is_file()]


def kind_resource(api_version: str, kind: str) -> Resource:
    """The Resource of ``kind`` at ``api_version`` (another version of a kind we know, e.g. v1beta2)."""
    known = _KINDS[kind]
    group, _, version = api_version.rpartition("/")
    return Resource(group, version, known.plural, known.kind, known.namespaced)


# ── fieldsV1 ──────────────────────────────────────────────────────────────────


def project(value: Any, fields: Mapping[str, Any]) -> Any:
    """The part of ``value`` a ``fieldsV1`` set names: ``f:<name>`` map keys, ``k:{…}`` list items by their
    keys, ``v:<json>`` set members, ``i:<n>`` list indexes; a node with no children below it is owned whole
    (``.`` alone says the node itself is owned, so its children are listed beside it)."""
    children = {k: v for k, v in fields.items() if k != "."}
    if not children:
        return value
    if isinstance(value, dict):
        out: Json = {}
        for key, sub in children.items():
            if key.startswith("f:") and key[2:] in value:
                out[key[2:]] = project(value[key[2:]], sub)
        return out
    if isinstance(value, list):
        items: list[Any] = []
        for key, sub in children.items():
            if key.startswith("k:"):
                wanted = json.loads(key[2:])
                items += [project(item, sub) | {k: item[k] for k in wanted}
                          for item in value if isinstance(item, dict) and all(item.get(k) == v
                                                                              for k, v in wanted.items())]
            elif key.startswith("v:"):
                member = json.loads(key[2:])
                items += [member] if member in value else []
            elif key.startswith("i:") and int(key[2:]) < len(value):
                items.append(project(value[int(key[2:])], sub))
        return items
    return value


def _remap(value: Any, uids: Mapping[str, str]) -> Any:
    """``value`` with every UID of the reference's cluster (a key of ``uids``) replaced, in strings and in
    map keys (a ``fieldsV1`` key ``k:{"uid":"…"}`` names an ownerReference by it)."""
    if isinstance(value, dict):
        return {_remap(k, uids): _remap(v, uids) for k, v in value.items()}
    if isinstance(value, list):
        return [_remap(v, uids) for v in value]
    if isinstance(value, str):
        for old, new in uids.items():
            value = value.replace(old, new)
    return value


# ── loading ───────────────────────────────────────────────────────────────────


@dataclass
class LoadedObject:
    """One fixture object and the object as the API server holds it after loading."""

    fixture: Json
    live: Json = field(default_factory=dict)

    @property
    def resource(self) -> Resource:
        return kind_resource(_storage_version(self.fixture), self.fixture["kind"])


def _storage_version(obj: Json) -> str:
    version: str = obj["apiVersion"]
    return version


def _ordered(objects: Sequence[Json]) -> list[Json]:
    """Owners before the objects they own (ownerReferences name them by UID)."""
    uids = {o["metadata"]["uid"] for o in objects}
    done: set[str] = set()
    out: list[Json] = []
    pending = list(objects)
    while pending:
        ready = [o for o in pending if all(r["uid"] in done or r["uid"] not in uids
                                           for r in o["metadata"].get("ownerReferences", []))]
        if not ready:
            raise ValueError("ownerReferences form a cycle")
        for o in ready:
            out.append(o)
            done.add(o["metadata"]["uid"])
            pending.remove(o)
    return out


def _body(obj: Json, fields: Mapping[str, Any], api_version: str) -> Json:
    """The fields an entry owns, as an object of ``api_version`` that names ``obj``."""
    body: Json = {k: v for k, v in project(obj, fields).items() if k not in ("apiVersion", "kind")}
    meta = body.setdefault("metadata", {})
    meta["name"] = obj["metadata"]["name"]
    if "namespace" in obj["metadata"]:
        meta["namespace"] = obj["metadata"]["namespace"]
    return {"apiVersion": api_version, "kind": obj["kind"], **body}


class _Clients:
    """One client per manager name: a write without a field manager is named after the ``User-Agent``."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self._clients: dict[str, KubeClient] = {}

    async def as_(self, manager: str) -> KubeClient:
        if manager not in self._clients:
            self._clients[manager] = await KubeClient.from_kubeconfig(self.kubeconfig, user_agent=manager)
        return self._clients[manager]

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()


async def _load_object(clients: _Clients, obj: Json, uids: dict[str, str]) -> Json:
    entries = obj["metadata"].get("managedFields", [])
    main = [e for e in entries if not e.get("subresource")]
    status = [e for e in entries if e.get("subresource") == "status"]
    name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
    live: bytes = b""
    for i, entry in enumerate(main):
        resource = kind_resource(entry["apiVersion"], obj["kind"])
        client = await clients.as_(entry["manager"])
        body = _remap(_body(obj, entry["fieldsV1"], entry["apiVersion"]), uids)
        if entry["operation"] == "Apply":
            live = await client.apply(resource, name, body, namespace, field_manager=entry["manager"], force=True)
        elif i == 0:
            live = await client.create(resource, body, namespace)
        else:
            live = await client.merge_patch(resource, name, {k: v for k, v in body.items()
                                                             if k not in ("apiVersion", "kind")}, namespace)
    for entry in status:
        resource = kind_resource(entry["apiVersion"], obj["kind"])
        client = await clients.as_(entry["manager"])
        patch = _remap(project(obj, entry["fieldsV1"]), uids)
        live = await client.merge_patch(resource, name, {"status": patch.get("status", {})}, namespace,
                                        subresource="status")
    loaded: Json = json.loads(live)
    uids[obj["metadata"]["uid"]] = loaded["metadata"]["uid"]
    return loaded


@dataclass
class Loaded:
    """A scenario as loaded: its objects (owners first) and the reference's UIDs → the new ones."""

    scenario: Scenario
    objects: list[LoadedObject]
    uids: dict[str, str]

    def live(self, kind: str, name: str) -> Json:
        return next(o.live for o in self.objects if o.fixture["kind"] == kind and o.fixture["metadata"]["name"] == name)


async def load_scenario(kubeconfig: Path, scenario: Scenario) -> Loaded:
    """Create ``scenario``'s namespace and objects as the reference wrote them (module docstring); returns them
    with their live form, owners first."""
    clients = _Clients(kubeconfig)
    uids: dict[str, str] = {}
    try:
        admin = await clients.as_("takeover-loader")
        await admin.create(Resource("", "v1", "namespaces", "Namespace"),
                           {"metadata": {"name": scenario.namespace}}, None)
        loaded = [LoadedObject(obj, await _load_object(clients, obj, uids)) for obj in _ordered(scenario.objects)]
        for item in loaded:  # deleted by the user, held by a finalizer: deleted again here
            if item.fixture["metadata"].get("deletionTimestamp"):
                await admin.delete(item.resource, item.fixture["metadata"]["name"], scenario.namespace)
        for item in loaded:  # the live form as a GET at the storage version reads it
            resource = kind_resource(item.fixture["apiVersion"], item.fixture["kind"])
            item.live = json.loads(await admin.get(resource, item.fixture["metadata"]["name"], scenario.namespace))
        return Loaded(scenario, loaded, uids)
    finally:
        await clients.close()


async def load_table(kubeconfig: Path, table: Json) -> Json:
    """Create the ProcessTable as the reference left it: ``spec`` only, written without a field manager."""
    clients = _Clients(kubeconfig)
    try:
        entry = table["metadata"]["managedFields"][0]
        client = await clients.as_(entry["manager"])
        body = {"apiVersion": table["apiVersion"], "kind": table["kind"],
                "metadata": {"name": table["metadata"]["name"]}, "spec": table["spec"]}
        created: Json = json.loads(await client.create(PROCESS_TABLES, body, None))
        return created
    finally:
        await clients.close()


def with_v1beta2(crd: Json) -> Json:
    """The OCIRepository CRD also serving ``v1beta2`` (same schema, not stored; no conversion webhook), as
    the cluster the reference ran on: its OCIRepositories are applied at ``v1beta2``."""
    versions = crd["spec"]["versions"]
    stored = next(v for v in versions if v.get("storage"))
    beta = json.loads(json.dumps(stored)) | {"name": "v1beta2", "storage": False, "served": True}
    beta.pop("deprecated", None)
    return crd | {"spec": crd["spec"] | {"versions": [*versions, beta]}}


# ── fidelity ──────────────────────────────────────────────────────────────────


def _owners(obj: Json) -> list[tuple[str, str, str, str]]:
    return sorted((e["manager"], e["operation"], e.get("subresource", ""), e["apiVersion"])
                  for e in obj["metadata"].get("managedFields", []))


def _fields(obj: Json) -> dict[tuple[str, str, str], Any]:
    return {(e["manager"], e["operation"], e.get("subresource", "")): e["fieldsV1"]
            for e in obj["metadata"].get("managedFields", [])}


def differences(item: LoadedObject, uids: Mapping[str, str] | None = None) -> Iterator[str]:
    """What the loaded object has that the fixture does not (empty when the reference's state is reproduced):
    spec, status, finalizers, annotations, ownerReferences (UIDs mapped), generation, field managers and the
    fields each owns."""
    fixture, live = item.fixture, item.live
    mapping = dict(uids or {})
    mapping[fixture["metadata"]["uid"]] = live["metadata"]["uid"]
    expected = _remap(fixture, mapping)
    for key in ("spec", "status"):
        if expected.get(key) != live.get(key):
            yield f"{key}: fixture {expected.get(key)!r}, loaded {live.get(key)!r}"
    for key in ("finalizers", "annotations", "labels", "generation"):
        if expected["metadata"].get(key) != live["metadata"].get(key):
            yield f"metadata.{key}: fixture {expected['metadata'].get(key)!r}, loaded {live['metadata'].get(key)!r}"
    refs = [{k: v for k, v in r.items() if k != "uid"} for r in live["metadata"].get("ownerReferences", [])]
    want = [{k: v for k, v in r.items() if k != "uid"} for r in expected["metadata"].get("ownerReferences", [])]
    if refs != want:
        yield f"metadata.ownerReferences: fixture {want!r}, loaded {refs!r}"
    if _owners(expected) != _owners(live):
        yield f"managedFields: fixture {_owners(expected)!r}, loaded {_owners(live)!r}"
    elif _fields(expected) != _fields(live):
        yield f"managedFields fields: fixture {_fields(expected)!r}, loaded {_fields(live)!r}"
