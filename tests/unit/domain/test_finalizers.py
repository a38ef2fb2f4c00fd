"""Finalizer keys (docs/wire-format.md); the list operations are tested in tests/unit/kube/test_finalizer.py."""

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
    assert finalizers.ALL == (finalizers.PROCESS, finalizers.ALLOCATION, finalizers.POOL, finalizers.TABLE)


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
