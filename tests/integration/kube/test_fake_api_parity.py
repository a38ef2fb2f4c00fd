"""The API-semantics table (tests/support/api_semantics.py) against a real kube-apiserver: each case's
expected answer, which tests/unit/support/test_fake_api.py holds the in-memory fake to, is what the real
API server answers — so the fake cannot drift from the thing it stands in for."""

from __future__ import annotations

from contextlib import suppress
from itertools import count

import msgspec
import pytest

from shared.kube.client import CUSTOM_RESOURCE_DEFINITIONS, NAMESPACES, KubeClient
from shared.kube.errors import AlreadyExists, NotFound, TooManyRequests
from tests.support.api_semantics import CASES, WIDGET_CRD, WIDGETS, Case
from tests.support.kube import wait_for

pytestmark = pytest.mark.anyio

_namespaces = count()


@pytest.fixture
async def widgets_served(kclient: KubeClient) -> None:
    with suppress(AlreadyExists):  # installed by an earlier case of this module
        await kclient.create(CUSTOM_RESOURCE_DEFINITIONS, WIDGET_CRD)

    async def served() -> bool:
        try:
            await kclient.list(WIDGETS, "default")
        except (NotFound, TooManyRequests):  # not yet Established / storage (re)initializing
            return False
        return True

    await wait_for(served, timeout=30, what="the Widget CRD to be served")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_the_real_api_server_answers_the_table(case: Case, kclient: KubeClient, widgets_served: None) -> None:
    ns = f"parity-{next(_namespaces)}"  # a namespace per case: the LIST cases count what is in it
    await kclient.create(NAMESPACES, {"metadata": {"name": ns}})
    assert await case.run(kclient, ns) == case.expected


def test_the_table_covers_every_semantic_the_fake_documents() -> None:
    # the fake's docstring promises these; a case per promise keeps the parity honest
    ids = " ".join(c.id for c in CASES)
    for promise in ("404", "AlreadyExists", "stale resourceVersion", "uid", "null", "status", "finalizer",
                    "JSON patch", "watch", "apply", "manager", "Conflict unless forced", "generation"):
        assert promise in ids, promise
    assert msgspec.json.encode([c.expected for c in CASES])  # every expectation is plain data
