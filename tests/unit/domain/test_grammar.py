"""shared.domain.api.grammar: the chart reference and chart version grammars the CRDs check
(docs/wire-format.md#grammars).

The expected verdicts are Flux's and Helm's, written out by hand: ``oci://`` URLs are OCIRepository URLs
(a registry host, lowercase repository path components), other references ``[<HelmRepository>/]<chart>``;
a version is a Masterminds semver v3 constraint or, for an OCI chart, a tag. Python's ``re`` reads these
patterns as RE2 (the API server's CEL) does: they use no construct the two read differently. The
real API server's verdict is in tests/integration/test_crds_install.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.domain.api.grammar import CHART_REF_PATTERN, CHART_VERSION_PATTERN
from tools.up import load_examples

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("ref", "ok"), [
    ("oci://ghcr.io/pleme-io/charts/lareira-demo-app", True),
    ("oci://localhost:5000/charts/app", True),
    ("oci://registry.example/a__b/c-d.e", True),
    ("oci://x", True),
    ("bitnami/nginx", True),
    ("podinfo", True),
    ("flux-system.charts/my_chart-1.2", True),
    ("not a chart ref at all", False),
    ("oci://", False),
    ("oci://x/", False),
    ("oci://ghcr.io/Org/App", False),
    ("https://charts.example/app", False),
    ("repo/sub/chart", False),
    ("Repo/chart", False),
    ("", False),
])
def test_chart_references(ref: str, ok: bool) -> None:
    assert bool(re.fullmatch(CHART_REF_PATTERN, ref)) is ok


@pytest.mark.parametrize(("version", "ok"), [
    ("", True), ("*", True), ("1", True), ("1.0.0", True), ("1.x", True), ("6.X.*", True), ("^1", True),
    ("~1.2.3", True), ("~> 1.2", True), ("=<1", True), (">=1.0.0 <2.0.0", True), (">= 1.2, < 3.0.0 || >= 4.2.3", True),
    ("1.2 - 1.4.5", True), ("v1.2.3-rc.1+build.5", True), ("!=1.3.0", True),
    ("latest", True), ("1.2.3.4", True), ("sha-0123abc", True),
    ("???", False), (" ", False), (">= 1.0 ?", False), ("1 .2", False), ("^", False), ("1.0.0 || ", False),
    ("-rc1", False), ("x" * 129, False),
])
def test_chart_versions(version: str, ok: bool) -> None:
    assert bool(re.fullmatch(CHART_VERSION_PATTERN, version)) is ok


def _aplicacaos(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        found = [node["aplicacao"]] if isinstance(node.get("aplicacao"), dict) else []
        return found + [a for v in node.values() for a in _aplicacaos(v)]
    if isinstance(node, list):
        return [a for v in node for a in _aplicacaos(v)]
    return []


def test_every_example_and_fixture_keeps_to_both_grammars() -> None:
    docs = [ex.doc for ex in load_examples(ROOT / "examples")]
    for path in sorted((ROOT / "tests" / "fixtures" / "upstream-tatara" / "examples").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    found = [a for d in docs for a in _aplicacaos(d)]
    assert found, "the examples install charts"
    for app in found:
        assert re.fullmatch(CHART_REF_PATTERN, app["chartRef"]), app
        assert re.fullmatch(CHART_VERSION_PATTERN, app["version"]), app
