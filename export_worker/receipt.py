"""The export receipt: its envelope, its YAML text and the ConfigMap that holds it (pure).

— docs/wire-format.md#export-receipts. A ``tatara-receipt/v1`` envelope of kind ``tatara.export`` whose
pillars are BLAKE3 hex digests: intent = the ExportSpec's sorted-key canonical JSON, artifact = the compact
event bytes, control = the outcome's canonical JSON; its root is chained on ``--previous-root``. Written as
YAML (serde_yaml's text) under ``receipt.yaml`` of ``<process>-export-<index>-receipt``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

import msgspec
from blake3 import blake3

from export_worker.outcome import ExportOutcome
from shared.domain import annotations as ann
from shared.domain import labels
from shared.domain.api.codec import to_wire
from shared.domain.api.export import ExportSpec
from shared.domain.api.receipt import RECEIPT_VERSION, ReceiptEnvelope
from shared.domain.canonical_json import canonical_json
from shared.domain.serde_yaml import to_yaml

__all__ = ["DEFAULT_RECEIPT_KEY", "EXPORT_RECEIPT_KIND", "FIELD_MANAGER", "RECEIPT_LABEL_VALUE", "export_receipt",
           "intent_hash", "receipt_configmap", "receipt_yaml"]

EXPORT_RECEIPT_KIND: Final = "tatara.export"
"""``kind`` of an export receipt (not one of the four known kinds)."""

FIELD_MANAGER: Final = "tatara-export-worker"
"""Field manager of the receipt's server-side apply."""

DEFAULT_RECEIPT_KEY: Final = "receipt.yaml"
"""``data`` key of the receipt unless ``--receipt-key`` / ``TATARA_RECEIPT_KEY`` says otherwise."""

RECEIPT_LABEL_VALUE: Final = RECEIPT_VERSION.replace("/", ".")
"""Value of the ``tatara.pleme.io/receipt`` label: the envelope version spelled as a legal label value."""


def _hex(data: bytes) -> str:
    return str(blake3(data).hexdigest())


def intent_hash(spec: ExportSpec) -> str:
    """64-hex BLAKE3 of the ExportSpec's sorted-key canonical JSON (its wire form, defaults included)."""
    return _hex(canonical_json(to_wire(spec), sort_keys=True))


def export_receipt(*, spec: ExportSpec, event_bytes: bytes, outcome: ExportOutcome, previous_root: str | None,
                   run_id: str, process_ref: str, now: datetime, skipped_receipts: int | None = None,
                   idempotency_key: str | None = None) -> ReceiptEnvelope:
    """The receipt of one export run.

    ``evidence`` is ``{[duplicate,] error (unless shipped), [idempotency_key,] outcome, run_id,
    shipped_bytes_len[, skipped_receipts]}``: ``shipped_bytes_len`` counts the bytes the sink took — the
    artifact's length when Shipped, 0 when Rejected or Failed (docs/divergences.md#export-shipped-bytes);
    ``duplicate: true`` when the sink said it already held the message, whose bytes (``outcome.stored``, when
    read back) are then the artifact, since they are what the sink holds; ``idempotency_key`` is the key the
    sink was sent; ``skipped_receipts`` (receipts source only) counts ConfigMap values that did not parse as a
    receipt.
    """
    artifact = outcome.stored if outcome.stored is not None else event_bytes
    evidence: dict[str, Any] = {}
    if outcome.duplicate:
        evidence["duplicate"] = True
    if not outcome.is_shipped:
        evidence["error"] = outcome.message or ""
    if idempotency_key is not None:
        evidence["idempotency_key"] = idempotency_key
    evidence["outcome"] = outcome.kind.value
    evidence["run_id"] = run_id
    evidence["shipped_bytes_len"] = len(artifact) if outcome.is_shipped else 0
    if skipped_receipts is not None:
        evidence["skipped_receipts"] = skipped_receipts
    envelope = ReceiptEnvelope.build(kind=EXPORT_RECEIPT_KIND, intent=intent_hash(spec), artifact=_hex(artifact),
                                     control=_hex(canonical_json(outcome.wire(), sort_keys=True)),
                                     previous=previous_root, generated_at=now)
    return msgspec.structs.replace(envelope, process_ref=process_ref, evidence=evidence)


def receipt_yaml(envelope: ReceiptEnvelope) -> str:
    """The envelope as serde_yaml writes it: keys in declaration order, ``process_ref`` / ``evidence`` left
    out when unset, ``evidence`` keys sorted."""
    return to_yaml(to_wire(envelope))


def receipt_configmap(*, name: str, namespace: str, key: str, text: str, process_ref: str) -> dict[str, Any]:
    """The receipt ConfigMap to apply: ``data[key] = text``, labelled ``role=export`` and
    ``receipt=tatara-receipt.v1``, annotated ``process=<ns>/<name>`` (docs/divergences.md#export-receipt-metadata).
    No ownerReference: the receipt outlives the Process."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {labels.ROLE: labels.ROLE_EXPORT, labels.RECEIPT: RECEIPT_LABEL_VALUE},
            "annotations": {ann.PROCESS: process_ref},
        },
        "data": {key: text},
    }
