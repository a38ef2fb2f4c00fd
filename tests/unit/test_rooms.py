"""The rooms hold (docs/architecture.md): the runtime imports nothing of the domain, the domain nothing of
the reconcilers, the binaries nothing of the local tooling, and the image ships neither the tooling nor
its dependencies.

Imports are checked in fresh interpreters (``sys.modules`` after the import), so nothing a test run
imported earlier can hide a dependency.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import shared.domain
import shared.kube
from tests.unit.test_containerfile import CONTAINERFILE, parse

ROOT = Path(__file__).resolve().parents[2]
OURS = ("shared", "reconciler", "pool_reconciler", "export_worker", "tools", "tests", "bench")


def loaded_after(statement: str) -> list[str]:
    """Modules of ours and third-party top-level packages in ``sys.modules`` after ``statement``."""
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    modules: list[str] = json.loads(out.stdout)
    return modules


def modules_on_disk(package: str) -> list[str]:
    """Every module (not package) under ``package``'s folder, by its file: the independent count the
    walks below are checked against, so a sub-package the walk misses fails the test."""
    folder = ROOT.joinpath(*package.split("."))
    return sorted(
        ".".join((package, *path.relative_to(folder).with_suffix("").parts))
        for path in folder.rglob("*.py")
        if path.name != "__init__.py"
    )


RUNTIME_MODULES = sorted(f"shared.kube.{m.name}" for m in pkgutil.iter_modules(shared.kube.__path__))


def test_the_walks_find_every_module_on_disk() -> None:
    assert modules_on_disk("shared.kube") == RUNTIME_MODULES
    assert modules_on_disk("shared.domain") == DOMAIN_MODULES, "a domain sub-package was not walked"


def test_the_runtime_imports_nothing_of_the_domain_or_the_binaries() -> None:
    modules = loaded_after("\n".join(f"import {m}" for m in RUNTIME_MODULES))
    ours = [m for m in modules if m.split(".")[0] in OURS]
    assert set(RUNTIME_MODULES) <= set(ours), "every runtime module was imported"
    assert [m for m in ours if m != "shared" and not m.startswith("shared.kube")] == []


DOMAIN_MODULES = sorted(
    m.name for m in pkgutil.walk_packages(shared.domain.__path__, "shared.domain.") if not m.ispkg
)


def test_the_domain_imports_neither_the_reconcilers_nor_the_tooling() -> None:
    modules = loaded_after("\n".join(f"import {m}" for m in DOMAIN_MODULES))
    assert set(DOMAIN_MODULES) <= set(modules), "every domain module was imported"
    assert [m for m in modules
            if m.split(".")[0] in ("reconciler", "pool_reconciler", "export_worker", "tools", "tests")] == []


def test_the_package_above_the_runtime_is_empty_of_imports() -> None:
    tree = ast.parse((ROOT / "shared" / "__init__.py").read_text())
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert imports == [], "importing shared.kube must not pull anything in through shared/__init__.py"


@pytest.mark.parametrize("binary", ["reconciler.main", "pool_reconciler.main", "export_worker.main"])
def test_the_binaries_import_no_local_tooling(binary: str) -> None:
    modules = loaded_after(f"import {binary}")
    assert binary in modules
    assert [m for m in modules if m.split(".")[0] in ("tools", "tests", "bench", "cryptography")] == []


def test_the_export_worker_imports_neither_controller() -> None:
    modules = loaded_after("import export_worker.main")
    assert [m for m in modules if m.split(".")[0] in ("reconciler", "pool_reconciler")] == []


def test_the_image_copies_only_the_product_rooms() -> None:
    _, stages = parse(CONTAINERFILE.read_text())
    sources = sorted(
        source.rstrip("/")
        for stage in stages
        for rest in stage.args("COPY")
        if not rest.startswith("--from")
        for source in rest.split()[:-1]  # the last word is the destination
    )
    assert sources == sorted(["pyproject.toml", "constraints.txt", "README.md", "shared", "reconciler",
                              "pool_reconciler", "export_worker"])


def test_the_product_distribution_has_no_tooling_package_or_dependency() -> None:
    product = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = product["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(packages) == ["export_worker*", "pool_reconciler*", "reconciler*", "shared*"]
    dependencies = " ".join(product["project"]["dependencies"])
    assert "cryptography" not in dependencies, "only the local PKI (tools/) needs it"
    assert "tatara" not in product["project"]["scripts"], "the tatara CLI is tooling"
    tooling = tomllib.loads((ROOT / "tools" / "pyproject.toml").read_text())
    assert tooling["project"]["scripts"] == {"tatara": "tools.cli:main"}
    assert any(d.startswith("cryptography") for d in tooling["project"]["dependencies"])
