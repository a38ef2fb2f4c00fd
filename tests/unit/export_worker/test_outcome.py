"""export_worker/outcome.py: the outcome's wire form (the control pillar) and the HTTP status mapping."""

from __future__ import annotations

from typing import Any

import pytest

from export_worker.outcome import ExportOutcome, OutcomeKind, http_outcome


@pytest.mark.parametrize(("outcome", "wire", "kind"), [
    (ExportOutcome.shipped(), "shipped", "Shipped"),
    (ExportOutcome.rejected("HTTP 404 Not Found"), {"rejected": "HTTP 404 Not Found"}, "Rejected"),
    (ExportOutcome.failed("NATS ack: timeout"), {"failed": "NATS ack: timeout"}, "Failed"),
], ids=["shipped is a bare string", "rejected carries its message", "failed carries its message"])
def test_the_outcome_is_externally_tagged_in_camel_case(outcome: ExportOutcome, wire: Any, kind: str) -> None:
    assert outcome.wire() == wire
    assert outcome.kind.value == kind
    assert outcome.is_shipped is (kind == "Shipped")


@pytest.mark.parametrize(("status", "kind", "message"), [
    (200, OutcomeKind.SHIPPED, None),
    (202, OutcomeKind.SHIPPED, None),
    (299, OutcomeKind.SHIPPED, None),
    (301, OutcomeKind.REJECTED, "HTTP 301 Moved Permanently"),
    (404, OutcomeKind.REJECTED, "HTTP 404 Not Found"),
    (500, OutcomeKind.REJECTED, "HTTP 500 Internal Server Error"),
    (599, OutcomeKind.REJECTED, "HTTP 599 <unknown status code>"),
], ids=["200 ships", "202 ships", "any 2xx ships", "a redirect is rejected", "404 is rejected with its reason",
        "500 is rejected with its reason", "a code without a reason says so"])
def test_only_a_2xx_status_ships(status: int, kind: OutcomeKind, message: str | None) -> None:
    assert http_outcome(status) == ExportOutcome(kind, message)
