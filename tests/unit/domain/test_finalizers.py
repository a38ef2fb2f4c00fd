"""Finalizer keys (process-crd.md §13) and the pure list operations over them."""

import pytest

from shared.domain import finalizers

WIRE = {
    "PROCESS": "tatara.pleme.io/process-finalizer",
    "ALLOCATION": "tatara.pleme.io/allocation-finalizer",
    "POOL": "tatara.pleme.io/pool-finalizer",
}


@pytest.mark.parametrize(("name", "wire"), WIRE.items(), ids=list(WIRE))
def test_each_key_has_its_wire_form(name: str, wire: str) -> None:
    assert getattr(finalizers, name) == wire


def test_all_lists_the_family_in_declaration_order() -> None:
    assert finalizers.ALL == (finalizers.PROCESS, finalizers.ALLOCATION, finalizers.POOL)


@pytest.mark.parametrize("key", finalizers.ALL)
def test_every_key_carries_the_finalizer_suffix(key: str) -> None:
    assert finalizers.FINALIZER_SUFFIX == "-finalizer"
    assert key.endswith(finalizers.FINALIZER_SUFFIX)


@pytest.mark.parametrize("key", finalizers.ALL)
def test_every_key_shares_the_group_prefix(key: str) -> None:
    assert finalizers.GROUP_PREFIX == "tatara.pleme.io/"
    assert key.startswith(finalizers.GROUP_PREFIX)
    assert "/" not in key.removeprefix(finalizers.GROUP_PREFIX)


def test_keys_are_unique() -> None:
    assert len(set(finalizers.ALL)) == len(finalizers.ALL)


ENSURE_CASES = [
    (None, ["tatara.pleme.io/process-finalizer"], "no list yet gets one entry"),
    ([], ["tatara.pleme.io/process-finalizer"], "an empty list gets one entry"),
    (
        ["other/f"],
        ["other/f", "tatara.pleme.io/process-finalizer"],
        "another controller's entry is kept first",
    ),
    (["tatara.pleme.io/process-finalizer"], None, "an existing entry means nothing to write"),
    (["other/f", "tatara.pleme.io/process-finalizer"], None, "an existing entry after another means nothing"),
]


@pytest.mark.parametrize(("before", "after"), [c[:2] for c in ENSURE_CASES], ids=[c[2] for c in ENSURE_CASES])
def test_ensure_finalizer(before: list[str] | None, after: list[str] | None) -> None:
    assert finalizers.ensure_finalizer(before, finalizers.PROCESS) == after


REMOVE_CASES = [
    (None, None, "no list means nothing to write"),
    (["other/f"], None, "an absent entry means nothing to write"),
    (["tatara.pleme.io/process-finalizer"], [], "the only entry leaves an empty list"),
    (["a", "tatara.pleme.io/process-finalizer", "b"], ["a", "b"], "the others keep their order"),
    (["tatara.pleme.io/process-finalizer"] * 2, [], "a duplicated entry is removed entirely"),
]


@pytest.mark.parametrize(("before", "after"), [c[:2] for c in REMOVE_CASES], ids=[c[2] for c in REMOVE_CASES])
def test_remove_finalizer(before: list[str] | None, after: list[str] | None) -> None:
    assert finalizers.remove_finalizer(before, finalizers.PROCESS) == after


def test_operations_do_not_mutate_their_input() -> None:
    before = ["a", finalizers.POOL]
    finalizers.ensure_finalizer(before, finalizers.PROCESS)
    finalizers.remove_finalizer(before, finalizers.POOL)
    assert before == ["a", finalizers.POOL]


def test_finalizers_patch_is_guarded_by_resource_version() -> None:
    assert finalizers.finalizers_patch(["a"], "42") == {
        "metadata": {"finalizers": ["a"], "resourceVersion": "42"}
    }
