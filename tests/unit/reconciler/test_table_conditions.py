"""The ProcessTable's kstatus conditions and ``observedGeneration`` (docs/behaviour.md#processtable-status)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reconciler.table_rows import table_status, with_table_conditions
from shared.domain.api.codec import convert
from shared.domain.api.table import ProcessTable

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)


def table(generation: int, *, deleting: bool = False, **status: Any) -> ProcessTable:
    meta: dict[str, Any] = {"name": "proc", "generation": generation}
    if deleting:
        meta["deletionTimestamp"] = "2025-06-01T11:00:00Z"
    body: dict[str, Any] = {"metadata": meta, "spec": {}}
    if status:
        body["status"] = status
    return convert(body, ProcessTable)


@pytest.mark.parametrize(("deleting", "expected", "reason"), [
    (False, ("True", "False", "False"), "Counted"),
    (True, ("False", "True", "False"), "Deleting"),
], ids=["a-kept-table-is-ready", "a-deleted-table-still-held-reconciles"])
def test_the_table_conditions(deleting: bool, expected: tuple[str, str, str], reason: str) -> None:
    status = with_table_conditions(table_status([], NOW), table(7, deleting=deleting), NOW)
    wire: dict[str, Any] = status.to_json()
    assert wire["observedGeneration"] == 7
    assert [(c["type"], c["status"], c["reason"], c["observedGeneration"]) for c in wire["conditions"]] == [
        (t, v, reason, 7) for t, v in zip(("Ready", "Reconciling", "Stalled"), expected, strict=True)]
    assert wire["conditions"][0]["message"] == "0 Process(es), 0 ready"


def test_a_new_generation_alone_makes_the_write_differ() -> None:
    stored = table(3, processCount=0, readyCount=0, observedGeneration=3)
    same = with_table_conditions(table_status([], NOW), stored, NOW)
    assert stored.status is not None
    assert same.compared == (0, 0, [], 3)
    bumped = with_table_conditions(table_status([], NOW), table(4, processCount=0, readyCount=0,
                                                                   observedGeneration=3), NOW)
    assert bumped.compared != same.compared


def test_the_transition_time_is_kept_while_ready_holds() -> None:
    stored = table(3, processCount=0, readyCount=0, conditions=[
        {"type": "Ready", "status": "True", "reason": "Counted", "message": "m",
         "lastTransitionTime": "2025-06-01T10:00:00Z"}])
    wire: dict[str, Any] = with_table_conditions(table_status([], NOW), stored, NOW).to_json()
    assert wire["conditions"][0]["lastTransitionTime"] == "2025-06-01T10:00:00Z"
    assert wire["conditions"][1]["lastTransitionTime"] == "2025-06-01T12:00:00Z"
