"""One export run, top to bottom: read the artifact, build the event, ship it, write the receipt.

— docs/behaviour.md#the-export-worker. Every path ends with a receipt: a source that cannot be read, a
channel union that does not resolve and an unreachable sink all become a Failed (or Rejected) outcome that
the receipt records, and the worker exits 1. A rerun (a Job retry after the worker was killed) ships again
and overwrites the receipt (server-side apply, forced); with ``--idempotency-key`` the sink can tell the rerun
from a new export (JetStream drops it within its duplicate window and says so, which the receipt records —
docs/behaviour.md#exactly-once-where-the-sink-allows-it). After the receipt, an Event on the Process says what
happened (Normal ``ExportShipped``, saying so when the sink reported a duplicate; Warning ``ExportRejected`` /
``ExportFailed``), and a Warning
``ReceiptsSkipped`` names the annotated ConfigMap values a receipts source could not parse.
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
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from export_worker.channels import carries_key, ship
from export_worker.config import WorkerConfig
from export_worker.event import build_event, resolve_run_id, signal_type_of
from export_worker.outcome import ExportOutcome, OutcomeKind
from export_worker.receipt import FIELD_MANAGER, export_receipt, receipt_configmap, receipt_yaml
from export_worker.sources import SourceError, read_artifact
from shared.domain import annotations as ann
from shared.domain.api.receipt import ReceiptEnvelope
from shared.domain.api.tagged_union import VariantError
from shared.domain.resources import PROCESSES
from shared.kube import tracing
from shared.kube.api import KubeApi
from shared.kube.client import CONFIG_MAPS
from shared.kube.errors import ApiError, NotFound, ServerError, TooManyRequests
from shared.kube.events import EventRecorder, EventType
from shared.kube.patch import apply

__all__ = ["RECEIPT_WRITE_ATTEMPTS", "ExportRun", "run_export", "write_receipt"]

SKIPPED_NAMES: Final = 5
"""How many skipped ``<configmap>/<key>`` a ``ReceiptsSkipped`` Event names (then ``…``)."""

RECEIPT_WRITE_ATTEMPTS: Final = 4
"""Tries of the receipt apply when the API server fails transiently (no answer, 429, 5xx)."""

_EVENT_REASONS: Final = {OutcomeKind.SHIPPED: "ExportShipped", OutcomeKind.REJECTED: "ExportRejected",
                         OutcomeKind.FAILED: "ExportFailed"}

log = logging.getLogger("tatara-export-worker")

_TRACER = trace.get_tracer("tatara.export_worker")


@dataclass(frozen=True)
class ExportRun:
    """What one run did: its outcome and the receipt it wrote."""

    outcome: ExportOutcome
    receipt: ReceiptEnvelope


def _transient(err: ApiError) -> bool:
    return err.status == 0 or isinstance(err, ServerError | TooManyRequests)


async def write_receipt(client: KubeApi, config: WorkerConfig, envelope: ReceiptEnvelope,
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


def skipped_message(config: WorkerConfig, unparsable: tuple[str, ...]) -> str:
    """The ``ReceiptsSkipped`` message: how many values, which (at most :data:`SKIPPED_NAMES`), where counted."""
    names = ", ".join(unparsable[:SKIPPED_NAMES]) + (", …" if len(unparsable) > SKIPPED_NAMES else "")
    return (f"export receipt {config.receipt_configmap}: {len(unparsable)} value(s) annotated "
            f"{ann.PROCESS}={config.process_namespace}/{config.process_name} did not parse as a receipt and "
            f"were skipped (evidence.skipped_receipts): {names}")


async def _announce(client: KubeApi, config: WorkerConfig, outcome: ExportOutcome,
                    unparsable: tuple[str, ...] = ()) -> None:
    """An Event on the Process about the outcome, and a Warning ``ReceiptsSkipped`` when some collected
    values did not parse; a Process that is gone (or unreadable) gets none."""
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
    if outcome.duplicate:
        message += f" (duplicate: the sink already held export {config.idempotency_key}; nothing stored twice)"
    recorder = EventRecorder(client, FIELD_MANAGER, os.environ.get("HOSTNAME", FIELD_MANAGER)[:128])
    event_type = EventType.NORMAL if outcome.is_shipped else EventType.WARNING
    involved = msgspec.json.decode(process)
    await recorder.record(PROCESSES, involved, event_type, _EVENT_REASONS[kind], message)
    if unparsable:
        await recorder.record(PROCESSES, involved, EventType.WARNING, "ReceiptsSkipped",
                              skipped_message(config, unparsable))


async def run_export(client: KubeApi, config: WorkerConfig, *, now: Callable[[], datetime],
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
    unparsable: tuple[str, ...] = ()
    try:
        source = spec.source.variant()
        with _TRACER.start_as_current_span("read source"):
            artifact = await read_artifact(client, source, namespace, name)
    except VariantError as err:
        outcome = ExportOutcome.failed(f"source: {err}")
    except SourceError as err:
        outcome = ExportOutcome.failed(str(err))
    except Exception as err:  # a defect or an answer nobody foresaw: still a receipt, never a crash loop
        log.exception("reading the artifact failed unexpectedly")
        outcome = ExportOutcome.failed(f"source: {type(err).__name__}: {err}")
    else:
        skipped, unparsable = artifact.skipped_receipts, artifact.unparsable
        event = build_event(source, artifact.data, run_id=run_id, signal_type=signal_type_of(spec.channel),
                            now=now())
        event_bytes = event.compact()
        try:
            with _TRACER.start_as_current_span("ship") as span:
                outcome = await ship(spec.channel, event, event_bytes, run_id, out, config.idempotency_key)
                if tracing.enabled:
                    tracing.annotate(tatara_export_outcome=outcome.kind.value, tatara_export_bytes=len(event_bytes))
                    if not outcome.is_shipped:
                        span.set_status(StatusCode.ERROR, outcome.message)
        except Exception as err:  # the shippers turn every failure they know into an outcome; this is the rest
            log.exception("shipping failed unexpectedly")
            outcome = ExportOutcome.failed(f"channel: {type(err).__name__}: {err}")
    if outcome.duplicate:
        log.info("the sink already held this export (key %s, run id %s): not shipped twice",
                 config.idempotency_key, run_id)
    elif outcome.is_shipped:
        log.info("shipped %d bytes (run id %s)", len(event_bytes), run_id)
    else:
        log.warning("export %s: %s (run id %s)", outcome.kind.value.lower(), outcome.message, run_id)
    if skipped:
        log.warning("%d ConfigMap value(s) annotated for %s did not parse as a receipt", skipped, process_ref)
    sent_key = config.idempotency_key if event_bytes and carries_key(spec.channel) else None  # what the sink saw
    envelope = export_receipt(spec=spec, event_bytes=event_bytes, outcome=outcome, previous_root=config.previous_root,
                              run_id=run_id, process_ref=process_ref, now=now(), skipped_receipts=skipped,
                              idempotency_key=sent_key)
    with _TRACER.start_as_current_span("write receipt"):
        await write_receipt(client, config, envelope, process_ref)
    log.info("receipt %s/%s written (composed root %s)", namespace, config.receipt_configmap,
             envelope.composed_root)
    with _TRACER.start_as_current_span("announce"):
        await _announce(client, config, outcome, unparsable)
    return ExportRun(outcome, envelope)
