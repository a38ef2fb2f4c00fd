"""The controller charts' README lists every value of values.yaml (and nothing else), and the
generated files (README values tables, values.schema.json) match their generators."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tools import chart_readme, chart_schema, k8s_types

ROOT = Path(__file__).resolve().parents[3]
CHARTS = chart_readme.CHARTS
_ROW = re.compile(r"^\| `([^`]+)` \|", re.M)


@pytest.mark.parametrize("chart", CHARTS)
def test_readme_lists_exactly_the_values(chart: str) -> None:
    values = yaml.safe_load((ROOT / "charts" / chart / "values.yaml").read_text())
    documented = _ROW.findall((ROOT / "charts" / chart / "README.md").read_text())
    keys = [key for key, _ in chart_readme.leaves(values)]
    assert sorted(set(keys) - set(documented)) == [], "values missing from README (run python -m tools.chart_readme)"
    assert sorted(set(documented) - set(keys)) == [], "README documents keys values.yaml does not have"
    assert len(documented) == len(set(documented))


def test_readme_tables_are_current() -> None:
    assert chart_readme.main(["--check"]) == 0


def test_schemas_are_current() -> None:
    assert chart_schema.main(["--check"]) == 0


@pytest.mark.parametrize("chart", CHARTS)
def test_schema_covers_every_top_level_value(chart: str) -> None:
    """The schema is closed at the top level, so a value the schema forgot would fail install."""
    schema = json.loads((ROOT / "charts" / chart / "values.schema.json").read_text())
    values = yaml.safe_load((ROOT / "charts" / chart / "values.yaml").read_text())
    assert schema["additionalProperties"] is False
    assert sorted(values) == sorted(schema["properties"])


def test_leaves_and_comments() -> None:
    text = "# -- top\na:\n  # -- inner\n  b: 1\n  c: []\nd: {}\n"
    assert list(chart_readme.leaves(yaml.safe_load(text))) == [("a.b", 1), ("a.c", []), ("d", {})]
    assert chart_readme.comments(text) == {"a": "top", "a.b": "inner"}
    rows = chart_readme.table(text).splitlines()
    assert rows[2] == "| `a.b` | int | `1` | inner |"
    assert rows[3] == "| `a.c` | list | `[]` | (a) top |"


def test_the_kubernetes_types_extract_matches_the_release_we_test() -> None:
    """The checked-in extract equals what tools.k8s_types makes of the release's swagger.json (present once
    `tatara control-plane build` has downloaded k8s.io/kubernetes)."""
    path = k8s_types.swagger_path()
    if not path.is_file():
        pytest.skip(f"{path} not downloaded")
    assert k8s_types.render(json.loads(path.read_text())) == k8s_types.DEFINITIONS_FILE.read_text()


def test_the_kubernetes_types_are_closed_and_cover_the_passthrough_values() -> None:
    definitions = k8s_types.definitions()
    assert set(k8s_types.ROOTS.values()) <= set(definitions)
    objects = [name for name, d in definitions.items() if "properties" in d]
    assert len(objects) > 15
    assert [name for name in objects if definitions[name].get("additionalProperties") is not False] == []
    # spot checks against the Kubernetes API reference (core/v1)
    assert "readOnlyRootFilesystem" in definitions["io.k8s.api.core.v1.SecurityContext"]["properties"]
    assert definitions["io.k8s.api.core.v1.TopologySpreadConstraint"]["required"] == [
        "maxSkew", "topologyKey", "whenUnsatisfiable"]
    for chart in CHARTS:
        schema = json.loads((ROOT / "charts" / chart / "values.schema.json").read_text())
        for key in ("resources", "securityContext", "podSecurityContext", "affinity"):
            assert schema["properties"][key] == {"$ref": f"#/definitions/{k8s_types.ROOTS[key]}"}
        assert schema["definitions"] == definitions
