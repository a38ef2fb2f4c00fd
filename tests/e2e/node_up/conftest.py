"""``tatara up`` on the local node (``node`` marker): a package of its own, so the node tier's shared cluster
(tests/e2e/node) is stopped before this test starts a plane and a node of its own."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under tests/e2e/node_up as ``node``."""
    for item in items:
        if "/e2e/node_up/" in str(item.path):
            item.add_marker(pytest.mark.node)
