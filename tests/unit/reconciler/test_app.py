"""reconciler.app: the child kinds are resolved by discovery at start; a kind not served is watched as pinned."""

from __future__ import annotations

from typing import cast

import pytest

from reconciler.app import resolve_kind
from shared.domain.resources import DNS_ENDPOINTS, INGRESSES
from shared.kube.client import Resource
from shared.kube.discovery import RESTMapper, UnknownKind

pytestmark = pytest.mark.anyio


class FakeMapper:
    """Discovery that serves ``served`` and nothing else."""

    def __init__(self, *served: Resource) -> None:
        self.served = {(r.api_version, r.kind): r for r in served}
        self.asked: list[tuple[str, str]] = []

    async def resource_for(self, api_version: str, kind: str) -> Resource:
        self.asked.append((api_version, kind))
        found = self.served.get((api_version, kind))
        if found is None:
            raise UnknownKind(kind)
        return found


async def test_a_served_kind_is_the_resource_discovery_names() -> None:
    discovered = Resource("networking.k8s.io", "v1", "ingresses", "Ingress", namespaced=True)
    mapper = FakeMapper(discovered)
    assert await resolve_kind(cast(RESTMapper, mapper), INGRESSES) is discovered
    assert mapper.asked == [("networking.k8s.io/v1", "Ingress")]


async def test_a_kind_whose_crd_is_missing_keeps_the_pinned_resource(caplog: pytest.LogCaptureFixture) -> None:
    assert await resolve_kind(cast(RESTMapper, FakeMapper()), DNS_ENDPOINTS) is DNS_ENDPOINTS
    assert "externaldns.k8s.io/v1alpha1 DNSEndpoint is not served" in caplog.text
