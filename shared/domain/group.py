"""The API group and version every tatara kind lives in (docs/wire-format.md#kinds).

This is the only module that spells the group name. Every annotation, label and
finalizer key is composed from :data:`GROUP` through :func:`key`.
"""

from typing import Final

GROUP: Final = "tatara.pleme.io"
"""API group of Process, ProcessTable, EphemeralPool and EphemeralAllocation."""

VERSION: Final = "v1alpha1"
"""The only served and storage version."""

API_VERSION: Final = f"{GROUP}/{VERSION}"
"""``apiVersion`` of every tatara object: ``tatara.pleme.io/v1alpha1``."""

KEY_PREFIX: Final = f"{GROUP}/"
"""Prefix of every tatara metadata key (annotation, label, finalizer)."""


def key(name: str) -> str:
    """Return the metadata key ``tatara.pleme.io/<name>``.

    Raises ``ValueError`` when ``name`` is empty or contains ``/`` (a key has one
    prefix segment and one name segment).
    """
    if not name or "/" in name:
        raise ValueError(f"invalid key name: {name!r}")
    return KEY_PREFIX + name
