"""The idempotency key of one export run: what a sink de-duplicates a retried export by (pure).

— docs/wire-format.md#export-idempotency-keys. ``tatara-export/<uid>/<generation>/<index>``: the Process's
``metadata.uid``, its ``metadata.generation`` when the export Job was made (0 when the server gave none) and
the export's index in ``lifetime.ephemeral.exports``. The reconciler passes it to the worker
(``--idempotency-key``); the worker sends it as JetStream's ``Nats-Msg-Id`` and as HTTP's ``Idempotency-Key``.
"""

from __future__ import annotations

from typing import Final

__all__ = ["KEY_PREFIX", "export_key", "idempotency_key_header"]

KEY_PREFIX: Final = "tatara-export/"
"""Every key starts with this, so a consumer can tell tatara's keys from others on a shared stream."""


def export_key(uid: str, generation: int | None, index: int) -> str:
    """``tatara-export/<uid>/<generation>/<index>``.

    Raises:
        ValueError: an empty ``uid`` or a negative ``index`` (a key must name one export of one Process).
    """
    if not uid:
        raise ValueError("an export key needs the Process uid")
    if index < 0:
        raise ValueError(f"export index {index} is negative")
    return f"{KEY_PREFIX}{uid}/{generation or 0}/{index}"


def idempotency_key_header(key: str) -> str:
    """The ``Idempotency-Key`` header value for ``key``: a Structured Field string (RFC 8941 §3.3.3, as the
    IETF httpapi idempotency-key draft defines the header), i.e. ``key`` in double quotes with ``\\`` and
    ``"`` escaped.

    Raises:
        ValueError: ``key`` holds a character an sf-string cannot carry (outside printable ASCII).
    """
    if any(not 0x20 <= ord(c) <= 0x7E for c in key):
        raise ValueError(f"idempotency key {key!r} holds a character outside printable ASCII")
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
