"""`tatara up` on a real cluster: which Leases count as a running controller, which CRDs are missing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tools.real_cluster import held, missing_crds

NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(("spec", "expected"), [
    pytest.param({"holderIdentity": "pod-a", "leaseDurationSeconds": 15, "renewTime": "2026-12-01T09:59:50.000000Z"},
                 True, id="renewed 10 s ago with a 15 s term: held"),
    pytest.param({"holderIdentity": "pod-a", "leaseDurationSeconds": 15, "renewTime": "2026-12-01T09:59:40.000000Z"},
                 False, id="renewed 20 s ago with a 15 s term: expired"),
    pytest.param({"leaseDurationSeconds": 1, "renewTime": "2026-12-01T09:59:59.000000Z"}, False,
                 id="no holder: released"),
    pytest.param({"holderIdentity": "pod-a"}, True, id="a holder without renewTime: held"),
])
def test_held(spec: dict[str, Any], expected: bool) -> None:
    assert held({"spec": spec}, NOW) is expected


def test_missing_crds_keeps_the_order_and_skips_existing_ones() -> None:
    docs = [{"metadata": {"name": n}} for n in ("a", "b", "c")]
    assert missing_crds(docs, ["b", "z"]) == [{"metadata": {"name": "a"}}, {"metadata": {"name": "c"}}]
