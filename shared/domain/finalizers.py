"""Finalizer keys the tatara controllers put on the objects they own (the guarded writes that add and
remove them are the runtime's, :mod:`shared.kube.finalizer`).

Keys: process-crd.md §13.1 and §13.3. Every key has the shape
``tatara.pleme.io/<owner>-finalizer``; the tests pin that shape for the whole
family (wire-form parity, suffix, group prefix, uniqueness).
"""

from typing import Final

from shared.domain.group import KEY_PREFIX

GROUP_PREFIX: Final = KEY_PREFIX
"""Prefix every finalizer key carries: ``tatara.pleme.io/``."""

FINALIZER_SUFFIX: Final = "-finalizer"
"""Suffix every finalizer key carries, telling it apart from annotation and label keys."""

PROCESS: Final = f"{GROUP_PREFIX}process{FINALIZER_SUFFIX}"
"""Put on a Process by the Process reconciler when it leaves Pending; removed once the
Process is Reaped and its terminal attestation is written."""

ALLOCATION: Final = f"{GROUP_PREFIX}allocation{FINALIZER_SUFFIX}"
"""Put on an EphemeralAllocation by the allocation controller; removed after its member
has been returned or replaced."""

POOL: Final = f"{GROUP_PREFIX}pool{FINALIZER_SUFFIX}"
"""Put on an EphemeralPool by the pool controller; removed after its member Processes
are torn down."""

ALL: Final[tuple[str, ...]] = (PROCESS, ALLOCATION, POOL)
"""Every tatara finalizer key, in declaration order."""
