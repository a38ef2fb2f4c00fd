"""Typed msgspec models of the tatara.pleme.io/v1alpha1 kinds, one module per concept.

Entry points: :class:`~shared.api.process.Process`, :class:`~shared.api.table.ProcessTable`,
:class:`~shared.api.pool.EphemeralPool`, :class:`~shared.api.allocation.EphemeralAllocation`;
decode/encode helpers in :mod:`shared.api.codec`.
"""

from shared.api.allocation import EphemeralAllocation
from shared.api.pool import EphemeralPool
from shared.api.process import Process, ProcessSpec, ProcessStatus
from shared.api.table import ProcessTable

__all__ = ["EphemeralAllocation", "EphemeralPool", "Process", "ProcessSpec", "ProcessStatus", "ProcessTable"]
