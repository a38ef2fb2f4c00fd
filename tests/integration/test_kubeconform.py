"""kubeconform ``-strict`` (the real tool, pinned, built from its Go module) accepts every tatara document in
examples/ against JSON schemas made from our CRDs the way kubeconform's ``openapi2jsonschema`` makes them
(kubeconform README, "CustomResourceDefinition (CRD) Support"; :mod:`tools.kubeconform_schemas`), and
refuses an unknown field (issue 17).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.crds import all_crds, tatara_crds
from tools.kubeconform_schemas import SCHEMA_LOCATION, schema_file_name, write_json_schemas

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
OUR_GROUPS = frozenset(crd["spec"]["group"] for crd in tatara_crds())


def _is_ours(api_version: str) -> bool:
    return api_version.partition("/")[0] in OUR_GROUPS


def _documents(paths: list[Path]) -> list[tuple[Path, dict[str, Any]]]:
    return [(path, doc) for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every CRD ``tatara up`` installs (tatara's and the third-party copies), as kubeconform JSON schemas."""
    directory = tmp_path_factory.mktemp("kubeconform-schemas")
    write_json_schemas(all_crds(), directory)
    return directory


def _kubeconform(binary: Path, schemas: Path, paths: list[Path]) -> tuple[int, dict[str, Any]]:
    """Run kubeconform ``-strict`` over ``paths`` (``-ignore-missing-schemas`` only when a kind is not ours)."""
    foreign = any(not _is_ours(str(doc.get("apiVersion", ""))) for _, doc in _documents(paths))
    args = [str(binary), "-strict", "-summary", "-verbose", "-output", "json",
            "-schema-location", str(schemas / SCHEMA_LOCATION),
            *(["-ignore-missing-schemas"] if foreign else []), *map(str, paths)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    try:
        report: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError as err:
        raise AssertionError(f"kubeconform printed no JSON ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}") from err
    return proc.returncode, report


def test_the_pinned_kubeconform_is_the_one_built(kubeconform: Path) -> None:
    out = subprocess.run([str(kubeconform), "-v"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert out.strip() == "v0.8.0"


def test_a_schema_per_kind_and_version(schemas: Path) -> None:
    expected = {schema_file_name(crd["spec"]["names"]["kind"], v["name"])
                for crd in all_crds() for v in crd["spec"]["versions"]}
    assert {p.name for p in schemas.glob("*.json")} == expected
    process = json.loads((schemas / "process_v1alpha1.json").read_text())
    assert process["additionalProperties"] is False  # the root is closed too (DENY_ROOT_ADDITIONAL_PROPERTIES)
    assert process["properties"]["spec"]["additionalProperties"] is False


def test_kubeconform_strict_accepts_every_example(kubeconform: Path, schemas: Path) -> None:
    assert EXAMPLES, "no YAML under examples/"
    docs = _documents(EXAMPLES)
    ours = {(str(path), doc["kind"], doc["metadata"]["name"]) for path, doc in docs if _is_ours(doc["apiVersion"])}
    assert ours, "no tatara document in examples/"

    rc, report = _kubeconform(kubeconform, schemas, EXAMPLES)

    results = report["resources"]
    bad = [r for r in results if r["status"] in ("statusInvalid", "statusError")]
    assert bad == [], json.dumps(bad, indent=2)
    assert rc == 0, json.dumps(report, indent=2)
    skipped = [r for r in results if r["status"] == "statusSkipped"]
    assert [r for r in skipped if _is_ours(r["version"])] == []
    checked = {(r["filename"], r["kind"], r["name"]) for r in results
               if r["status"] == "statusValid" and _is_ours(r["version"])}
    assert checked == ours
    assert report["summary"]["valid"] >= len(ours)
    assert report["summary"]["invalid"] == report["summary"]["errors"] == 0


@pytest.mark.parametrize(("where", "pointer"), [("spec", "/spec"), ("root", "")])
def test_kubeconform_strict_rejects_an_unknown_field(kubeconform: Path, schemas: Path, tmp_path: Path,
                                                     where: str, pointer: str) -> None:
    doc = next(doc for _, doc in _documents([ROOT / "examples" / "ephemeral.yaml"]) if doc["kind"] == "Process")
    (doc["spec"] if where == "spec" else doc)["notAField"] = True
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump(doc))

    rc, report = _kubeconform(kubeconform, schemas, [wrong])

    assert rc == 1
    [result] = report["resources"]
    assert result["status"] == "statusInvalid"
    assert {"path": pointer, "msg": "additional properties 'notAField' not allowed"} in result["validationErrors"]
