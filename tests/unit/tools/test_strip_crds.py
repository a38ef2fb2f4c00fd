"""The schema-only third-party CRD copies are current and carry no descriptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kube import load_yaml_docs
from tools.crds import THIRD_PARTY_CRDS
from tools.strip_crds import DEFAULT_SOURCE, WANTED, strip_crd, strip_schema


def schema_keywords(node: Any, in_properties: bool = False) -> set[str]:
    """Every key used as a schema keyword (not as a property name) anywhere under ``node``."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= schema_keywords(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if in_properties:
                found |= schema_keywords(value)
                continue
            found.add(key)
            found |= schema_keywords(value, in_properties=key in ("properties", "patternProperties"))
    return found


@pytest.mark.parametrize("name", sorted(WANTED.values()))
def test_copy_has_no_description_keyword(name: str) -> None:
    (crd,) = load_yaml_docs(THIRD_PARTY_CRDS / name)
    for version in crd["spec"]["versions"]:
        assert "description" not in schema_keywords(version["schema"]["openAPIV3Schema"])


def test_a_property_named_description_survives_stripping() -> None:
    schema = {"type": "object", "description": "drop me",
              "properties": {"description": {"type": "string", "description": "drop me too"}}}
    assert strip_schema(schema) == {"type": "object", "properties": {"description": {"type": "string"}}}


@pytest.mark.skipif(not DEFAULT_SOURCE.is_dir(), reason="team kit (../shared) not present")
@pytest.mark.parametrize(("source", "copy"), sorted(WANTED.items()))
def test_copy_matches_the_published_crd(source: str, copy: str) -> None:
    (published,) = [d for d in yaml.safe_load_all((DEFAULT_SOURCE / source).read_text()) if d]
    assert load_yaml_docs(THIRD_PARTY_CRDS / copy) == [strip_crd(published)]
    assert load_yaml_docs(Path(THIRD_PARTY_CRDS / copy))[0]["spec"]["names"] == published["spec"]["names"]


def test_the_default_destination_is_where_the_product_reads_the_copies() -> None:
    from tools.strip_crds import DEFAULT_DEST

    assert DEFAULT_DEST.resolve() == THIRD_PARTY_CRDS.resolve()
