"""The Kubernetes API as the controllers use it: the verbs of :class:`~shared.kube.client.KubeClient`, as a Protocol.

Product code that sends requests takes a :class:`KubeApi`, not the concrete client, so a test can hand it an
in-memory API server (``tests/support/fake_api.py``) or a wrapper around a real client without a cast.
Constructing, closing and instrumenting a client (``connect``, ``close``, ``on_response``) stay on
:class:`~shared.kube.client.KubeClient`: only the binaries' entrypoints do that.

Every verb answers the response body as raw JSON bytes and raises the typed errors of
:mod:`shared.kube.errors` (docs/runtime.md#client, docs/runtime.md#kube-api).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from shared.kube.client import KubeClient, Resource, WatchEvent


class KubeApi(Protocol):
    """The request surface of the API server; :class:`~shared.kube.client.KubeClient` is the real one.

    Shapes (all bodies JSON; ``bytes | Any`` means raw JSON bytes or any msgspec-encodable value):

    - :meth:`request`: one raw request by method and path (e.g. ``Resource.path(...)``); the escape hatch
      for what the verbs below do not cover (JSON patch, discovery, Lease PUTs).
    - :meth:`get` / :meth:`list`: one object / one LIST page (``metadata.continue`` names the next).
    - :meth:`create` (POST), :meth:`replace` (PUT, guarded by the body's ``metadata.resourceVersion``),
      :meth:`merge_patch` (RFC 7386), :meth:`apply` (server-side apply as ``field_manager``),
      :meth:`delete` (with uid / resourceVersion preconditions).
    - :meth:`watch`: the events after ``resource_version`` until the server ends the stream; with
      ``send_initial_events`` a watch-list: the state first, as ADDED events ended by the
      ``k8s.io/initial-events-end`` BOOKMARK.

    Raises (every verb): :class:`~shared.kube.errors.ApiError` subclasses — NotFound (404), Conflict (409, a
    stale resourceVersion or precondition), AlreadyExists (409 on create), Invalid (422), ...
    """

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        request_timeout: float | None = None,
    ) -> bytes: ...

    async def get(self, resource: Resource, name: str, namespace: str | None = None,
                  *, subresource: str | None = None) -> bytes: ...

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        request_timeout: float | None = None,
    ) -> bytes: ...

    async def create(self, resource: Resource, body: bytes | Any, namespace: str | None = None) -> bytes: ...

    async def replace(self, resource: Resource, name: str, body: bytes | Any, namespace: str | None = None,
                      *, subresource: str | None = None) -> bytes: ...

    async def merge_patch(self, resource: Resource, name: str, patch: bytes | Any, namespace: str | None = None,
                          *, subresource: str | None = None) -> bytes: ...

    async def apply(self, resource: Resource, name: str, obj: bytes | Any, namespace: str | None = None, *,
                    field_manager: str, force: bool = True, subresource: str | None = None) -> bytes: ...

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None, uid: str | None = None,
                     resource_version: str | None = None) -> bytes: ...

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int,
        inactivity_timeout: float,
        label_selector: str | None = None,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
    ) -> AsyncIterator[WatchEvent]: ...


_: type[KubeApi] = KubeClient
"""mypy --strict proves here that the real client has every verb of the Protocol, typed alike."""

__all__ = ["KubeApi"]
