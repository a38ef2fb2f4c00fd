"""export_worker/worker.py: the texts of its Events (docs/behaviour.md#the-export-worker)."""

from __future__ import annotations

import pytest

from export_worker.config import WorkerConfig
from export_worker.worker import skipped_message
from shared.domain.api.codec import convert
from shared.domain.api.export import ExportSpec


@pytest.mark.parametrize(
    ("count", "names"),
    [
        pytest.param(1, "a/k0", id="one value is named"),
        pytest.param(5, "a/k0, a/k1, a/k2, a/k3, a/k4", id="five values are named"),
        pytest.param(7, "a/k0, a/k1, a/k2, a/k3, a/k4, …", id="beyond five the list ends with an ellipsis"),
    ],
)
def test_the_receipts_skipped_message_names_the_values_and_where_they_are_counted(count: int, names: str) -> None:
    config = WorkerConfig(spec=convert({"source": {"receipts": {}}, "channel": {"stdout": {}}}, ExportSpec),
                          process_namespace="demo", process_name="pr-1", receipt_configmap="pr-1-export-0-receipt")
    unparsable = tuple(f"a/k{i}" for i in range(count))
    assert skipped_message(config, unparsable) == (
        f"export receipt pr-1-export-0-receipt: {count} value(s) annotated tatara.pleme.io/process=demo/pr-1 "
        f"did not parse as a receipt and were skipped (evidence.skipped_receipts): {names}")
