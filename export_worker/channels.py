"""Shipping an export event over its channel: HTTP POST, NATS JetStream publish, or stdout.

— docs/behaviour.md#the-export-worker. Each shipper only executes; what its result means is
:mod:`export_worker.outcome`. Every failure becomes an outcome, never an exception:

* HTTP: POST of the compact bytes with ``Content-Type: application/json``, ``X-Tatara-Signal-Type``, given a
  key ``Idempotency-Key``, and with tracing on ``traceparent``, 15 s for the whole exchange, following up to
  10 redirects that keep the method (307, 308); 2xx → Shipped,
  another status → Rejected ``HTTP <code> <reason>``, no answer → Failed ``HTTP error: …``;
* NATS: connect (once, no reconnects) → Failed ``NATS connect: …``; the publish (with ``Nats-Msg-Id`` given a
  key, and ``traceparent`` with tracing on) cannot be sent → Rejected ``NATS publish: …``; no acknowledgement,
  or a JetStream error in it → Failed ``NATS ack: …``; an acknowledgement saying ``duplicate`` → Shipped,
  duplicate, with the bytes of the message the stream kept when they can be read back
  (docs/behaviour.md#exactly-once-where-the-sink-allows-it);
* stdout: one line of compact JSON, or pretty JSON, then a newline → Shipped;
* a channel union with zero or several slots → Failed ``channel: <union error>``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final, TextIO
from urllib.parse import urljoin, urlsplit

import anyio

from export_worker.event import ExportEvent, expand_subject
from export_worker.outcome import ExportOutcome, http_outcome
from shared.domain.api.export import HttpEventChannel, NatsSubjectChannel, StdoutChannel, VectorChannel
from shared.domain.api.tagged_union import VariantError
from shared.domain.export_key import idempotency_key_header
from shared.kube import tracing
from shared.kube.http import ConnectionPool, HttpError, basic_authorization

if TYPE_CHECKING:
    from nats.js.api import PubAck
    from nats.js.client import JetStreamContext

__all__ = ["HTTP_TIMEOUT", "IDEMPOTENCY_KEY", "NATS_MSG_ID", "NATS_TIMEOUT", "TRACEPARENT_HEADER", "carries_key",
           "ship"]

HTTP_TIMEOUT: Final = 15.0
"""Seconds for one HTTP export, connect to last byte, redirects included (the reference's client timeout)."""

MAX_REDIRECTS: Final = 10
"""307 and 308 redirects followed, with the method and the body (the reference's HTTP client follows 10);
a 301, 302 or 303 is not: following it would turn the POST into a GET and lose the event
(docs/divergences.md#export-redirects)."""

NATS_TIMEOUT: Final = 15.0
"""Seconds to connect to NATS, and again to wait for the JetStream acknowledgement."""

NATS_MSG_ID: Final = "Nats-Msg-Id"
"""The JetStream header a stream de-duplicates publishes by, within its duplicate window."""

IDEMPOTENCY_KEY: Final = "Idempotency-Key"
"""The HTTP header carrying the key (the IETF httpapi idempotency-key draft)."""

TRACEPARENT_HEADER: Final = "traceparent"
"""The W3C Trace Context header an HTTP request or a NATS message carries when tracing is on: the worker's
``ship`` span (docs/runtime.md#traces)."""

log = logging.getLogger(__name__)


def _text(err: BaseException) -> str:
    return str(err) or type(err).__name__


async def ship_http(channel: HttpEventChannel, event_bytes: bytes, key: str | None = None) -> ExportOutcome:
    """POST ``event_bytes`` to the channel's endpoint, with ``Idempotency-Key`` when ``key`` is given."""
    headers = {"Content-Type": "application/json", "X-Tatara-Signal-Type": channel.signal_type}
    if key is not None:
        headers[IDEMPOTENCY_KEY] = idempotency_key_header(key)
    traceparent = tracing.current_traceparent()
    if traceparent is not None:
        headers[TRACEPARENT_HEADER] = traceparent
    url = channel.resolved_endpoint
    try:
        async with asyncio.timeout(HTTP_TIMEOUT):
            for _ in range(MAX_REDIRECTS + 1):
                status, location = await _post(url, headers, event_bytes)
                if status not in (307, 308) or location is None:
                    return http_outcome(status)
                url = urljoin(url, location)
        return ExportOutcome.failed(f"HTTP error: more than {MAX_REDIRECTS} redirects")
    except TimeoutError:
        return ExportOutcome.failed(f"HTTP error: no answer within {HTTP_TIMEOUT:g} s")
    except (HttpError, ValueError, OSError) as err:  # ValueError: an unusable URL
        return ExportOutcome.failed(f"HTTP error: {_text(err)}")


async def _post(url: str, headers: dict[str, str], body: bytes) -> tuple[int, str | None]:
    """One POST of ``body`` to ``url`` (credentials in it as ``Authorization: Basic``): the status and the
    ``Location`` header. Raises HttpError, ValueError (an unusable URL)."""
    parts = urlsplit(url)
    if authorization := basic_authorization(url):
        headers = {**headers, "Authorization": authorization}
    pool = ConnectionPool(url, limit=1)
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        response = await pool.request("POST", target, headers, body, deadline=None)
        return response.status, response.headers.get("location")
    finally:
        await pool.close()


async def _stored(js: JetStreamContext, ack: PubAck, key: str) -> bytes | None:
    """The bytes of the message a duplicate acknowledgement points at (``ack.stream``, ``ack.seq``), when it
    can be read and still carries ``key``; None otherwise (no permission, gone, another message)."""
    import nats.errors
    try:
        message = await js.get_msg(ack.stream, ack.seq)
    except (nats.errors.Error, OSError) as err:
        log.warning("nats: the duplicate's message %s/%d cannot be read: %s", ack.stream, ack.seq, _text(err))
        return None
    if (message.headers or {}).get(NATS_MSG_ID) != key:
        log.warning("nats: message %s/%d does not carry %s %s", ack.stream, ack.seq, NATS_MSG_ID, key)
        return None
    return message.data or b""


async def ship_nats(channel: NatsSubjectChannel, event_bytes: bytes, run_id: str,
                    key: str | None = None) -> ExportOutcome:
    """Publish ``event_bytes`` to JetStream on the expanded subject, with ``Nats-Msg-Id: key`` when given, and
    wait for the acknowledgement (``stream`` is not checked, as in the reference)."""
    import nats  # imported by the first NATS export: an HTTP or stdout worker never loads it
    import nats.errors
    import nats.js.errors

    seen: list[Exception] = []

    async def record(err: Exception) -> None:
        seen.append(err)
        log.debug("nats: %s", err)

    try:
        # One attempt: nats-py loops forever when allow_reconnect=False comes with max_reconnect_attempts=0;
        # with 1 it stops after the first round. The deadline guards against any other endless retry.
        with anyio.fail_after(2 * NATS_TIMEOUT + 1):
            client = await nats.connect(channel.resolved_url, connect_timeout=NATS_TIMEOUT, allow_reconnect=False,
                                        max_reconnect_attempts=1, reconnect_time_wait=0.2, error_cb=record)
    except Exception as err:  # nats-py raises several unrelated types (NoServersError, OSError, ...)
        cause = f" ({_text(seen[-1])})" if seen and seen[-1] is not err else ""
        return ExportOutcome.failed(f"NATS connect: {_text(err)}{cause}")
    try:
        js = client.jetstream(timeout=NATS_TIMEOUT)
        headers = {NATS_MSG_ID: key} if key is not None else None
        traceparent = tracing.current_traceparent()
        if traceparent is not None:
            headers = {**(headers or {}), TRACEPARENT_HEADER: traceparent}
        ack = await js.publish(expand_subject(channel.subject, run_id), event_bytes, headers=headers)
        if ack.duplicate and key is not None:
            log.info("nats: %s/%d already holds %s %s: not stored again", ack.stream, ack.seq, NATS_MSG_ID, key)
            return ExportOutcome.shipped(duplicate=True, stored=await _stored(js, ack, key))
        return ExportOutcome.shipped()
    except (nats.js.errors.NoStreamResponseError, nats.errors.TimeoutError, nats.js.errors.APIError) as err:
        return ExportOutcome.failed(f"NATS ack: {_text(err)}")
    except (nats.errors.Error, OSError) as err:
        return ExportOutcome.rejected(f"NATS publish: {_text(err)}")
    finally:
        await client.close()


def ship_stdout(channel: StdoutChannel, event: ExportEvent, out: TextIO) -> ExportOutcome:
    """Print the event (pretty when the channel says so) and a newline on ``out``."""
    try:
        out.write((event.pretty() if channel.pretty else event.compact()).decode("utf-8") + "\n")
        out.flush()
    except OSError as err:
        return ExportOutcome.failed(f"stdout: {_text(err)}")
    return ExportOutcome.shipped()


def carries_key(channel: VectorChannel) -> bool:
    """Whether shipping over ``channel`` sends the idempotency key: HTTP and NATS do, stdout and a channel union
    that does not resolve do not."""
    try:
        return isinstance(channel.variant(), HttpEventChannel | NatsSubjectChannel)
    except VariantError:
        return False


async def ship(channel: VectorChannel, event: ExportEvent, event_bytes: bytes, run_id: str,
               out: TextIO, key: str | None = None) -> ExportOutcome:
    """Ship one event over ``channel``; ``event_bytes`` is ``event.compact()``, ``key`` the idempotency key
    (docs/wire-format.md#export-idempotency-keys; stdout has no use for it)."""
    try:
        variant = channel.variant()
    except VariantError as err:
        return ExportOutcome.failed(f"channel: {err}")
    if isinstance(variant, HttpEventChannel):
        return await ship_http(variant, event_bytes, key)
    if isinstance(variant, NatsSubjectChannel):
        return await ship_nats(variant, event_bytes, run_id, key)
    return ship_stdout(variant, event, out)
