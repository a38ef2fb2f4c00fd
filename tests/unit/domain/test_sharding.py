"""shared.domain.sharding: the label selector grammar and semantics of the API server (Kubernetes'
"Labels and Selectors" page: equality-based ``=``, ``==``, ``!=``; set-based ``in``, ``notin``, ``key``,
``!key``; comma means AND; ``!=`` and ``notin`` select objects without the key), and the shard labels
objects derived from a sharded object carry (docs/architecture.md#sharding). The integration test
tests/integration/test_sharding_selector.py checks the same selectors against a real API server."""

from __future__ import annotations

import pytest

from shared.domain.sharding import (
    SHARD_KEY,
    UNSHARDED_SELECTOR,
    Requirement,
    parse_selector,
    shard_labels,
    shard_of,
    shard_selector,
)


@pytest.mark.parametrize(
    ("text", "requirements"),
    [
        ("", ()),
        ("   ", ()),
        ("sharding.fluxcd.io/key=shard1", (Requirement(SHARD_KEY, "=", ("shard1",)),)),
        ("sharding.fluxcd.io/key==shard1", (Requirement(SHARD_KEY, "=", ("shard1",)),)),
        ("sharding.fluxcd.io/key != shard1", (Requirement(SHARD_KEY, "!=", ("shard1",)),)),
        ("!sharding.fluxcd.io/key", (Requirement(SHARD_KEY, "!"),)),
        ("sharding.fluxcd.io/key", (Requirement(SHARD_KEY, "exists"),)),
        ("sharding.fluxcd.io/key in (a, b)", (Requirement(SHARD_KEY, "in", ("a", "b")),)),
        ("sharding.fluxcd.io/key notin (a)", (Requirement(SHARD_KEY, "notin", ("a",)),)),
        ("team=a,tier!=db", (Requirement("team", "=", ("a",)), Requirement("tier", "!=", ("db",)))),
        ("team=", (Requirement("team", "=", ("",)),)),
        ("replicas>3", (Requirement("replicas", "gt", ("3",)),)),
        ("replicas < 10", (Requirement("replicas", "lt", ("10",)),)),
    ],
)
def test_parse(text: str, requirements: tuple[Requirement, ...]) -> None:
    assert parse_selector(text).requirements == requirements


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("=shard1", "invalid label key '='"),  # no key
        ("sharding.fluxcd.io/key=shard/1", "invalid label value"),  # a value has no slash
        ("sharding.fluxcd.io/key in shard1", "expected '\\('"),  # a set needs parentheses
        ("sharding.fluxcd.io/key in ()", "at least one value"),  # and a value
        ("a=b,", "ends with ','"),  # a trailing comma
        ("a=b c=d", "expected ',' between requirements"),  # requirements are separated by commas
        ("-a=b", "invalid label key"),  # a name begins with a letter or digit
        ("Upper.Case/a=b", "the prefix must be a DNS subdomain"),  # a prefix is a lower-case DNS subdomain
        ("a" * 64 + "=b", "1-63 characters"),  # a name is at most 63 characters
        ("a=" + "b" * 64, "at most 63 characters"),  # so is a value
        ("a>b", "needs an integer"),  # gt needs an integer
        ("!", "ends too early"),  # ! needs a key
    ],
)
def test_refuses_what_the_api_server_refuses(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_selector(text)


LABELLED = {SHARD_KEY: "shard1", "team": "a"}
OTHER = {SHARD_KEY: "shard2"}
UNLABELLED: dict[str, str] = {"team": "a"}


@pytest.mark.parametrize(
    ("text", "selected"),
    [
        ("", (True, True, True)),
        ("sharding.fluxcd.io/key=shard1", (True, False, False)),
        ("!sharding.fluxcd.io/key", (False, False, True)),
        ("sharding.fluxcd.io/key", (True, True, False)),
        ("sharding.fluxcd.io/key!=shard1", (False, True, True)),  # absent key: != holds
        ("sharding.fluxcd.io/key notin (shard1)", (False, True, True)),
        ("sharding.fluxcd.io/key in (shard1,shard2)", (True, True, False)),
        ("sharding.fluxcd.io/key=shard1,team=a", (True, False, False)),
        ("team=a,!sharding.fluxcd.io/key", (False, False, True)),
    ],
)
def test_matches(text: str, selected: tuple[bool, bool, bool]) -> None:
    selector = parse_selector(text)
    assert tuple(selector.matches(labels) for labels in (LABELLED, OTHER, UNLABELLED)) == selected


def test_shards_and_the_unsharded_instance_partition_every_object() -> None:
    """Flux's layout: one instance per shard plus ``!key`` selects each object exactly once."""
    selectors = [parse_selector(shard_selector(s)) for s in ("shard1", "shard2", None)]
    for labels in (LABELLED, OTHER, UNLABELLED, {SHARD_KEY: ""}, None):
        chosen = [s.text for s in selectors if s.matches(labels)]
        # a value no shard runs (here "") is nobody's: the unsharded instance takes absent keys only
        assert len(chosen) == (0 if labels == {SHARD_KEY: ""} else 1), (labels, chosen)


def test_shard_selector_and_labels() -> None:
    assert shard_selector("shard1") == "sharding.fluxcd.io/key=shard1"
    assert shard_selector(None) == UNSHARDED_SELECTOR == "!sharding.fluxcd.io/key"
    assert shard_of(LABELLED) == "shard1"
    assert shard_of(UNLABELLED) is None
    assert shard_of(None) is None
    assert shard_labels(LABELLED) == {SHARD_KEY: "shard1"}  # only the shard key is carried
    assert shard_labels(UNLABELLED) == {}
