"""JSON log lines carrying the reconcile's context (controller, namespace, name, phase…).

:func:`log_context` binds fields for the duration of a ``with`` block (a contextvar, so
concurrent reconciles on one event loop keep theirs apart); :class:`JsonFormatter`
writes one JSON object per record with those fields; :func:`configure_logging`
installs it on the root logger.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import msgspec

from shared.kube import tracing

_fields: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("tatara_log_fields", default={})  # noqa: B039


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every log record emitted inside the block (nested blocks merge)."""
    token = _fields.set({**_fields.get(), **fields})
    try:
        yield
    finally:
        _fields.reset(token)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (RFC 3339 UTC), ``level``, ``logger``, ``msg``, bound fields,
    ``trace_id`` and ``span_id`` of the active span when tracing is on (:func:`shared.kube.tracing.log_ids`),
    ``extra=`` fields, and ``exc`` (the formatted traceback) when there is one."""

    _reserved = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_fields.get())
        if tracing.enabled:
            line.update(tracing.log_ids())
        for key, value in vars(record).items():
            if key not in self._reserved and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return msgspec.json.encode(line, enc_hook=str).decode()


def configure_logging(level: str = "INFO") -> None:
    """Send the root logger's records to stderr as JSON lines at ``level``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
