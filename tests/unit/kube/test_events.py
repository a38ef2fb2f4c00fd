"""The pure parts of shared.kube.events: spam bucket, names, timestamps, the Event documents."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from shared.kube.client import CONFIG_MAPS, NAMESPACES
from shared.kube.events import (
    AGGREGATE_WINDOW,
    CACHE_SIZE,
    SPAM_BURST,
    SPAM_REFILL_SECONDS,
    EventType,
    event_name,
    format_time,
    involved_object,
    new_event,
    repeat_patch,
)
from shared.kube.meta import ObjectMeta
from shared.kube.ratelimit import TokenBucket


def test_constants_are_client_go_recorder_defaults() -> None:
    # client-go tools/record defaults: burst 25, refill 1/300 s, 600 s, LRU 4096
    assert (SPAM_BURST, SPAM_REFILL_SECONDS, AGGREGATE_WINDOW, CACHE_SIZE) == (25, 300.0, 600.0, 4096)


def takes(bucket: TokenBucket, times: list[float]) -> list[bool]:
    return [bucket.take(t) for t in times]


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        ([0.0] * 26, [True] * 25 + [False]),
        ([0.0] * 25 + [299.0], [True] * 25 + [False]),
        ([0.0] * 25 + [300.0, 300.0], [True] * 25 + [True, False]),
        ([0.0] * 25 + [150.0, 300.0], [True] * 25 + [False, True]),
        ([0.0] * 25 + [300.0 * 100] + [300.0 * 100] * 25, [True] * 25 + [True] * 25 + [False]),
    ],
    ids=[
        "a full bucket allows a burst of 25 then drops",
        "no token is back before 300 seconds",
        "one token is back after 300 seconds",
        "half a token accumulates across a refused take",
        "a long idle refills to the burst and no further",
    ],
)
def test_token_bucket(times: list[float], expected: list[bool]) -> None:
    assert takes(TokenBucket(1.0 / SPAM_REFILL_SECONDS, SPAM_BURST, now=0.0), times) == expected


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.0, "1970-01-01T00:00:00Z"), (1714564800.9, "2024-05-01T12:00:00Z"), (1714564801.0, "2024-05-01T12:00:01Z")],
    ids=["the epoch", "fractions are cut to whole seconds", "whole seconds stay"],
)
def test_format_time(seconds: float, text: str) -> None:
    assert format_time(seconds) == text


def test_event_name_is_the_object_name_and_hex_nanoseconds() -> None:
    nanos = 1714564800123456789
    assert event_name("web", nanos) == "web.17cb5b99ffbf4d15"


class _Obj(msgspec.Struct):
    metadata: ObjectMeta


@pytest.mark.parametrize(
    ("resource", "obj", "expected"),
    [
        (CONFIG_MAPS, {"metadata": {"name": "c", "namespace": "n", "uid": "u1", "resourceVersion": "4"}},
         {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "n", "name": "c", "uid": "u1", "resourceVersion": "4"}),
        (CONFIG_MAPS, _Obj(ObjectMeta(name="c", namespace="n", uid="u1")),
         {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "n", "name": "c", "uid": "u1"}),
        (NAMESPACES, {"metadata": {"name": "n", "uid": "u2"}},
         {"apiVersion": "v1", "kind": "Namespace", "name": "n", "uid": "u2"}),
    ],
    ids=[
        "a JSON object gives its full reference",
        "a Struct without resourceVersion leaves it out",
        "a cluster-scoped object has no namespace",
    ],
)
def test_involved_object(resource: Any, obj: Any, expected: dict[str, str]) -> None:
    assert involved_object(resource, obj) == expected


def test_involved_object_needs_a_name() -> None:
    with pytest.raises(ValueError, match=r"metadata\.name"):
        involved_object(CONFIG_MAPS, {"metadata": {"namespace": "n"}})


NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("involved", "namespace"),
    [({"kind": "ConfigMap", "name": "c", "namespace": "n"}, "n"), ({"kind": "Namespace", "name": "n"}, "default")],
    ids=["an event lives in its object's namespace", "an event on a cluster-scoped object lives in default"],
)
def test_new_event(involved: dict[str, str], namespace: str) -> None:
    event = new_event("c.1", involved, EventType.WARNING, "Failed", "it broke", now=NOW,
                      reporting_controller="tatara-reconciler", reporting_instance="pod-0")
    assert event == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "c.1", "namespace": namespace},
        "involvedObject": involved,
        "reason": "Failed",
        "message": "it broke",
        "type": "Warning",
        "source": {"component": "tatara-reconciler"},
        "reportingComponent": "tatara-reconciler",
        "reportingInstance": "pod-0",
        "firstTimestamp": "2024-05-01T12:00:00Z",
        "lastTimestamp": "2024-05-01T12:00:00Z",
        "count": 1,
    }


def test_repeat_patch_bumps_count_and_last_timestamp_only() -> None:
    assert repeat_patch(3, NOW + 61) == {"count": 3, "lastTimestamp": "2024-05-01T12:01:01Z"}
