"""shared/domain/export_key.py: the idempotency key of an export and its HTTP header form
(docs/wire-format.md#export-idempotency-keys)."""

from __future__ import annotations

import pytest

from shared.domain.export_key import export_key, idempotency_key_header


@pytest.mark.parametrize(("uid", "generation", "index", "want"), [
    ("6f1c2a3e-0000-4000-8000-000000000001", 3, 0, "tatara-export/6f1c2a3e-0000-4000-8000-000000000001/3/0"),
    ("u", None, 12, "tatara-export/u/0/12"),
    ("u", 0, 1, "tatara-export/u/0/1"),
], ids=["a uid, generation and index", "no generation reads as 0", "generation 0"])
def test_the_key_names_the_process_its_generation_and_the_export(uid: str, generation: int | None, index: int,
                                                                  want: str) -> None:
    assert export_key(uid, generation, index) == want


def test_keys_differ_by_process_generation_and_index() -> None:
    keys = {export_key(u, g, i) for u in ("a", "b") for g in (1, 2) for i in (0, 1)}
    assert len(keys) == 8


@pytest.mark.parametrize(("uid", "index"), [("", 0), ("u", -1)], ids=["no uid", "a negative index"])
def test_a_key_needs_a_uid_and_an_index(uid: str, index: int) -> None:
    with pytest.raises(ValueError, match=r"uid|negative"):
        export_key(uid, 1, index)


@pytest.mark.parametrize(("key", "header"), [
    ("tatara-export/u/3/0", '"tatara-export/u/3/0"'),
    ('a"b\\c', '"a\\"b\\\\c"'),
], ids=["a key as the reconciler writes it", "quote and backslash escaped"])
def test_the_header_is_a_structured_field_string(key: str, header: str) -> None:
    assert idempotency_key_header(key) == header


@pytest.mark.parametrize("key", ["a\nb", "ü", "\x7f"], ids=["a line break", "non-ASCII", "DEL"])
def test_a_key_an_sf_string_cannot_carry_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="printable ASCII"):
        idempotency_key_header(key)
