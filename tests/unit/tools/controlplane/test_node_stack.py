"""The chart values the node stack installs with: the locally built image split into repository and tag and never
pulled, the export worker's image and namespaces, the replicas; and that every value set is one the chart's
values.yaml declares with a type its values.schema.json allows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tools.node_stack import (
    CHARTS,
    POOL_RECONCILER,
    RECONCILER,
    REPO_ROOT,
    RESTRICTED,
    image_values,
    pool_values,
    reconciler_values,
)

IMAGE = "localhost/tatara/tatara:dev-abc"


@pytest.mark.parametrize(
    ("image", "repository", "tag"),
    [
        (IMAGE, "localhost/tatara/tatara", "dev-abc"),
        ("localhost/tatara/echo:1", "localhost/tatara/echo", "1"),
        ("localhost/tatara/tatara:dev-0123456789ab", "localhost/tatara/tatara", "dev-0123456789ab"),
    ],
    ids=["the tatara image", "the echo image", "a full context key"],
)
def test_image_values(image: str, repository: str, tag: str) -> None:
    assert image_values(image) == {"image": {"repository": repository, "tag": tag, "pullPolicy": "Never"}}


def test_reconciler_values() -> None:
    values = reconciler_values(IMAGE, ["tatara-exports", "default", "b-team"])
    assert values == {
        "image": {"repository": "localhost/tatara/tatara", "tag": "dev-abc", "pullPolicy": "Never"},
        "replicaCount": 2,
        "config": {"exportWorkerImage": IMAGE, "tableStatusInterval": 1},
        "exportWorker": {"namespaces": ["b-team", "default", "tatara-exports"]},
    }


def test_reconciler_values_overrides() -> None:
    values = reconciler_values(IMAGE, replicas=1, table_status_interval=3)
    assert values["replicaCount"] == 1
    assert values["config"]["tableStatusInterval"] == 3
    assert values["exportWorker"]["namespaces"] == []


def test_pool_values() -> None:
    assert pool_values(IMAGE) == {
        "image": {"repository": "localhost/tatara/tatara", "tag": "dev-abc", "pullPolicy": "Never"},
        "replicaCount": 2,
        "config": {"heartbeatSeconds": 5},
    }
    assert pool_values(IMAGE, replicas=3, heartbeat_seconds=7)["config"] == {"heartbeatSeconds": 7}
    assert pool_values(IMAGE, replicas=3)["replicaCount"] == 3


def test_two_replicas_by_default_so_leader_election_is_real() -> None:
    assert reconciler_values(IMAGE)["replicaCount"] > 1
    assert pool_values(IMAGE)["replicaCount"] > 1


def test_the_release_namespace_is_restricted_in_every_pod_security_mode() -> None:
    assert RESTRICTED == {"pod-security.kubernetes.io/enforce": "restricted",
                          "pod-security.kubernetes.io/warn": "restricted",
                          "pod-security.kubernetes.io/audit": "restricted"}


# -- against the charts ----------------------------------------------------------------------------------------

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "array": (list,),
    "object": (dict,),
}


def _leaves(values: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in values.items():
        if isinstance(value, dict):
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


def _schema_allows(schema: dict[str, Any], value: Any) -> bool:
    if "enum" in schema and value not in schema["enum"]:
        return False
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if isinstance(value, bool) and "boolean" not in types:
            return False
        if not any(isinstance(value, _JSON_TYPES[t]) for t in types):
            return False
    return not (isinstance(value, list) and schema.get("uniqueItems") and len(set(value)) != len(value))


CHART_VALUES = [
    (RECONCILER, reconciler_values(IMAGE, ["tatara-exports", "default"])),
    (POOL_RECONCILER, pool_values(IMAGE)),
]


def test_both_charts_get_values() -> None:
    assert {chart for chart, _ in CHART_VALUES} == set(CHARTS)


@pytest.mark.parametrize(("chart", "values"), CHART_VALUES, ids=[chart for chart, _ in CHART_VALUES])
def test_every_value_is_declared_by_the_chart_and_allowed_by_its_schema(chart: str, values: dict[str, Any]) -> None:
    defaults = yaml.safe_load((REPO_ROOT / "charts" / chart / "values.yaml").read_text())
    schema = json.loads((REPO_ROOT / "charts" / chart / "values.schema.json").read_text())
    for path, value in _leaves(values):
        default: Any = defaults
        node: dict[str, Any] = schema
        for key in path:
            assert key in default, f"{chart}: {'.'.join(path)} is not in values.yaml"
            default = default[key]
            assert key in node.get("properties", {}), f"{chart}: {'.'.join(path)} is not in values.schema.json"
            node = node["properties"][key]
        assert _schema_allows(node, value), f"{chart}: {'.'.join(path)} = {value!r} is refused by {node}"
