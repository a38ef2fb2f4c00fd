"""The selector grammar of ``--watch-label-selector`` (shared/domain/sharding.py) against the API server's own:
for each selector, the objects :meth:`Selector.matches` picks are the ones a LIST with that ``labelSelector``
returns, and a selector the parser refuses, the API server refuses too (400)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import msgspec
import pytest

from shared.domain.sharding import SHARD_KEY, parse_selector
from shared.kube.client import CONFIG_MAPS, NAMESPACES, KubeClient
from shared.kube.errors import BadRequest

pytestmark = pytest.mark.anyio

OBJECTS: dict[str, dict[str, str]] = {
    "s1": {SHARD_KEY: "shard1", "team": "a"},
    "s2": {SHARD_KEY: "shard2", "team": "b"},
    "empty": {SHARD_KEY: ""},
    "none": {"team": "a"},
    "bare": {},
    "n5": {"n": "5"},
    "n12": {"n": "12"},
}

SELECTORS = [
    "", "sharding.fluxcd.io/key=shard1", "!sharding.fluxcd.io/key", "sharding.fluxcd.io/key",
    "sharding.fluxcd.io/key!=shard1", "sharding.fluxcd.io/key in (shard1, shard2)",
    "sharding.fluxcd.io/key notin (shard2)", "sharding.fluxcd.io/key=", "team=a,!sharding.fluxcd.io/key",
    "team==a", "n>6", "n<6", "sharding.fluxcd.io/key in (shard1,)",
]
REFUSED = ["sharding.fluxcd.io/key in shard1", "a=b,", "a=b c=d", "a>b", "Upper.Case/a=b"]


@pytest.fixture
async def labelled(kc: KubeClient) -> AsyncIterator[str]:
    ns = f"sel-{uuid.uuid4().hex[:8]}"
    await kc.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name, labels in OBJECTS.items():
        await kc.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": name, "labels": labels}}, ns)
    yield ns
    await kc.delete(NAMESPACES, ns)


@pytest.mark.parametrize("text", SELECTORS)
async def test_matches_picks_what_the_api_server_lists(kc: KubeClient, labelled: str, text: str) -> None:
    listed = msgspec.json.decode(await kc.list(CONFIG_MAPS, labelled, label_selector=text or None))
    by_server = sorted(item["metadata"]["name"] for item in listed["items"] if item["metadata"]["name"] in OBJECTS)
    selector = parse_selector(text)
    assert sorted(name for name, labels in OBJECTS.items() if selector.matches(labels)) == by_server


@pytest.mark.parametrize("text", REFUSED)
async def test_what_the_parser_refuses_the_api_server_refuses(kc: KubeClient, labelled: str, text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the parser's messages are tested in the unit tier
        parse_selector(text)
    with pytest.raises(BadRequest):
        await kc.list(CONFIG_MAPS, labelled, label_selector=text)
