"""The typed errors of a failed request (docs/runtime.md, "The client"): the class comes from the HTTP
status, and for 409 from the Status ``reason`` too."""

from __future__ import annotations

import json

import pytest

from shared.kube.errors import AlreadyExists, ApiError, Conflict, Gone, Invalid, NotFound, ServerError, api_error


def status_body(code: int, reason: str, message: str = "m") -> bytes:
    """A ``Status`` as the API server writes it (Kubernetes API conventions, "Response Status Kind")."""
    return json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                       "reason": reason, "code": code}).encode()


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (404, "NotFound", NotFound),
        (410, "Expired", Gone),
        (422, "Invalid", Invalid),
        (503, "ServiceUnavailable", ServerError),
        (418, "Teapot", ApiError),
    ],
    ids=["a taken name on create", "a stale resourceVersion", "not found", "an expired watch", "invalid",
         "server error", "an unmapped status"],
)
def test_the_class_follows_the_status_and_the_reason(code: int, reason: str, expected: type[ApiError]) -> None:
    error = api_error(code, status_body(code, reason))
    assert type(error) is expected
    assert (error.status, error.reason) == (code, reason)


def test_already_exists_is_caught_as_a_conflict_but_not_the_other_way() -> None:
    taken = api_error(409, status_body(409, "AlreadyExists"))
    stale = api_error(409, status_body(409, "Conflict"))
    assert isinstance(taken, Conflict)
    assert not isinstance(stale, AlreadyExists)


def test_a_body_that_is_not_a_status_keeps_the_class_of_the_code() -> None:
    error = api_error(409, b"<html>proxy said no</html>")
    assert type(error) is Conflict
    assert "proxy said no" in error.message
