"""What became of one export: Shipped, Rejected or Failed, and its wire form (pure).

— docs/wire-format.md#export-receipts. The outcome is externally tagged with camelCase variant names:
``"shipped"``, ``{"rejected": "<message>"}``, ``{"failed": "<message>"}``; its canonical JSON is the
receipt's control pillar.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from shared.domain.api.closed_set import ClosedSet

__all__ = ["ExportOutcome", "OutcomeKind", "http_outcome"]


class OutcomeKind(ClosedSet):
    """The outcome kinds, as written in ``evidence.outcome``."""

    SHIPPED = "Shipped"
    REJECTED = "Rejected"
    FAILED = "Failed"


@dataclass(frozen=True)
class ExportOutcome:
    """``kind`` and, unless Shipped, the message saying why.

    A Shipped outcome may also say that the sink already held the message (``duplicate``: JetStream's
    acknowledgement said so, for a retry within the stream's duplicate window) and what the sink holds
    (``stored``: the bytes of that earlier message, when they could be read back); neither is part of
    :meth:`wire` (docs/wire-format.md#export-receipts)."""

    kind: OutcomeKind
    message: str | None = None
    duplicate: bool = False
    stored: bytes | None = None

    @classmethod
    def shipped(cls, *, duplicate: bool = False, stored: bytes | None = None) -> ExportOutcome:
        """The sink took the event; ``duplicate`` when it already held it under the same idempotency key."""
        return cls(OutcomeKind.SHIPPED, duplicate=duplicate, stored=stored)

    @classmethod
    def rejected(cls, message: str) -> ExportOutcome:
        """The destination answered and refused (e.g. ``HTTP 500 Internal Server Error``)."""
        return cls(OutcomeKind.REJECTED, message)

    @classmethod
    def failed(cls, message: str) -> ExportOutcome:
        """Nothing reached the destination, or its answer never came (e.g. ``NATS connect: …``)."""
        return cls(OutcomeKind.FAILED, message)

    @property
    def is_shipped(self) -> bool:
        return self.kind is OutcomeKind.SHIPPED

    def wire(self) -> Any:
        """``"shipped"``, ``{"rejected": m}`` or ``{"failed": m}``."""
        if self.kind is OutcomeKind.SHIPPED:
            return "shipped"
        return {self.kind.value.lower(): self.message or ""}


def http_outcome(status: int) -> ExportOutcome:
    """2xx → Shipped; anything else → Rejected ``HTTP <code> <reason>``, the reason phrase as the reference's
    HTTP client prints a status (``HTTP 500 Internal Server Error``; ``<unknown status code>`` for a code
    without one)."""
    if 200 <= status < 300:
        return ExportOutcome.shipped()
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "<unknown status code>"
    return ExportOutcome.rejected(f"HTTP {status} {reason}")
