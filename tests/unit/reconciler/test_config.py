"""Flags, environment and defaults of tatara-reconciler (docs/behaviour.md#tatara-reconciler-flags)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.config import ConfigError, ReconcilerConfig, build_parser, parse_config, parse_or_exit
from shared.kube.leader import LeaseTiming


def test_defaults_are_the_spec_table() -> None:
    config = parse_config([], {})
    assert config == ReconcilerConfig()
    assert (config.watch_namespace, config.controller_namespace) == ("", "tatara-system")
    assert (config.health_addr, config.heartbeat_seconds) == ("0.0.0.0:8080", 30)
    assert config.export_worker_image == "ghcr.io/pleme-io/tatara-export-worker:0.2.0"
    assert config.export_worker_service_account == "tatara-export-worker"
    assert (config.fleet_cluster, config.fleet_location, config.fleet_domain) == ("pleme-dev", "use1", "quero.lol")
    assert config.dns_lb_target == ""
    assert config.leader_elect is True
    assert config.lease_timing == LeaseTiming(15, 10, 2)
    assert config.lease_namespace == "tatara-system"
    assert (config.prometheus_url, config.log_level, config.table_status_interval) == ("", "info", 2.0)


@pytest.mark.parametrize(
    ("argv", "environ", "attribute", "expected"),
    [
        ([], {}, "watch_namespace", ""),
        ([], {"TATARA_WATCH_NAMESPACE": "team-a"}, "watch_namespace", "team-a"),
        (["--watch-namespace", "team-b"], {"TATARA_WATCH_NAMESPACE": "team-a"}, "watch_namespace", "team-b"),
        (["--watch-namespace="], {"TATARA_WATCH_NAMESPACE": "team-a"}, "watch_namespace", ""),
        ([], {"TATARA_HEARTBEAT_SECONDS": "45"}, "heartbeat_seconds", 45),
        (["--heartbeat-seconds=5"], {"TATARA_HEARTBEAT_SECONDS": "45"}, "heartbeat_seconds", 5),
        ([], {"TATARA_HEALTH_ADDR": "127.0.0.1:9000"}, "health_addr", "127.0.0.1:9000"),
        (["--health-addr", "[::1]:8081"], {}, "health_addr", "[::1]:8081"),
        ([], {"TATARA_FLEET_DOMAIN": "a.b.c"}, "fleet_domain", "a.b.c"),
        ([], {"TATARA_DNS_LB_TARGET": "lb.example"}, "dns_lb_target", "lb.example"),
        ([], {"TATARA_LEADER_ELECT": "false"}, "leader_elect", False),
        (["--leader-elect", "true"], {"TATARA_LEADER_ELECT": "false"}, "leader_elect", True),
        ([], {"TATARA_CONTROLLER_NAMESPACE": "ops"}, "lease_namespace", "ops"),
        (["--leader-election-namespace", "le"], {"TATARA_CONTROLLER_NAMESPACE": "ops"}, "lease_namespace", "le"),
        ([], {"TATARA_LEADER_ELECTION_LEASE_NAME": "x"}, "leader_election_lease_name", "x"),
        (["--leader-election-lease-duration", "30", "--leader-election-renew-deadline", "20",
          "--leader-election-retry-period", "4"], {}, "lease_timing", LeaseTiming(30, 20, 4)),
        ([], {"TATARA_PROMETHEUS_URL": "http://prom:9090/"}, "prometheus_url", "http://prom:9090"),
        ([], {"TATARA_LOG_LEVEL": "DEBUG"}, "log_level", "debug"),
        ([], {"RUST_LOG": "warn"}, "log_level", "warn"),
        ([], {"RUST_LOG": "tatara=debug,kube=info"}, "log_level", "info"),
        ([], {"RUST_LOG": "error", "TATARA_LOG_LEVEL": "debug"}, "log_level", "debug"),
        (["--log-level", "error"], {"RUST_LOG": "debug"}, "log_level", "error"),
        ([], {"TATARA_TABLE_STATUS_INTERVAL": "0.5"}, "table_status_interval", 0.5),
        ([], {}, "workers", 4),
        (["--workers=2"], {"TATARA_WORKERS": "8"}, "workers", 2),
    ],
    ids=[
        "no flag and no variable gives the default",
        "the variable replaces the default",
        "the flag beats the variable",
        "an empty flag value still beats the variable",
        "heartbeat seconds from the variable",
        "heartbeat seconds from --flag=value",
        "health address from the variable",
        "an IPv6 health address in brackets",
        "a fleet domain may contain dots",
        "the DNS LB target from the variable",
        "leader election can be switched off",
        "the leader-elect flag beats its variable",
        "the Lease lives in the controller namespace by default",
        "an explicit Lease namespace wins",
        "the Lease name from the variable",
        "the three Lease durations from flags",
        "the Prometheus URL loses its trailing slash",
        "the log level is case-insensitive",
        "a bare RUST_LOG level is honoured",
        "an unparsable RUST_LOG gives info",
        "TATARA_LOG_LEVEL beats RUST_LOG",
        "the log-level flag beats RUST_LOG",
        "the table status interval from the variable",
        "four workers by default",
        "the workers flag beats its variable",
    ],
)
def test_flag_beats_env_beats_default(argv: list[str], environ: dict[str, str], attribute: str,
                                      expected: Any) -> None:
    assert getattr(parse_config(argv, environ), attribute) == expected


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--heartbeat-seconds", "-1"], {}, "--heartbeat-seconds: expected an unsigned integer, got '-1'"),
        (["--heartbeat-seconds=0"], {}, "--heartbeat-seconds: expected a positive integer, got '0'"),
        ([], {"TATARA_HEARTBEAT_SECONDS": "0"}, "TATARA_HEARTBEAT_SECONDS: expected a positive integer, got '0'"),
        ([], {"TATARA_HEARTBEAT_SECONDS": "soon"}, "TATARA_HEARTBEAT_SECONDS: expected an unsigned integer"),
        ([], {"TATARA_HEALTH_ADDR": "localhost:8080"}, "TATARA_HEALTH_ADDR: expected IP:port with a literal IP"),
        (["--health-addr", "0.0.0.0"], {}, "--health-addr: expected IP:port, got '0.0.0.0'"),
        (["--health-addr", "0.0.0.0:70000"], {}, "--health-addr: expected IP:port"),
        ([], {"TATARA_LEADER_ELECT": "maybe"}, "TATARA_LEADER_ELECT: expected true or false"),
        (["--leader-election-retry-period", "0"], {}, "--leader-election-retry-period: expected a positive"),
        (["--leader-election-renew-deadline", "20"], {},
         "leader election: lease_duration (15.0) must be greater than renew_deadline (20.0)"),
        ([], {"TATARA_PROMETHEUS_URL": "prom:9090"}, "TATARA_PROMETHEUS_URL: expected an http:// or https:// URL"),
        (["--log-level", "loud"], {}, "--log-level: expected one of"),
        (["--no-such-flag"], {}, "unrecognized arguments: --no-such-flag"),
        (["--workers=0"], {}, "--workers: expected a positive integer, got '0'"),
    ],
    ids=[
        "a negative heartbeat", "a zero heartbeat (every wait would requeue at once)",
        "a zero heartbeat from the environment", "a non-numeric heartbeat from the environment",
        "a host name as health address",
        "a health address without port", "a port out of range", "a non-boolean leader-elect",
        "a zero retry period", "a renew deadline longer than the lease", "a Prometheus URL without scheme",
        "an unknown log level", "an unknown flag", "no workers",
    ],
)
def test_bad_values_are_clear_errors(argv: list[str], environ: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(argv, environ)
    assert message in str(err.value)


def test_help_names_every_variable_and_default() -> None:
    text = build_parser().format_help()
    for needle in ("TATARA_WATCH_NAMESPACE", "TATARA_HEARTBEAT_SECONDS", 'default "0.0.0.0:8080"',
                   "TATARA_LEADER_ELECTION_LEASE_DURATION", 'default "15"', "TATARA_PROMETHEUS_URL", "RUST_LOG"):
        assert needle in text


def test_bad_input_exits_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as err:
        parse_or_exit(["--heartbeat-seconds", "x"], {})
    assert err.value.code == 2
    assert "--heartbeat-seconds: expected an unsigned integer" in capsys.readouterr().err


def test_watch_label_selector_is_flux_sharding_flag() -> None:
    """Flux's ``--watch-label-selector``: empty by default (every Process), taken from the flag or
    TATARA_WATCH_LABEL_SELECTOR, a bad selector refused naming the flag (docs/architecture.md#sharding)."""
    assert parse_config([], {}).watch_label_selector == ""
    assert not parse_config([], {}).sharded
    shard = parse_config(["--watch-label-selector", "sharding.fluxcd.io/key=shard1"], {})
    assert (shard.watch_label_selector, shard.sharded) == ("sharding.fluxcd.io/key=shard1", True)
    assert shard.table_lease_name == "tatara-reconciler-processtable"
    unsharded = parse_config([], {"TATARA_WATCH_LABEL_SELECTOR": "!sharding.fluxcd.io/key"})
    assert unsharded.watch_label_selector == "!sharding.fluxcd.io/key"
    with pytest.raises(ConfigError, match="--watch-label-selector"):
        parse_config(["--watch-label-selector=key in shard1"], {})


def test_a_sharded_instance_needs_a_table_lease_of_its_own() -> None:
    with pytest.raises(ConfigError, match="--table-lease-name"):
        parse_config(["--watch-label-selector=a=b", "--table-lease-name=x", "--leader-election-lease-name=x"], {})
    assert parse_config(["--table-lease-name=x", "--leader-election-lease-name=x"], {}).table_lease_name == "x"
