"""Kind → resource resolution by API discovery (a RESTMapper), never a hand-written table.

docs/runtime.md#discovery: the plural and scope of a child's kind come from the API server's discovery
document for its group/version (``GET /apis/<group>/<version>`` or ``/api/v1``), cached
per group/version and refreshed once when a kind is missing (a CRD installed later).
"""

from __future__ import annotations

import msgspec

from shared.kube.api import KubeApi
from shared.kube.client import Resource
from shared.kube.errors import NotFound


class UnknownKind(LookupError):
    """The API server serves no such kind in that group/version (is its CRD installed?)."""


class _APIResource(msgspec.Struct):
    name: str
    kind: str
    namespaced: bool = False


class _APIResourceList(msgspec.Struct):
    resources: list[_APIResource] = []


class RESTMapper:
    """Resolves ``(apiVersion, kind)`` to a :class:`Resource` through discovery, with a cache."""

    def __init__(self, client: KubeApi) -> None:
        self.client = client
        self._cache: dict[str, dict[str, Resource]] = {}

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version`` (e.g. ``helm.toolkit.fluxcd.io/v2``, ``HelmRelease``).

        Raises:
            UnknownKind: discovery does not list the kind, even after one refresh.
            shared.kube.errors.ApiError: discovery itself failed (other than 404).
        """
        for refresh in (False, True):
            kinds = await self._kinds(api_version, refresh=refresh)
            if kind in kinds:
                return kinds[kind]
        raise UnknownKind(f"the API server serves no kind {kind} in {api_version}")

    async def _kinds(self, api_version: str, *, refresh: bool) -> dict[str, Resource]:
        if refresh or api_version not in self._cache:
            group, _, version = api_version.rpartition("/")
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                listing = msgspec.json.decode(await self.client.request("GET", path), type=_APIResourceList)
            except NotFound:
                listing = _APIResourceList()
            self._cache[api_version] = {
                r.kind: Resource(group, version, r.name, r.kind, namespaced=r.namespaced)
                for r in listing.resources if "/" not in r.name  # skip subresources such as pods/status
            }
        return self._cache[api_version]
