"""Typed Kubernetes API errors, built from the API server's ``Status`` body.

The API server answers every failed request with a ``meta/v1 Status`` object
(``reason``, ``message``, ``details.causes[]``); :func:`api_error` maps the HTTP status
code to one exception class per case a controller handles differently.
"""

from __future__ import annotations

import msgspec


class StatusCause(msgspec.Struct, frozen=True):
    """One entry of ``Status.details.causes``: which ``field`` was wrong and why."""

    reason: str = ""
    message: str = ""
    field: str = ""


class _StatusDetails(msgspec.Struct, frozen=True):
    name: str = ""
    kind: str = ""
    causes: list[StatusCause] = msgspec.field(default_factory=list)


class _Status(msgspec.Struct, frozen=True):
    reason: str = ""
    message: str = ""
    code: int = 0
    details: _StatusDetails | None = None


class ApiError(Exception):
    """A request the API server refused.

    Attributes:
        status: HTTP status code (0 when no response arrived).
        reason: the Status ``reason`` (e.g. ``NotFound``, ``Conflict``, ``Invalid``).
        message: the Status ``message``, human readable.
        causes: field-level causes (``Invalid`` carries one per bad field).
        body: the raw response body.
    """

    def __init__(
        self, status: int, reason: str, message: str, causes: tuple[StatusCause, ...] = (), body: bytes = b""
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = causes
        self.body = body
        self.retry_after: float | None = None
        """Seconds from the response's ``Retry-After`` header (429 / APF), when it had one."""


class BadRequest(ApiError):
    """400: malformed request (e.g. a patch the server cannot apply)."""


class Unauthorized(ApiError):
    """401: credentials missing or expired; re-read the token and retry."""


class Forbidden(ApiError):
    """403: RBAC denied the request."""


class NotFound(ApiError):
    """404: the object (or its namespace, or the resource type) does not exist."""


class Conflict(ApiError):
    """409: the resourceVersion precondition failed (an update raced another writer)."""


class AlreadyExists(Conflict):
    """409 with Status reason ``AlreadyExists``: a create found the name taken.

    A :class:`Conflict` too, so a caller for whom both mean "someone else wrote first" catches one
    class; a create that must tell them apart catches this one.
    """


class Gone(ApiError):
    """410: the requested resourceVersion is too old (watch must relist)."""


class Invalid(ApiError):
    """422: validation failed; :attr:`causes` names each bad field."""


class TooManyRequests(ApiError):
    """429: API Priority and Fairness throttled the request; retry after a delay."""


class ServerError(ApiError):
    """5xx: the API server (or etcd behind it) failed; retry with backoff."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    410: Gone, 422: Invalid, 429: TooManyRequests,
}

_status_decoder = msgspec.json.Decoder(_Status)


def api_error(status: int, body: bytes) -> ApiError:
    """The typed error for an HTTP ``status`` and its response ``body`` (a Status, or anything)."""
    try:
        decoded = _status_decoder.decode(body)
        reason, message = decoded.reason, decoded.message
        causes = tuple(decoded.details.causes) if decoded.details else ()
    except msgspec.DecodeError:
        reason, message, causes = "", body.decode(errors="replace")[:500], ()
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    if cls is Conflict and reason == "AlreadyExists":  # one HTTP code, two cases: the Status reason says which
        cls = AlreadyExists
    return cls(status, reason or cls.__name__, message, causes, body)


def status_error(status_object: bytes) -> ApiError:
    """The typed error for a ``Status`` delivered inside a watch ``ERROR`` event (code inside)."""
    try:
        code = _status_decoder.decode(status_object).code
    except msgspec.DecodeError:
        code = 0
    return api_error(code or 500, status_object)
