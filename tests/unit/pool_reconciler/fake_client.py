"""A recording stand-in for :class:`shared.kube.client.KubeClient`: GET answers from a table of stored
objects, every write is recorded in order (verb, plural/name[/subresource], body) and answered with the
stored object (or ``{}``); chosen calls can be made to raise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import msgspec

from shared.kube.client import KubeClient, Resource
from shared.kube.errors import NotFound


@dataclass
class Call:
    verb: str
    path: str
    body: Any = None


@dataclass
class FakeClient:
    objects: dict[str, Any] = field(default_factory=dict)
    """``<plural>/<name>`` → the JSON document GET (and a patch of it) answers."""
    fail: dict[tuple[str, str], Exception] = field(default_factory=dict)
    """``(verb, path)`` → the error that call raises."""
    calls: list[Call] = field(default_factory=list)

    def as_client(self) -> KubeClient:
        return cast(KubeClient, self)

    @property
    def writes(self) -> list[tuple[str, str]]:
        return [(c.verb, c.path) for c in self.calls if c.verb != "get"]

    def _answer(self, verb: str, path: str, body: Any, key: str) -> bytes:
        self.calls.append(Call(verb, path, body))
        error = self.fail.get((verb, path))
        if error is not None:
            raise error
        return msgspec.json.encode(self.objects.get(key, {}))

    async def get(self, resource: Resource, name: str, namespace: str | None = None, **_: Any) -> bytes:
        key = f"{resource.plural}/{name}"
        if key not in self.objects:
            self.calls.append(Call("get", key))
            raise NotFound(404, "NotFound", f"{key} not found")
        return self._answer("get", key, None, key)

    async def merge_patch(self, resource: Resource, name: str, patch: Any, namespace: str | None = None,
                          **options: Any) -> bytes:
        key = f"{resource.plural}/{name}"
        path = f"{key}/{options['subresource']}" if options.get("subresource") else key
        return self._answer("patch", path, patch, key)

    async def create(self, resource: Resource, body: Any, namespace: str | None = None, **_: Any) -> bytes:
        doc = msgspec.json.decode(body) if isinstance(body, bytes) else body
        return self._answer("create", f"{resource.plural}/{doc['metadata']['name']}", doc, "")

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, **options: Any) -> bytes:
        """Recorded with its preconditions (``uid`` / ``resource_version`` given) as the body."""
        preconditions = {k: v for k, v in options.items() if k in ("uid", "resource_version") and v}
        return self._answer("delete", f"{resource.plural}/{name}", preconditions or None, "")

    async def apply(self, resource: Resource, name: str, obj: Any, namespace: str | None = None, **_: Any) -> bytes:
        return self._answer("apply", f"{resource.plural}/{name}", obj, "")
