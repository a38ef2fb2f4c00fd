"""Wire keys: byte-exact against docs/wire-format.md (kinds, annotations, labels, finalizers)."""

import ast
from pathlib import Path

import pytest

from shared.domain import annotations, group, labels

ANNOTATION_KEYS = {
    "MANAGED_BY": "tatara.pleme.io/managed-by",
    "PROCESS": "tatara.pleme.io/process",
    "PID": "tatara.pleme.io/pid",
    "CONTENT_HASH": "tatara.pleme.io/content-hash",
    "GENERATION": "tatara.pleme.io/generation",
    "ATTESTATION_ROOT": "tatara.pleme.io/attestation-root",
    "SIGNAL": "tatara.pleme.io/signal",
    "RELEASED_FROM": "tatara.pleme.io/released-from",
    "ROUTING_FORM": "tatara.pleme.io/routing-form",
    "APP": "tatara.pleme.io/app",
    "ENCAPSULATION_MODE": "tatara.pleme.io/encapsulation-mode",
    "ADOPTED_RELEASE": "tatara.pleme.io/adopted-release",
    "POOL": "tatara.pleme.io/pool",
    "POOL_SLOT": "tatara.pleme.io/pool-slot",
    "REQUESTOR": "tatara.pleme.io/requestor",
    "ALLOCATION": "tatara.pleme.io/allocation",
    "REQUESTOR_KIND": "tatara.pleme.io/requestor-kind",
    "RETURN_TRIGGER": "tatara.pleme.io/return-trigger",
}

LABEL_KEYS = {
    "MANAGED_BY": "tatara.pleme.io/managed-by",
    "PROCESS": "tatara.pleme.io/process",
    "ROUTING_FORM": "tatara.pleme.io/routing-form",
    "APP": "tatara.pleme.io/app",
    "ROLE": "tatara.pleme.io/role",
    "EXPORT_INDEX": "tatara.pleme.io/export-index",
    "RECEIPT": "tatara.pleme.io/receipt",
    "POINT_TYPE": "tatara.pleme.io/point-type",
    "SUBSTRATE": "tatara.pleme.io/substrate",
}


def _public_keys(module: object) -> dict[str, str]:
    return {
        n: v
        for n, v in vars(module).items()
        if n.isupper() and isinstance(v, str) and v.startswith("tatara.pleme.io/")
    }


def test_group_version_and_api_version() -> None:
    assert group.GROUP == "tatara.pleme.io"
    assert group.VERSION == "v1alpha1"
    assert group.API_VERSION == "tatara.pleme.io/v1alpha1"


@pytest.mark.parametrize(("name", "wire"), ANNOTATION_KEYS.items(), ids=list(ANNOTATION_KEYS))
def test_annotation_key_is_byte_exact(name: str, wire: str) -> None:
    assert getattr(annotations, name) == wire


def test_annotations_module_holds_exactly_the_listed_keys() -> None:
    assert _public_keys(annotations) == ANNOTATION_KEYS


@pytest.mark.parametrize(("name", "wire"), LABEL_KEYS.items(), ids=list(LABEL_KEYS))
def test_label_key_is_byte_exact(name: str, wire: str) -> None:
    assert getattr(labels, name) == wire


def test_labels_module_holds_exactly_the_listed_keys() -> None:
    assert _public_keys(labels) == LABEL_KEYS
    assert labels.ROLE_EXPORT == "export"


def test_export_job_selector_is_spelled_as_the_spec_says() -> None:
    selector = f"{labels.PROCESS}=ns/p,{labels.ROLE}={labels.ROLE_EXPORT}"
    assert selector == "tatara.pleme.io/process=ns/p,tatara.pleme.io/role=export"


def test_return_trigger_value_is_the_string_true() -> None:
    assert annotations.RETURN_TRIGGER_SET == "true"


@pytest.mark.parametrize("bad", ["", "a/b"], ids=["empty name", "name with a slash"])
def test_key_rejects_a_malformed_name(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid key name"):
        group.key(bad)


# ── qualified reference ──────────────────────────────────────────────────────


def test_qualified_ref_joins_namespace_and_name_with_a_slash() -> None:
    assert annotations.qualified_ref("demo-test", "pr-42") == "demo-test/pr-42"


def test_split_qualified_ref_inverts_qualified_ref() -> None:
    assert annotations.split_qualified_ref("ns/name") == ("ns", "name")


@pytest.mark.parametrize(
    ("namespace", "name"),
    [("", "n"), ("ns", ""), ("a/b", "n"), ("ns", "a/b")],
    ids=["empty namespace", "empty name", "slash in namespace", "slash in name"],
)
def test_qualified_ref_rejects_parts_that_would_not_split_back(namespace: str, name: str) -> None:
    with pytest.raises(ValueError, match="invalid reference part"):
        annotations.qualified_ref(namespace, name)


@pytest.mark.parametrize("ref", ["ns", "/n", "ns/", "a/b/c", ""])
def test_split_qualified_ref_rejects_malformed_references(ref: str) -> None:
    with pytest.raises(ValueError, match="not a <namespace>/<name> reference"):
        annotations.split_qualified_ref(ref)


# ── annotation merge patch ───────────────────────────────────────────────────


# ── no other module spells a key ─────────────────────────────────────────────

ROOT = Path(__file__).resolve().parents[3]
KEY_OWNERS = {ROOT / "shared" / "domain" / "group.py"}


def _string_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_only_the_group_module_spells_the_group_in_code() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in ("shared", "reconciler", "pool_reconciler", "tools")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path not in KEY_OWNERS
        for line, text in _string_literals(path)
        if "tatara.pleme.io" in text
    ]
    assert offenders == [], "spell keys through shared.domain.group / annotations / labels / finalizers"
