"""A :class:`~shared.kube.api.KubeApi` that sends every call on to another one (a real client, or the fake):
a test subclasses it and overrides the verbs it watches or interleaves with, so a wrapped client needs no cast."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from shared.kube.api import KubeApi
from shared.kube.client import Resource, WatchEvent


class WrappedApi:
    """Every verb of :class:`KubeApi`, sent on unchanged to ``inner``."""

    def __init__(self, inner: KubeApi) -> None:
        self.inner = inner

    async def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                      body: bytes | None = None, content_type: str | None = None,
                      request_timeout: float | None = None) -> bytes:
        return await self.inner.request(method, path, query=query, body=body, content_type=content_type,
                                        request_timeout=request_timeout)

    async def get(self, resource: Resource, name: str, namespace: str | None = None,
                  *, subresource: str | None = None) -> bytes:
        return await self.inner.get(resource, name, namespace, subresource=subresource)

    async def list(self, resource: Resource, namespace: str | None = None, *, label_selector: str | None = None,
                   field_selector: str | None = None, limit: int | None = None, continue_: str | None = None,
                   resource_version: str | None = None, request_timeout: float | None = None) -> bytes:
        return await self.inner.list(resource, namespace, label_selector=label_selector,
                                     field_selector=field_selector, limit=limit, continue_=continue_,
                                     resource_version=resource_version, request_timeout=request_timeout)

    async def create(self, resource: Resource, body: bytes | Any, namespace: str | None = None) -> bytes:
        return await self.inner.create(resource, body, namespace)

    async def replace(self, resource: Resource, name: str, body: bytes | Any, namespace: str | None = None,
                      *, subresource: str | None = None) -> bytes:
        return await self.inner.replace(resource, name, body, namespace, subresource=subresource)

    async def merge_patch(self, resource: Resource, name: str, patch: bytes | Any, namespace: str | None = None,
                          *, subresource: str | None = None) -> bytes:
        return await self.inner.merge_patch(resource, name, patch, namespace, subresource=subresource)

    async def apply(self, resource: Resource, name: str, obj: bytes | Any, namespace: str | None = None, *,
                    field_manager: str, force: bool = True, subresource: str | None = None) -> bytes:
        return await self.inner.apply(resource, name, obj, namespace, field_manager=field_manager, force=force,
                                      subresource=subresource)

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None, uid: str | None = None,
                     resource_version: str | None = None) -> bytes:
        return await self.inner.delete(resource, name, namespace, propagation_policy=propagation_policy, uid=uid,
                                       resource_version=resource_version)

    def watch(self, resource: Resource, namespace: str | None = None, *, resource_version: str,
              timeout_seconds: int, inactivity_timeout: float, label_selector: str | None = None,
              allow_bookmarks: bool = True, send_initial_events: bool = False) -> AsyncIterator[WatchEvent]:
        return self.inner.watch(resource, namespace, resource_version=resource_version,
                                timeout_seconds=timeout_seconds, inactivity_timeout=inactivity_timeout,
                                label_selector=label_selector, allow_bookmarks=allow_bookmarks,
                                send_initial_events=send_initial_events)


_: type[KubeApi] = WrappedApi

__all__ = ["WrappedApi"]
