"""containerd is built as three binaries (containerd, ctr, the runc shim) from one pinned module, each with the
tags that leave out the snapshotters needing C libraries and upstream's version stamp; nothing is compiled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tools.controlplane import containerd
from tools.controlplane.containerd import CONTAINERD, CONTAINERD_VERSION, built
from tools.controlplane.flux import Built

MODULE = "github.com/containerd/containerd/v2"
BINARIES = {
    "containerd": f"{MODULE}/cmd/containerd",
    "ctr": f"{MODULE}/cmd/ctr",
    "containerd-shim-runc-v2": f"{MODULE}/cmd/containerd-shim-runc-v2",
}
TAGS = {"no_btrfs", "no_devmapper", "no_zfs", "no_aufs"}


def test_the_component_builds_containerd_ctr_and_the_runc_shim_from_one_module() -> None:
    assert CONTAINERD.module == MODULE
    assert CONTAINERD.version == CONTAINERD_VERSION == "v2.2.9"
    assert dict(CONTAINERD.binaries) == BINARIES
    assert CONTAINERD.binaries[0][0] == "containerd"  # the main binary, Built.binary
    assert set(CONTAINERD.tags) == TAGS
    assert not CONTAINERD.crds


def test_the_version_is_stamped_as_upstreams_makefile_does() -> None:
    assert f"-X {MODULE}/version.Version={CONTAINERD_VERSION}" in CONTAINERD.ldflags
    assert f"-X {MODULE}/version.Package={MODULE}" in CONTAINERD.ldflags


def test_the_binaries_are_cached_per_version_and_built_only_when_all_three_exist(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(containerd, "default_cache_dir", lambda: tmp_path)
    target = built()
    bin_dir = tmp_path / "containerd" / "containerd-v2.2.9" / "bin"
    assert target.binary == bin_dir / "containerd"
    bin_dir.mkdir(parents=True)
    names = list(BINARIES)
    for name in names[:-1]:
        (bin_dir / name).write_text("")
        os.chmod(bin_dir / name, 0o755)
    assert not target.is_built()  # the shim is missing
    (bin_dir / names[-1]).write_text("")
    os.chmod(bin_dir / names[-1], 0o755)
    assert target.is_built()


def test_every_binary_is_built_with_the_tags_and_the_version_stamp(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    upstream = tmp_path / "upstream.go.mod"
    upstream.write_text(f"module {MODULE}\n\ngo 1.25.0\n")
    calls: list[tuple[str, ...]] = []

    def go(self: Built, *args: str, cwd: Path) -> str:
        calls.append(args)
        if args[:2] == ("mod", "download"):
            return json.dumps({"GoMod": str(upstream), "Dir": str(tmp_path / "module")})
        return ""

    monkeypatch.setattr(Built, "_go", go)
    Built(CONTAINERD, tmp_path / "root")._build()

    downloads = [c for c in calls if c[:2] == ("mod", "download")]
    assert downloads == [("mod", "download", "-json", f"{MODULE}@{CONTAINERD_VERSION}")]
    (get,) = [c for c in calls if c[:2] == ("get", "-tool")]
    assert set(get[2:]) == {f"{package}@{CONTAINERD_VERSION}" for package in BINARIES.values()}

    builds = [c for c in calls if c[0] == "build"]
    assert len(builds) == 3
    built_packages = {}
    for args in builds:
        (tags,) = [a for a in args if a.startswith("-tags=")]
        assert set(tags.removeprefix("-tags=").split(",")) == TAGS
        (ldflags,) = [a for a in args if a.startswith("-ldflags=")]
        assert f"-X {MODULE}/version.Version={CONTAINERD_VERSION}" in ldflags
        output = Path(args[args.index("-o") + 1])
        built_packages[output.name] = args[-1]
    assert built_packages == BINARIES
