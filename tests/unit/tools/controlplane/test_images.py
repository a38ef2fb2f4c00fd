"""The image cache keys: the base image's follows its package list (in any order) and its sources, the tatara
image's follows the names and contents of the files the Containerfile copies and nothing else (no bytecode, no
caches, no egg-info); and buildah's storage stays under the cache folder."""

from __future__ import annotations

import re
import shutil
import string
import subprocess
from pathlib import Path

import pytest

from tools.controlplane import images
from tools.controlplane.images import (
    BASE_PACKAGES,
    BASE_SUITE,
    CONTEXT_PATHS,
    REPO_ROOT,
    ImageBuilder,
    ImageError,
    base_image,
    base_key,
    context_files,
    context_key,
)

# -- the base image ------------------------------------------------------------------------------------------


def _is_key(key: str) -> bool:
    return len(key) == 12 and set(key) <= set(string.hexdigits.lower())


def test_the_base_key_is_a_short_hex_digest_and_the_default_is_the_pinned_package_list() -> None:
    assert _is_key(base_key())
    assert base_key() == base_key(BASE_PACKAGES)
    assert base_image() == f"localhost/tatara/base:{BASE_SUITE}-{base_key()}"


@pytest.mark.parametrize(
    "packages",
    [tuple(reversed(BASE_PACKAGES)), tuple(sorted(BASE_PACKAGES)), (*BASE_PACKAGES[1:], BASE_PACKAGES[0])],
    ids=["reversed", "sorted", "rotated"],
)
def test_the_base_key_does_not_depend_on_the_package_order(packages: tuple[str, ...]) -> None:
    assert base_key(packages) == base_key(BASE_PACKAGES)


@pytest.mark.parametrize(
    "packages",
    [(*BASE_PACKAGES, "curl"), BASE_PACKAGES[1:], (*BASE_PACKAGES[1:], "ca-certificates-java"), ()],
    ids=["a package added", "a package removed", "a package replaced", "no packages"],
)
def test_the_base_key_changes_with_the_package_list(packages: tuple[str, ...]) -> None:
    assert base_key(packages) != base_key(BASE_PACKAGES)


def test_package_names_are_not_run_together() -> None:
    # "ab" + "c" and "a" + "bc" are different lists; a key over the concatenation would not see it
    assert base_key(("ab", "c")) != base_key(("a", "bc"))


@pytest.mark.parametrize(
    ("name", "value"),
    [("BASE_SUITE", "trixie"),
     ("BASE_MIRRORS", ("deb http://snapshot.debian.org/archive/debian/20250101T000000Z bookworm main",))],
    ids=["another suite", "another mirror"],
)
def test_the_base_key_changes_with_its_sources(monkeypatch: pytest.MonkeyPatch, name: str, value: object) -> None:
    before = base_key()
    monkeypatch.setattr(images, name, value)
    assert base_key() != before


@pytest.mark.parametrize("options", [(), ('Acquire::Check-Valid-Until "false"',)], ids=["none", "one"])
def test_the_base_key_changes_with_the_apt_options(monkeypatch: pytest.MonkeyPatch, options: tuple[str, ...]) -> None:
    monkeypatch.setattr(images, "apt_options", lambda: ('Acquire::Check-Valid-Until "false"',
                                                         'Acquire::Check-Date "false"'))
    before = base_key()
    monkeypatch.setattr(images, "apt_options", lambda: options)
    assert base_key() != before


@pytest.mark.parametrize(
    ("dump", "expected"),
    [('Acquire::Check-Valid-Until "false";\nAcquire::Check-Date "false";\nAPT::Architecture "amd64";\n',
      ('Acquire::Check-Valid-Until "false"', 'Acquire::Check-Date "false"')),
     ('Acquire::Check-Valid-Until "true";\nAPT::Architecture "amd64";\n', ()),
     ("", ())],
    ids=["a snapshot mirror's host", "dates checked", "no apt config"],
)
def test_apt_options_follow_the_hosts_own(monkeypatch: pytest.MonkeyPatch, dump: str,
                                          expected: tuple[str, ...]) -> None:
    images.apt_options.cache_clear()
    monkeypatch.setattr(images.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, dump, ""))
    try:
        assert images.apt_options() == expected
    finally:
        images.apt_options.cache_clear()


# -- the tatara image's build context ------------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


COPIED = {
    "Containerfile": "FROM x\n",
    ".containerignore": "**/__pycache__\n",
    "pyproject.toml": "[project]\n",
    "constraints.txt": "anyio==4.6\n",
    "README.md": "# tatara\n",
    "shared/__init__.py": "",
    "shared/kube/client.py": "x = 1\n",
    "reconciler/app.py": "y = 2\n",
    "pool_reconciler/app.py": "z = 3\n",
    "export_worker/worker.py": "w = 4\n",
}
LEFT_OUT = {
    "shared/__pycache__/__init__.cpython-311.pyc": "bytecode",
    "shared/kube/__pycache__/client.cpython-311.pyc": "bytecode",
    "reconciler/stray.pyc": "bytecode",
    "shared/.mypy_cache/3.11/x.json": "{}",
    "reconciler/.pytest_cache/v/cache": "{}",
    "pool_reconciler/.ruff_cache/0.1/x": "",
    "shared/tatara.egg-info/PKG-INFO": "Name: tatara\n",
    "tools/cli.py": "tooling",
    "tests/unit/test_x.py": "a test",
    "docs/architecture.md": "docs",
    "LICENSE": "MIT",
}


