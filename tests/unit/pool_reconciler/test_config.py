"""pool_reconciler.config: the reference's three flags/variables/defaults plus the added leader-election,
health and namespace settings (docs/behaviour.md#tatara-pool-reconciler-flags,
docs/divergences.md#pool-reconciler-start-up-flags)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pool_reconciler.config import ConfigError, parse_config


def test_defaults_match_the_reference() -> None:
    config = parse_config([], {})
    assert config.controller_namespace == "tatara-pool-system"
    assert config.heartbeat_seconds == 30
    assert config.spawn_timeout == timedelta(minutes=10)
    assert config.leader_elect is True
    assert config.lease_namespace == "tatara-pool-system"
    assert config.health_addr == "0.0.0.0:8081"


def test_a_flag_wins_over_its_variable() -> None:
    env = {"TATARA_POOL_HEARTBEAT_SECONDS": "7", "TATARA_POOL_SPAWN_TIMEOUT": "2m", "TATARA_POOL_NAMESPACE": "x"}
    config = parse_config(["--heartbeat-seconds", "9"], env)
    assert (config.heartbeat_seconds, config.spawn_timeout, config.controller_namespace) == (
        9, timedelta(minutes=2), "x")


@pytest.mark.parametrize(("argv", "named"), [
    (["--heartbeat-seconds", "x"], "--heartbeat-seconds"),
    (["--spawn-timeout", "soon"], "--spawn-timeout"),
    (["--health-addr", "localhost:1"], "--health-addr"),
    (["--leader-elect", "maybe"], "--leader-elect"),
])
def test_bad_values_name_the_flag(argv: list[str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        parse_config(argv, {})


def test_watch_label_selector_is_flux_sharding_flag() -> None:
    """Flux's ``--watch-label-selector`` for pools and allocations (docs/architecture.md#sharding)."""
    assert parse_config([], {}).watch_label_selector == ""
    config = parse_config([], {"TATARA_POOL_WATCH_LABEL_SELECTOR": "sharding.fluxcd.io/key=s1"})
    assert config.watch_label_selector == "sharding.fluxcd.io/key=s1"
    with pytest.raises(ConfigError, match="TATARA_POOL_WATCH_LABEL_SELECTOR"):
        parse_config([], {"TATARA_POOL_WATCH_LABEL_SELECTOR": "a=b,"})
