"""One export run, top to bottom: read the artifact, build the event, ship it, write the receipt.

— docs/behaviour.md#the-export-worker. Every path ends with a receipt: a source that cannot be read, a
channel union that does not resolve and an unreachable sink all become a Failed (or Rejected) outcome that
the receipt records, and the worker exits 1. A rerun (a Job retry after the worker was killed) ships again
and overwrites the receipt (server-side apply, forced). After the receipt, an Event on the Process says what
happened (Normal ``ExportShipped``, Warning ``ExportRejected`` / ``ExportFailed``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, TextIO

import anyio
import msgspec

from export_worker.channels import ship
from export_worker.config import WorkerConfig
from export_worker.event import build_event, resolve_run_id, signal_type_of
from export_worker.outcome import ExportOutcome, OutcomeKind
from export_worker.receipt import FIELD_MANAGER, export_receipt, receipt_configmap, receipt_yaml
from export_worker.sources import SourceError, read_artifact
from shared.domain.api.receipt import ReceiptEnvelope
from shared.domain.api.tagged_union import VariantError
from shared.domain.resources import PROCESSES
from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.errors import ApiError, NotFound, ServerError, TooManyRequests
from shared.kube.events import EventRecorder, EventType
from shared.kube.patch import apply

__all__ = ["RECEIPT_WRITE_ATTEMPTS", "ExportRun", "run_export", "write_receipt"]

RECEIPT_WRITE_ATTEMPTS: Final = 4
"""Tries of the receipt apply when the API server fails transiently (no answer, 429, 5xx)."""

_EVENT_REASONS: Final = {OutcomeKind.SHIPPED: "ExportShipped", OutcomeKind.REJECTED: "ExportRejected",
                         OutcomeKind.FAILED: "ExportFailed"}

log = logging.getLogger("tatara-export-worker")


@dataclass(frozen=True)
class ExportRun:
    """What one run did: its outcome and the receipt it wrote."""

    outcome: ExportOutcome
    receipt: ReceiptEnvelope


def _transient(err: ApiError) -> bool:
    return err.status == 0 or isinstance(err, ServerError | TooManyRequests)


async def write_receipt(client: KubeClient, config: WorkerConfig, envelope: ReceiptEnvelope,
                        process_ref: str) -> None:
    """Server-side apply the receipt ConfigMap (field manager ``tatara-export-worker``, forced), retrying
    transient failures with backoff (1, 2, 4 s; ``Retry-After`` when the server gives one).

    Raises:
        ApiError: a refusal (e.g. Forbidden) or the last transient failure.
    """
    body = receipt_configmap(name=config.receipt_configmap, namespace=config.process_namespace,
                             key=config.receipt_key, text=receipt_yaml(envelope), process_ref=process_ref)
    for attempt in range(1, RECEIPT_WRITE_ATTEMPTS + 1):
        try:
            await apply(client, CONFIG_MAPS, body, field_manager=FIELD_MANAGER, force=True)
            return
        except ApiError as err:
            if attempt == RECEIPT_WRITE_ATTEMPTS or not _transient(err):
                raise
            delay = err.retry_after or float(2 ** (attempt - 1))
            log.warning("receipt write failed (attempt %d), retrying in %g s: %s", attempt, delay, err)
            await anyio.sleep(delay)


async def _announce(client: KubeClient, config: WorkerConfig, outcome: ExportOutcome) -> None:
    """An Event on the Process about the outcome; a Process that is gone (or unreadable) gets none."""
    try:
        process = await client.get(PROCESSES, config.process_name, config.process_namespace)
    except NotFound:
        return
    except ApiError as err:
        log.warning("no Event for the export: cannot read the Process: %s", err)
        return
    kind = outcome.kind
    message = f"export receipt {config.receipt_configmap}: {kind.value}"
    if outcome.message:
        message += f": {outcome.message}"
    recorder = EventRecorder(client, FIELD_MANAGER, os.environ.get("HOSTNAME", FIELD_MANAGER)[:128])
    event_type = EventType.NORMAL if outcome.is_shipped else EventType.WARNING
    await recorder.record(PROCESSES, msgspec.json.decode(process), event_type, _EVENT_REASONS[kind], message)


async def run_export(client: KubeClient, config: WorkerConfig, *, now: Callable[[], datetime],
                     out: TextIO) -> ExportRun:
    """Run the export of ``config`` and write its receipt; ``now`` stamps the event and the receipt, ``out``
    is where a stdout channel prints.

    Raises:
        ApiError: the receipt could not be written (the outcome is logged first).
    """
    spec, namespace, name = config.spec, config.process_namespace, config.process_name
    process_ref = f"{namespace}/{name}"
    run_id = resolve_run_id(spec, namespace, name)
    event_bytes = b""
    skipped: int | None = None
    try:
        source = spec.source.variant()
        artifact = await read_artifact(client, source, namespace, name)
    except VariantError as err:
        outcome = ExportOutcome.failed(f"source: {err}")
    except SourceError as err:
        outcome = ExportOutcome.failed(str(err))
    else:
        skipped = artifact.skipped_receipts
        event = build_event(source, artifact.data, run_id=run_id, signal_type=signal_type_of(spec.channel),
                            now=now())
        event_bytes = event.compact()
        outcome = await ship(spec.channel, event, event_bytes, run_id, out)
    if outcome.is_shipped:
        log.info("shipped %d bytes (run id %s)", len(event_bytes), run_id)
    else:
        log.warning("export %s: %s (run id %s)", outcome.kind.value.lower(), outcome.message, run_id)
    if skipped:
        log.warning("%d ConfigMap value(s) annotated for %s did not parse as a receipt", skipped, process_ref)
    envelope = export_receipt(spec=spec, event_bytes=event_bytes, outcome=outcome, previous_root=config.previous_root,
                              run_id=run_id, process_ref=process_ref, now=now(), skipped_receipts=skipped)
    await write_receipt(client, config, envelope, process_ref)
    log.info("receipt %s/%s written (composed root %s)", namespace, config.receipt_configmap,
             envelope.composed_root)
    await _announce(client, config, outcome)
    return ExportRun(outcome, envelope)
