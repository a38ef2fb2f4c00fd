"""A CGI program's output (git http-backend's) becomes an HTTP status, headers and body."""

from __future__ import annotations

import pytest

from tools.git_http import cgi_response


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (b"Content-Type: application/x-git-upload-pack-advertisement\r\nCache-Control: no-cache\r\n\r\n001e# service",
         (200, [("Content-Type", "application/x-git-upload-pack-advertisement"), ("Cache-Control", "no-cache")],
          b"001e# service")),
        (b"Status: 404 Not Found\r\nContent-Type: text/plain\r\n\r\nRepository not found",
         (404, [("Content-Type", "text/plain")], b"Repository not found")),
        (b"Status: 403 Forbidden\n\n", (403, [], b"")),
    ],
    ids=[
        "no Status header is 200 with the headers and body",
        "a Status header sets the code and is not sent on",
        "bare LF separators are accepted",
    ],
)
def test_cgi_response(output: bytes, expected: tuple[int, list[tuple[str, str]], bytes]) -> None:
    assert cgi_response(output) == expected