@pytest.fixture
def context(tmp_path: Path) -> Path:
    return _tree(tmp_path / "repo", {**COPIED, **LEFT_OUT})


def test_context_files_are_what_the_containerfile_copies_sorted(context: Path) -> None:
    assert context_files(context) == sorted(context / rel for rel in COPIED)


def test_context_files_tolerate_missing_paths(tmp_path: Path) -> None:
    root = _tree(tmp_path / "repo", {"Containerfile": "FROM x\n", "shared/a.py": ""})
    assert context_files(root) == [root / "Containerfile", root / "shared" / "a.py"]


def test_context_paths_cover_every_copy_of_the_repositorys_containerfile() -> None:
    copied: set[str] = set()
    for line in (REPO_ROOT / "Containerfile").read_text().splitlines():
        words = line.split()
        if words[:1] != ["COPY"] or any(w.startswith("--from") for w in words):
            continue
        copied |= {w.rstrip("/") for w in words[1:-1] if not w.startswith("--")}
    assert copied  # the parse found the COPY lines
    assert copied <= set(CONTEXT_PATHS), copied - set(CONTEXT_PATHS)
    assert "Containerfile" in CONTEXT_PATHS


def test_the_containerfile_takes_the_base_image_as_build_argument() -> None:
    # ImageBuilder.tatara passes --build-arg=PYTHON_IMAGE=<the local base>
    assert re.search(r"^ARG PYTHON_IMAGE=", (REPO_ROOT / "Containerfile").read_text(), re.M)


def _key_after(context: Path, change: dict[str, str]) -> str:
    _tree(context, change)
    return context_key(context)


@pytest.mark.parametrize(
    "change",
    [{"shared/kube/client.py": "x = 2\n"}, {"Containerfile": "FROM y\n"}, {"constraints.txt": "anyio==4.7\n"},
     {"reconciler/new.py": ""}, {"export_worker/worker.py": "w = 4\n\n"}],
    ids=["a source file", "the Containerfile", "the constraints", "a new empty file", "a trailing newline"],
)
def test_the_context_key_changes_with_a_copied_file(context: Path, change: dict[str, str]) -> None:
    before = context_key(context)
    assert _is_key(before)
    assert _key_after(context, change) != before


@pytest.mark.parametrize("rel", sorted(LEFT_OUT))
def test_the_context_key_ignores_files_the_build_does_not_copy(context: Path, rel: str) -> None:
    before = context_key(context)
    assert _key_after(context, {rel: "changed"}) == before


def test_the_context_key_changes_when_a_file_is_renamed(context: Path) -> None:
    before = context_key(context)
    (context / "reconciler" / "app.py").rename(context / "reconciler" / "main.py")
    assert context_key(context) != before


def test_the_context_key_sees_content_moved_between_files(tmp_path: Path) -> None:
    one = _tree(tmp_path / "one", {"shared/a.py": "xy", "shared/b.py": ""})
    two = _tree(tmp_path / "two", {"shared/a.py": "x", "shared/b.py": "y"})
    assert context_key(one) != context_key(two)


def test_the_context_key_does_not_depend_on_where_the_tree_is(tmp_path: Path) -> None:
    assert context_key(_tree(tmp_path / "a", COPIED)) == context_key(_tree(tmp_path / "b" / "c", COPIED))


def test_the_context_key_changes_with_the_extra_strings(context: Path) -> None:
    plain = context_key(context)
    with_base = context_key(context, ["base-key-1"])
    assert len({plain, with_base, context_key(context, ["base-key-2"])}) == 3


# -- buildah ---------------------------------------------------------------------------------------------------


def test_buildah_runs_in_a_private_mount_namespace_on_storage_under_the_cache(tmp_path: Path) -> None:
    args = ImageBuilder(tmp_path)._buildah("images")
    assert args[:4] == ["unshare", "--mount", "--propagation", "private"]
    assert args[4] == "buildah"
    assert args[-1] == "images"
    storage = {a.split("=", 1)[0]: Path(a.split("=", 1)[1]) for a in args if a.startswith(("--root=", "--runroot="))}
    assert set(storage) == {"--root", "--runroot"}
    for path in storage.values():
        assert path.is_relative_to(tmp_path)  # never /var/lib/containers


def test_an_archive_is_named_by_image_and_key(tmp_path: Path) -> None:
    assert ImageBuilder(tmp_path).archive("tatara", "0123456789ab") == tmp_path / "tatara-0123456789ab.tar"


@pytest.mark.parametrize(("args", "tool"), [(["mmdebstrap", "x"], "mmdebstrap"), (["unshare", "--mount"], "buildah")])
def test_a_missing_tool_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str], tool: str) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ImageError, match=f"`{tool}` is not installed"):
        ImageBuilder(tmp_path)._run(args, what="x")
