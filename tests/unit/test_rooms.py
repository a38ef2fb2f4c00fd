"""The rooms hold (docs/architecture.md): the runtime imports nothing of the domain, the domain nothing of
the reconcilers, the binaries nothing of the local tooling, and the image ships neither the tooling nor
its dependencies.

Imports are checked in fresh interpreters (``sys.modules`` after the import), so nothing a test run
imported earlier can hide a dependency.
"""

from __future__ import annotations

import ast
import graphlib
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
PRODUCT = ("shared", "reconciler", "pool_reconciler", "export_worker")


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


# ── no import cycle among the product's modules ──


def _module_files(rooms: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name → file, for every module and package of ``rooms``."""
    found: dict[str, Path] = {}
    for room in rooms:
        for path in (ROOT / room).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _runtime_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of the file, at any depth (a function-level import is still an edge: a lazy
    import is how a cycle hides), except those under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return [node for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in typing_only]


def import_graph(rooms: tuple[str, ...] = PRODUCT) -> dict[str, set[str]]:
    """Module → the modules of ``rooms`` it imports (``from p import m`` counts ``p.m`` when it is a module)."""
    files = _module_files(rooms)

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges: set[str] = set()
        for node in _runtime_imports(path):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([node.module] if node.module else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            edges.update(t for t in map(known, targets) if t is not None and t != module)
        graph[module] = edges
    return graph


def test_the_import_graph_sees_the_known_edges() -> None:
    graph = import_graph()
    assert "shared.domain.api.wire" in graph["shared.domain.api.codec"]
    assert "shared.kube.client" in graph["shared.kube.informer"]
    assert len(graph) == len(_module_files(PRODUCT))


def test_no_import_cycle_among_the_product_modules() -> None:
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as err:
        raise AssertionError(f"import cycle: {' -> '.join(err.args[1])}") from None


def test_a_cycle_is_found_when_there_is_one() -> None:
    """The check itself can fail: wire importing codec back, as it once did lazily, is a cycle."""
    graph = import_graph()
    graph["shared.domain.api.wire"].add("shared.domain.api.codec")
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()

