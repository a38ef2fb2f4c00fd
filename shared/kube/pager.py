"""Paginated LIST: every page of a collection, as client-go's ``tools/pager.ListPager`` reads it.

One LIST loop for the whole project (informer relists, PID child counts, ``tatara ps``): pages of
``page_size`` items are requested with ``limit`` and followed through ``metadata.continue``; if a
continue token expires mid-way (410 Gone, the API server compacted past the list's snapshot), the
list restarts once as one unpaginated LIST — client-go's ``FullListIfExpired`` — so a caller always
gets a consistent snapshot and the ``resourceVersion`` to watch from (docs/runtime.md, "Informer").
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec

from shared.kube.api import KubeApi
from shared.kube.client import Resource
from shared.kube.errors import Gone

__all__ = ["DEFAULT_PAGE_SIZE", "Listing", "list_all"]

T = TypeVar("T")

DEFAULT_PAGE_SIZE = 500
"""Items per page: client-go's pager default (``pager.defaultPageSize``)."""


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""
    # ``continue`` is a Python keyword: renamed on the wire
    continue_: str = msgspec.field(default="", name="continue")


class _Page(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)


_page_decoder = msgspec.json.Decoder(_Page)


@dataclass(frozen=True)
class Listing(Generic[T]):
    """A whole collection: the decoded ``items`` (undecodable ones dropped by the decoder returning None)
    and the list's ``resource_version`` (the snapshot a WATCH continues from)."""

    items: builtins.list[T]
    resource_version: str


async def list_all(
    client: KubeApi,
    resource: Resource,
    decode: Callable[[msgspec.Raw], T | None],
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Listing[T]:
    """LIST every object of ``resource`` (in ``namespace``; None: all namespaces or cluster-scoped).

    ``decode`` turns one raw item into ``T``; returning None skips the item (e.g. an object that does
    not fit the model, which the caller has already counted and logged).

    Raises:
        shared.kube.errors.ApiError: a page request failed (Gone only if the unpaginated retry also did).
    """
    items: builtins.list[T] = []
    token = ""
    limit: int | None = page_size
    while True:
        try:
            raw = await client.list(resource, namespace, label_selector=label_selector,
                                    limit=limit, continue_=token or None)
        except Gone:
            if not token:
                raise
            items, token, limit = [], "", None  # the snapshot expired mid-way: one full LIST instead
            continue
        page = _page_decoder.decode(raw)
        for raw_item in page.items:
            item = decode(raw_item)
            if item is not None:
                items.append(item)
        token = page.metadata.continue_
        if not token:
            return Listing(items, page.metadata.resourceVersion)
