"""Host names and the reference's error texts (docs/wire-format.md#hostnames,
docs/wire-format.md#error-texts)."""

from __future__ import annotations

import pytest

from shared.domain.api.routing import RoutingHostname
from shared.domain.hostnames import HostnameError, fqdn, hostname_cluster, hostname_id
from shared.domain.rust_text import debug_str


@pytest.mark.parametrize(("cluster", "expected"), [(None, "pleme-dev"), ("rio", "rio"), ("", "")])
def test_a_hostname_cluster_is_used_as_written_even_empty(cluster: str | None, expected: str) -> None:
    assert hostname_cluster(RoutingHostname(app="web", cluster=cluster), "pleme-dev") == expected


def test_an_empty_cluster_is_an_invalid_label() -> None:
    cluster = hostname_cluster(RoutingHostname(app="web", cluster=""), "pleme-dev")
    for eph in ("deadbeef", None):
        with pytest.raises(HostnameError) as err:
            fqdn("web", eph, cluster, "use1", "quero.lol")
        assert str(err.value) == 'invalid DNS label "" for segment cluster: must be 1–63 characters'


@pytest.mark.parametrize(("instance", "expected"), [(None, "f219624b"), ("", "f219624b"), ("pr-1", "pr-1")])
def test_the_id_is_the_instance_when_set(instance: str | None, expected: str) -> None:
    assert hostname_id(RoutingHostname(app="web", instance=instance), "f219624b") == expected


@pytest.mark.parametrize(("app", "message"), [
    ('a"b', 'invalid DNS label "a\\"b" for segment app: must contain only [a-z0-9-]'),
    ("a\tb", 'invalid DNS label "a\\tb" for segment app: must contain only [a-z0-9-]'),
    ("a\u200bb", 'invalid DNS label "a\\u{200b}b" for segment app: must contain only [a-z0-9-]'),
    ("café", 'invalid DNS label "café" for segment app: must contain only [a-z0-9-]'),
    ("Auth", 'invalid DNS label "Auth" for segment app: must contain only [a-z0-9-]'),
    ("auth", 'app label "auth" is reserved for the saguão control plane'),
])
def test_labels_are_quoted_as_rust_debug_quotes_them(app: str, message: str) -> None:
    with pytest.raises(HostnameError) as err:
        fqdn(app, "x", "pleme-dev", "use1", "quero.lol")
    assert str(err.value) == message


@pytest.mark.parametrize(("text", "quoted"), [
    ("plain", '"plain"'),
    ('a"b\\c', '"a\\"b\\\\c"'),
    ("\0\t\r\n", '"\\0\\t\\r\\n"'),
    ("'", '"\'"'),
    ("\x01\x7f", '"\\u{1}\\u{7f}"'),
    ("a\u00a0b\u2028", '"a\\u{a0}b\\u{2028}"'),
    ("e\u0301", '"e\\u{301}"'),
    ("\ufeff\u00ad", '"\\u{feff}\\u{ad}"'),
    ("é😀 ", '"é😀 "'),
    ("\U000e0001", '"\\u{e0001}"'),
])
def test_debug_str(text: str, quoted: str) -> None:
    assert debug_str(text) == quoted
