"""Finalizer keys the tatara controllers put on the objects they own, and the pure
list operations that add or remove one.

Keys: process-crd.md §13.1 and §13.3. Every key has the shape
``tatara.pleme.io/<owner>-finalizer``; the tests pin that shape for the whole
family (wire-form parity, suffix, group prefix, uniqueness).
"""

from collections.abc import Sequence
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


def ensure_finalizer(finalizers: Sequence[str] | None, finalizer: str) -> list[str] | None:
    """Return ``finalizers`` with ``finalizer`` appended, or ``None`` when it is
    already present (nothing to write). ``None`` input means an empty list.
    Other controllers' entries are kept in place.
    """
    current = list(finalizers or ())
    if finalizer in current:
        return None
    return [*current, finalizer]


def remove_finalizer(finalizers: Sequence[str] | None, finalizer: str) -> list[str] | None:
    """Return ``finalizers`` without any occurrence of ``finalizer``, or ``None`` when it
    is absent (nothing to write). Order of the remaining entries is kept.
    """
    current = list(finalizers or ())
    if finalizer not in current:
        return None
    return [f for f in current if f != finalizer]


def finalizers_patch(finalizers: Sequence[str], resource_version: str) -> dict[str, object]:
    """Build the merge-patch body that replaces ``metadata.finalizers`` with
    ``finalizers``, guarded by ``resource_version`` so a concurrent change by another
    controller makes the API server answer 409 Conflict instead of losing its entry
    (DESIGN §4 "Writes").
    """
    return {"metadata": {"finalizers": list(finalizers), "resourceVersion": resource_version}}
