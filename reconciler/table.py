"""The ProcessTable, in three modules along its ideas (docs/architecture.md#the-processtable-writer):

- :mod:`reconciler.table_rows`: the status as pure functions (counts, capped rows, conditions, the
  guarded claims patch);
- :mod:`reconciler.table_keeper`: the one get-or-create of the table, recreated past every held PID;
- :mod:`reconciler.table_writer`: the status writer, a Controller of the one table under ``finalize()``
  and the one writer of its status, claims included.

This module re-exports their names for the callers that import them from here.
"""

from __future__ import annotations

from reconciler.table_keeper import (
    JSON_PATCH,
    TableKeeper,
    default_table,
    held_sequence,
    holds_pid,
    listed_process,
    sequences_of,
    table_existed,
)
from reconciler.table_rows import (
    DEFAULT_MAX_ROWS,
    DEFAULT_MAX_ROWS_BYTES,
    TableStatusPatch,
    claims_patch,
    is_ready,
    pid_sort_key,
    process_entry,
    table_status,
    with_table_conditions,
)
from reconciler.table_writer import DEFAULT_FLEET_CLUSTER, DEFAULT_INTERVAL, TableStatusWriter

__all__ = [
    "DEFAULT_FLEET_CLUSTER",
    "DEFAULT_INTERVAL",
    "DEFAULT_MAX_ROWS",
    "DEFAULT_MAX_ROWS_BYTES",
    "JSON_PATCH",
    "TableKeeper",
    "TableStatusPatch",
    "TableStatusWriter",
    "claims_patch",
    "default_table",
    "held_sequence",
    "holds_pid",
    "is_ready",
    "listed_process",
    "pid_sort_key",
    "process_entry",
    "sequences_of",
    "table_existed",
    "table_status",
    "with_table_conditions",
]
