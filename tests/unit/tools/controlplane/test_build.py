"""The wrapper go.mod replaces exactly the staging modules upstream requires at v0.0.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.controlplane.build import BuildError, Toolchain, build_once, run_go

UPSTREAM = """\
// This is a generated file. Do not edit directly.
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tgo.etcd.io/etcd/client/v3 v3.6.8
\tk8s.io/api v0.0.0
\tk8s.io/apiextensions-apiserver v0.0.0
\tk8s.io/klog/v2 v2.140.0
\tk8s.io/utils v0.0.0-20260210185600-b8788abfbbc2
\tk8s.io/streaming v0.0.0
)

require k8s.io/kms v0.0.0 // indirect

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
)
"""


def test_one_replace_per_staging_requirement_at_the_matching_v0_tag() -> None:
    go_mod = Toolchain(Path("/unused"), kubernetes_version="v1.36.3").wrapper_go_mod(UPSTREAM)
    replaces = [line.strip() for line in go_mod.splitlines() if "=>" in line]
    assert replaces == [
        "k8s.io/api => k8s.io/api v0.36.3",
        "k8s.io/apiextensions-apiserver => k8s.io/apiextensions-apiserver v0.36.3",
        "k8s.io/kms => k8s.io/kms v0.36.3",
        "k8s.io/streaming => k8s.io/streaming v0.36.3",
    ]


def test_go_and_godebug_lines_are_copied_from_the_release() -> None:
    go_mod = Toolchain(Path("/unused"), kubernetes_version="v1.36.3").wrapper_go_mod(UPSTREAM)
    assert "\ngo 1.26.0\n" in go_mod
    assert "\ngodebug default=go1.26\n" in go_mod


def test_pseudo_versions_and_tagged_requirements_are_left_alone() -> None:
    go_mod = Toolchain(Path("/unused")).wrapper_go_mod(UPSTREAM)
    assert "k8s.io/utils" not in go_mod
    assert "k8s.io/klog" not in go_mod


def test_a_go_mod_without_staging_requirements_is_an_error() -> None:
    with pytest.raises(BuildError, match=r"no `k8s\.io/\* v0\.0\.0` requirements"):
        Toolchain(Path("/unused")).wrapper_go_mod("module k8s.io/kubernetes\n\ngo 1.26.0\n")


def test_build_once_builds_only_what_is_missing(tmp_path: Path) -> None:
    built: list[str] = []
    build_once(tmp_path / "cache", lambda: bool(built), lambda: built.append("x"))
    build_once(tmp_path / "cache", lambda: bool(built), lambda: built.append("again"))
    assert built == ["x"]
    assert (tmp_path / "cache" / ".build.lock").is_file()


def test_without_go_on_path_the_error_names_what_it_was_for(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError, match=r"install Go >= 1\.26 to build helm"):
        run_go("version", cwd=tmp_path, purpose="helm")
