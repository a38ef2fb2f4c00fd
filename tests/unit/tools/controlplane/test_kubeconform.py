"""tools.controlplane.kubeconform: where the pinned binary is cached and how it is stamped (no build here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.controlplane.kubeconform import KUBECONFORM_VERSION, Kubeconform


def test_cached_under_the_tatara_cache_dir_by_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TATARA_CACHE_DIR", str(tmp_path))
    kubeconform = Kubeconform.default()
    assert kubeconform.binary == tmp_path / "kubeconform" / KUBECONFORM_VERSION / "kubeconform"
    assert not kubeconform.is_built()


def test_the_version_stamp_is_upstreams() -> None:
    assert KUBECONFORM_VERSION == "v0.8.0"
    assert "-X main.version=v0.8.0" in Kubeconform(Path("/nonexistent")).ldflags()
