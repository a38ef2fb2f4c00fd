"""Property tests: encode→decode round trip of ProcessSpecs, and the content hash's
stability and sensitivity (docs/wire-format.md#content-hash)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from shared.domain.api.codec import decode, encode
from shared.domain.api.process import ProcessSpec
from shared.domain.identity import content_hash, ephemeral_id

from .strategies import FIELD_STRATEGIES, process_spec

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(process_spec)
def test_encoding_then_decoding_gives_back_the_same_spec(spec: ProcessSpec) -> None:
    assert decode(encode(spec), ProcessSpec) == spec


@PROPERTY_SETTINGS
@given(process_spec)
def test_the_content_hash_is_stable_under_re_encoding(spec: ProcessSpec) -> None:
    digest = content_hash(spec)
    assert len(digest) == 26
    assert content_hash(decode(encode(spec), ProcessSpec)) == digest
    # A compact encoding that omits every default decodes to the same hashed spec.
    assert content_hash(decode(msgspec.json.encode(spec), ProcessSpec)) == digest
    assert ephemeral_id(decode(encode(spec), ProcessSpec)) == ephemeral_id(spec)


@pytest.mark.parametrize("field", list(FIELD_STRATEGIES), ids=lambda f: f"changing {f} changes the content hash")
@PROPERTY_SETTINGS
@given(data=st.data())
def test_the_content_hash_changes_when_a_spec_field_changes(field: str, data: Any) -> None:
    spec = data.draw(process_spec)
    new_value = data.draw(FIELD_STRATEGIES[field])
    changed = msgspec.structs.replace(spec, **{field: new_value})
    assume(encode(changed) != encode(spec))
    assert content_hash(changed) != content_hash(spec)
