"""Finalizer keys the tatara controllers put on the objects they own (the guarded writes that add and
remove them are the runtime's, :mod:`shared.kube.finalizer`).

Where each goes and when: docs/wire-format.md#finalizers. Every key has the shape
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
Process is Reaped (after its owned children are deleted)."""

ALLOCATION: Final = f"{GROUP_PREFIX}allocation{FINALIZER_SUFFIX}"
"""Put on an EphemeralAllocation by the allocation controller; removed when the deleted
allocation holds no member (never bound, or its member returned)."""

POOL: Final = f"{GROUP_PREFIX}pool{FINALIZER_SUFFIX}"
"""Put on an EphemeralPool by the pool controller; removed once the deleted pool
has no member Process left."""

TABLE: Final = f"{GROUP_PREFIX}processtable{FINALIZER_SUFFIX}"
"""Put on the ProcessTable by the Process reconciler (at creation, or on the first status write);
removed once the deleted table's sequence numbers are held by no Process, so a deleted table cannot
come back at ``nextSequence: 1`` while PIDs it handed out are in use."""

ALL: Final[tuple[str, ...]] = (PROCESS, ALLOCATION, POOL, TABLE)
"""Every tatara finalizer key, in declaration order."""
