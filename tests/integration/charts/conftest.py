"""The chart tests are marked ``helm`` (they use the session fixture ``helm``, tests/conftest.py)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/charts/" in str(item.path):
            item.add_marker(pytest.mark.helm)
