"""The requeue delays of the Process reconciler's decisions, in seconds (docs/behaviour.md#timing).

HEARTBEAT, the delay of every wait, is configuration (``--heartbeat-seconds``, carried as
``Observed.heartbeat_seconds``); the two below are fixed.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SHORT", "TICK"]

TICK: Final = 1.0
"""After a phase change: the next phase is looked at a moment later."""

SHORT: Final = 5.0
"""While children converge or drain."""
