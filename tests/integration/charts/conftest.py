"""The pinned helm binary, built from its Go module on first use (tools/controlplane/helm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.controlplane.helm import Helm


@pytest.fixture(scope="session")
def helm() -> Path:
    """Path of helm (``make control-plane`` builds it ahead of time; cold build about 100 s)."""
    return Helm.default().ensure_built()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/charts/" in str(item.path):
            item.add_marker(pytest.mark.helm)
