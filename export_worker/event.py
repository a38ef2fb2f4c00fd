"""The export event: run id, signal type, payload per source, and its exact bytes (pure).

— docs/wire-format.md#export-events. An event is a JSON object with the keys ``signal_type``, ``run_id``,
``timestamp``, ``labels``, ``payload`` and (test reports only) ``format``, in that order; the maps inside
``labels`` and ``payload`` have sorted keys. :meth:`ExportEvent.compact` is the byte string that is POSTed,
published, printed (unless pretty) and hashed into the receipt's ``artifact_hash``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from shared.domain.api.codec import format_timestamp, to_wire
from shared.domain.api.export import (
    ArtifactVariant,
    ExportSpec,
    ProcessSnapshotSource,
    ReceiptsSource,
    ReportFormat,
    ReportPayloadShape,
    RunMarkerSource,
    TestReportSource,
    VectorChannel,
)
from shared.domain.canonical_json import canonical_json, pretty_json
from shared.domain.json_number import parse_number

__all__ = ["RUN_ID_PLACEHOLDER", "ExportEvent", "build_event", "expand_subject", "parse_json_value",
           "resolve_run_id", "signal_type_of"]

RUN_ID_PLACEHOLDER: Final = "{{run_id}}"
"""Replaced by the run id in a NATS subject."""

DEFAULT_SIGNAL_TYPE: Final = "event"
"""Signal type of a stdout export (or a channel union that does not resolve)."""


def resolve_run_id(spec: ExportSpec, namespace: str, name: str) -> str:
    """``experimentIdOverride`` when set and non-empty, else ``<namespace>/<name>``."""
    if spec.experiment_id_override:
        return spec.experiment_id_override
    return f"{namespace}/{name}"


def expand_subject(subject: str, run_id: str) -> str:
    """``subject`` with every ``{{run_id}}`` replaced by ``run_id``."""
    return subject.replace(RUN_ID_PLACEHOLDER, run_id)


def signal_type_of(channel: VectorChannel) -> str:
    """``httpEvent.signalType`` if that slot is set; else the text after the last ``.`` of the unexpanded
    ``natsSubject.subject`` (the whole subject when it has no dot); else ``event``. Looks at the slots in
    that order, so it also answers for a union with several slots set."""
    if channel.http_event is not None:
        return channel.http_event.signal_type
    if channel.nats_subject is not None:
        return channel.nats_subject.subject.rsplit(".", 1)[-1]
    return DEFAULT_SIGNAL_TYPE


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def parse_json_value(data: bytes) -> Any:
    """One JSON value from UTF-8 ``data`` as serde_json reads it into a ``Value``: numbers by its rules
    (docs/wire-format.md#numbers), ``NaN``/``Infinity`` refused, surrounding whitespace allowed.

    Raises:
        ValueError: not UTF-8, not JSON, or trailing data (``UnicodeDecodeError`` and
            ``json.JSONDecodeError`` are both ``ValueError``).
    """
    return json.loads(data.decode("utf-8"), parse_int=parse_number, parse_float=parse_number,
                      parse_constant=_refuse_constant)


def _parsed_or(data: bytes, fallback: Any) -> Any:
    try:
        return parse_json_value(data)
    except (ValueError, RecursionError):
        return fallback


def _ndjson(data: bytes) -> list[Any]:
    out = []
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            out.append(parse_json_value(line))
        except (ValueError, RecursionError):
            continue
    return out


@dataclass(frozen=True)
class ExportEvent:
    """One export event. ``labels`` and ``payload`` are plain data (their maps are written sorted)."""

    signal_type: str
    run_id: str
    timestamp: datetime
    labels: dict[str, str]
    payload: Any
    format: ReportFormat | None = None

    def wire(self) -> dict[str, Any]:
        """The JSON object in key order: ``signal_type, run_id, timestamp, labels, payload[, format]``."""
        out: dict[str, Any] = {
            "signal_type": self.signal_type,
            "run_id": self.run_id,
            "timestamp": format_timestamp(self.timestamp),
            "labels": to_wire(self.labels),
            "payload": to_wire(self.payload),
        }
        if self.format is not None:
            out["format"] = self.format.value
        return out

    def compact(self) -> bytes:
        """Compact JSON bytes, as serde_json's ``to_vec`` writes the reference's event."""
        return canonical_json(self.wire())

    def pretty(self) -> bytes:
        """Indented JSON bytes, as serde_json's ``to_string_pretty`` writes it (stdout with ``pretty``)."""
        return pretty_json(self.wire())


def build_event(source: ArtifactVariant, artifact: bytes, *, run_id: str, signal_type: str,
                now: datetime) -> ExportEvent:
    """The event for ``source`` over its ``artifact`` bytes (docs/wire-format.md#export-events).

    * receipts: ``{"receipts": <artifact parsed as JSON, [] if it does not parse>}``;
    * testReport: labels ``configmap`` and ``key``; NdJson → ``{"ndjson": [each non-empty line that
      parses]}``, other formats → ``{"raw_b64": <standard base64, padded>}``; ``format`` set;
    * processSnapshot: ``{"snapshot": <artifact parsed as JSON, null if it does not parse>}``;
    * runMarker: payload null; its labels merged over ``run_id`` (a ``run_id`` label replaces it).
    """
    labels = {"run_id": run_id}
    payload: Any
    report_format: ReportFormat | None = None
    if isinstance(source, ReceiptsSource):
        payload = {"receipts": _parsed_or(artifact, [])}
    elif isinstance(source, TestReportSource):
        labels["configmap"] = source.configmap
        labels["key"] = source.key
        report_format = source.format
        field = source.format.payload_shape().payload_field
        if source.format.payload_shape() is ReportPayloadShape.ND_JSON_LINES:
            payload = {field: _ndjson(artifact)}
        else:
            payload = {field: base64.b64encode(artifact).decode("ascii")}
    elif isinstance(source, ProcessSnapshotSource):
        payload = {"snapshot": _parsed_or(artifact, None)}
    elif isinstance(source, RunMarkerSource):
        labels.update(source.labels)
        payload = None
    else:  # pragma: no cover - the union has four variants
        raise TypeError(f"not an artifact source: {type(source).__name__}")
    return ExportEvent(signal_type=signal_type, run_id=run_id, timestamp=now, labels=labels, payload=payload,
                       format=report_format)
