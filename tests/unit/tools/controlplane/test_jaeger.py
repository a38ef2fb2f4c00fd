"""Jaeger v2 is built from the pinned module's ``cmd/jaeger`` through a wrapper module (upstream's go.mod has a
replace, which ``go install pkg@version`` refuses), with the version stamp upstream's BuildInfo.mk sets;
nothing is compiled here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.controlplane import jaeger
from tools.controlplane.flux import Built
from tools.jaeger_server import config_yaml

MODULE = "github.com/jaegertracing/jaeger"
UPSTREAM_GO_MOD = f"""module {MODULE}

go 1.24.6

toolchain go1.25.4

require github.com/Shopify/sarama v1.37.2

replace github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0
"""
"""The lines of v1.76.0's go.mod that matter to the wrapper (its go line and its one replace)."""


def test_the_component_is_cmd_jaeger_of_the_pinned_module_stamped_as_v2() -> None:
    assert (jaeger.JAEGER.module, jaeger.JAEGER.version) == (MODULE, "v1.76.0")
    assert dict(jaeger.JAEGER.binaries) == {"jaeger": f"{MODULE}/cmd/jaeger"}
    assert set(jaeger.JAEGER.ldflags) == {f"-X {MODULE}/internal/version.latestVersion=v2.13.0",
                                          f"-X {MODULE}/internal/version.date=2025-12-03T16:07:08Z"}


def test_it_is_cached_per_module_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(jaeger, "default_cache_dir", lambda: tmp_path)
    assert jaeger.built().binary == tmp_path / "jaeger" / "jaeger-v1.76.0" / "bin" / "jaeger"


def test_the_wrapper_module_keeps_upstreams_replace_and_builds_cmd_jaeger(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    upstream = tmp_path / "upstream.go.mod"
    upstream.write_text(UPSTREAM_GO_MOD)
    calls: list[tuple[str, ...]] = []

    def go(self: Built, *args: str, cwd: Path) -> str:
        calls.append(args)
        if args[:2] == ("mod", "download"):
            return json.dumps({"GoMod": str(upstream), "Dir": str(tmp_path / "module")})
        if args[0] == "build":
            out = Path(args[args.index("-o") + 1])
            out.write_text("")
        return ""

    monkeypatch.setattr(Built, "_go", go)
    Built(jaeger.JAEGER, tmp_path / "root")._build()
    go_mod = (tmp_path / "root" / "src" / "go.mod").read_text()
    assert "go 1.24.6" in go_mod
    assert "github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0" in go_mod
    assert [c for c in calls if c[:2] == ("get", "-tool")] == [("get", "-tool", f"{MODULE}/cmd/jaeger@v1.76.0")]
    (build,) = [c for c in calls if c[0] == "build"]
    assert build[-1] == f"{MODULE}/cmd/jaeger"
    assert "-trimpath" in build


def test_the_config_binds_only_the_given_loopback_ports() -> None:
    config = json.loads(config_yaml(otlp_grpc=1001, otlp_http=1002, query_http=1003, query_grpc=1004))
    assert config["receivers"]["otlp"]["protocols"] == {"grpc": {"endpoint": "127.0.0.1:1001"},
                                                        "http": {"endpoint": "127.0.0.1:1002"}}
    query = config["extensions"]["jaeger_query"]
    assert (query["http"], query["grpc"]) == ({"endpoint": "127.0.0.1:1003"}, {"endpoint": "127.0.0.1:1004"})
    # one memory backend, written by the exporter and read by the query extension
    assert config["extensions"]["jaeger_storage"]["backends"] == {"memstore": {"memory": {"max_traces": 100000}}}
    assert config["exporters"]["jaeger_storage_exporter"]["trace_storage"] == query["storage"]["traces"] == "memstore"
    assert config["service"]["telemetry"]["metrics"]["level"] == "none"  # no :8888
