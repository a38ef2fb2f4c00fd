"""The pure parts of shared.kube.finalizer: the list operations, the guarded patches, the retry."""

from __future__ import annotations

from typing import Any

import pytest

from shared.kube.client import CONFIG_MAPS
from shared.kube.errors import Conflict
from shared.kube.finalizer import (
    DEFAULT_RETRY,
    add_finalizer,
    add_finalizer_patch,
    finalizers_patch,
    remove_finalizer_patch,
    with_finalizer,
    without_finalizer,
)
from shared.kube.meta import MetaView
from shared.kube.ratelimit import Backoff
from tests.support.fake_api import Call, FakeApi

OTHER = "example.com/other"
OURS = "example.com/ours-finalizer"


def view(finalizers: tuple[str, ...] = (), *, rv: str | None = "7", deleting: bool = False) -> MetaView:
    return MetaView("obj", "ns", rv, {}, finalizers, deleting)


# ── the list ──

WITH_CASES = [
    (None, [OURS], "no list yet gets one entry"),
    ([], [OURS], "an empty list gets one entry"),
    ([OTHER], [OTHER, OURS], "another controller's entry is kept first"),
    ([OURS], None, "an existing entry means nothing to write"),
    ([OTHER, OURS], None, "an existing entry after another means nothing"),
]


@pytest.mark.parametrize(("before", "after"), [c[:2] for c in WITH_CASES], ids=[c[2] for c in WITH_CASES])
def test_with_finalizer(before: list[str] | None, after: list[str] | None) -> None:
    assert with_finalizer(before, OURS) == after


WITHOUT_CASES = [
    (None, None, "no list means nothing to write"),
    ([OTHER], None, "an absent entry means nothing to write"),
    ([OURS], [], "the only entry leaves an empty list"),
    (["a", OURS, "b"], ["a", "b"], "the others keep their order"),
    ([OURS] * 2, [], "a duplicated entry is removed entirely"),
]


@pytest.mark.parametrize(("before", "after"), [c[:2] for c in WITHOUT_CASES], ids=[c[2] for c in WITHOUT_CASES])
def test_without_finalizer(before: list[str] | None, after: list[str] | None) -> None:
    assert without_finalizer(before, OURS) == after


def test_list_operations_do_not_mutate_their_input() -> None:
    before = ["a", OTHER]
    with_finalizer(before, OURS)
    without_finalizer(before, OTHER)
    assert before == ["a", OTHER]


def test_finalizers_patch_is_guarded_by_resource_version() -> None:
    assert finalizers_patch(["a"], "42") == {"metadata": {"finalizers": ["a"], "resourceVersion": "42"}}


# ── finalizers ──


@pytest.mark.parametrize(
    ("current", "expected_list"),
    [
        ((), [OURS]),
        ((OTHER,), [OTHER, OURS]),
        ((OURS,), None),
        ((OTHER, OURS), None),
    ],
    ids=[
        "adding to an empty list writes just ours",
        "adding keeps another controller's entry first",
        "adding a present finalizer sends nothing",
        "adding a finalizer present among others sends nothing",
    ],
)
def test_add_finalizer_patch(current: tuple[str, ...], expected_list: list[str] | None) -> None:
    patch = add_finalizer_patch(view(current), OURS)
    expected = None if expected_list is None else {"metadata": {"finalizers": expected_list, "resourceVersion": "7"}}
    assert patch == expected


@pytest.mark.parametrize(
    ("current", "expected_list"),
    [
        ((OURS,), []),
        ((OTHER, OURS), [OTHER]),
        ((OURS, OTHER), [OTHER]),
        ((OTHER,), None),
        ((), None),
    ],
    ids=[
        "removing the only finalizer writes an empty list",
        "removing keeps another controller's entry before it",
        "removing keeps another controller's entry after it",
        "removing an absent finalizer sends nothing",
        "removing from an empty list sends nothing",
    ],
)
def test_remove_finalizer_patch(current: tuple[str, ...], expected_list: list[str] | None) -> None:
    patch = remove_finalizer_patch(view(current), OURS)
    expected = None if expected_list is None else {"metadata": {"finalizers": expected_list, "resourceVersion": "7"}}
    assert patch == expected


def test_no_finalizer_is_added_to_a_deleting_object() -> None:
    # docs/runtime.md#bug-finalizer-races: the API server forbids new finalizers once deletion started
    assert add_finalizer_patch(view((OTHER,), deleting=True), OURS) is None


def test_finalizers_are_still_removed_from_a_deleting_object() -> None:
    assert remove_finalizer_patch(view((OURS,), deleting=True), OURS) == {
        "metadata": {"finalizers": [], "resourceVersion": "7"}}


@pytest.mark.parametrize("compose", [add_finalizer_patch, remove_finalizer_patch], ids=["adding", "removing"])
def test_an_unguarded_finalizer_patch_is_refused(compose: Any) -> None:
    current = (OURS,) if compose is remove_finalizer_patch else ()
    with pytest.raises(ValueError, match="resourceVersion"):
        compose(view(current, rv=None), OURS)


def test_default_retry_is_client_go_default_retry() -> None:
    # client-go retry.DefaultRetry: Steps 5, Duration 10 ms, Factor 1.0, Jitter 0.1
    assert Backoff(initial=0.010, factor=1.0, jitter=0.1, steps=5) == DEFAULT_RETRY
    assert list(DEFAULT_RETRY.delays(lambda: 0.0)) == pytest.approx([0.010] * 4)
    assert list(DEFAULT_RETRY.delays(lambda: 1.0)) == pytest.approx([0.011] * 4)


@pytest.mark.anyio
async def test_a_finalizer_write_gives_up_with_conflict_after_the_retry_steps() -> None:
    api = FakeApi()
    api.seed(CONFIG_MAPS, {"metadata": {"name": "obj", "namespace": "ns", "finalizers": [OTHER]}})

    async def another_writer_first(call: Call) -> None:  # every guarded PATCH loses the race
        if call.verb == "merge_patch":
            stored = api.object(CONFIG_MAPS, "obj", "ns")
            assert stored is not None
            api.seed(CONFIG_MAPS, {**stored, "metadata": {**stored["metadata"], "resourceVersion": None,
                                                          "labels": {"n": str(len(api.calls))}}})

    api.before.append(another_writer_first)
    policy = Backoff(initial=0.0, factor=1.0, steps=3)
    with pytest.raises(Conflict):
        await add_finalizer(api, CONFIG_MAPS, "ns", "obj", OURS, retry=policy)
    assert [c.verb for c in api.calls] == ["get", "merge_patch"] * 3
    stored = api.object(CONFIG_MAPS, "obj", "ns")
    assert stored is not None
    assert stored["metadata"]["finalizers"] == [OTHER]
