"""Typed msgspec models of the tatara.pleme.io/v1alpha1 kinds, one module per concept.

Entry points: :class:`~shared.domain.api.process.Process`, :class:`~shared.domain.api.table.ProcessTable`,
:class:`~shared.domain.api.pool.EphemeralPool`, :class:`~shared.domain.api.allocation.EphemeralAllocation`;
decode/encode helpers in :mod:`shared.domain.api.codec`.
"""

from shared.domain.api.allocation import EphemeralAllocation
from shared.domain.api.pool import EphemeralPool
from shared.domain.api.process import Process, ProcessSpec, ProcessStatus
from shared.domain.api.table import ProcessTable

__all__ = ["EphemeralAllocation", "EphemeralPool", "Process", "ProcessSpec", "ProcessStatus", "ProcessTable"]
