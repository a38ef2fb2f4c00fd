"""shared.domain.flags: each option's default is the settings dataclass's, written once
(docs/behaviour.md#configuration): the text ``--help`` shows and the default parses to are made from it."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from pool_reconciler import config as pool_config
from reconciler import config as reconciler_config
from shared.domain import flags
from shared.domain.flags import ControllerSettings, Option


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (30, "30"),
        (2.0, "2"),
        (0.5, "0.5"),
        (15.0, "15"),
        (timedelta(minutes=10), "10m"),
        (timedelta(hours=1, minutes=30), "1h 30m"),
        (timedelta(days=1, seconds=5), "1d 5s"),
        (timedelta(0), "0s"),
        ("", ""),
        ("tatara-system", "tatara-system"),
    ],
)
def test_default_text(value: object, text: str) -> None:
    assert flags.default_text(value) == text


@pytest.mark.parametrize("value", [timedelta(milliseconds=1500), None, ("0.0.0.0", 80)])
def test_default_text_refuses_what_it_cannot_write_exactly(value: object) -> None:
    with pytest.raises(TypeError):
        flags.default_text(value)


def test_with_defaults_takes_each_default_from_the_settings() -> None:
    settings = ControllerSettings(controller_namespace="ns", health_host="::1", health_port=9000,
                                  leader_elect=False, log_level="debug")
    table = flags.with_defaults(settings, (
        Option("--controller-namespace", "X_NS", flags.text, "h"),
        Option("--health-addr", "X_ADDR", flags.socket_addr, "h"),
        *flags.controller_options("X_"),
    ))
    assert {o.flag: o.default for o in table} == {
        "--controller-namespace": "ns",
        "--health-addr": "[::1]:9000",
        "--leader-elect": "false",
        "--leader-election-lease-name": "",
        "--leader-election-namespace": "",
        "--leader-election-lease-duration": "15",
        "--leader-election-renew-deadline": "10",
        "--leader-election-retry-period": "2",
        "--log-level": "debug",
    }


def test_an_option_that_stands_for_no_setting_is_refused() -> None:
    with pytest.raises(AttributeError):
        flags.with_defaults(ControllerSettings(), (Option("--no-such-setting", "X", flags.text, "h"),))


def test_a_table_not_given_its_defaults_is_refused() -> None:
    with pytest.raises(ValueError, match="--leader-elect has no default text"):
        flags.build_parser(flags.controller_options("X_"), prog="x", description="", epilog="")


@pytest.mark.parametrize(
    ("options", "defaults"),
    [
        (reconciler_config._OPTIONS, reconciler_config.ReconcilerConfig()),
        (pool_config._OPTIONS, pool_config.PoolReconcilerConfig()),
    ],
    ids=["tatara-reconciler", "tatara-pool-reconciler"],
)
def test_each_binarys_default_texts_parse_back_to_its_settings_defaults(
    options: tuple[Option, ...], defaults: ControllerSettings
) -> None:
    # the two ways a default exists (the text --help shows and an absent flag parses, the dataclass field)
    # must never disagree: every option's text parses to the dataclass's value for it ...
    parsed: dict[str, Any] = {}
    for option in options:
        assert option.default is not None
        parsed[option.dest] = option.parse(option.default)
        expected = flags.setting(defaults, option.dest)
        if option.dest == "health_addr":
            expected = (defaults.health_host, defaults.health_port)
        assert parsed[option.dest] == expected, option.flag
    # ... and every field of the settings has an option (none keeps a default no flag can change)
    covered = set(parsed) | {"health_host", "health_port", "lease_timing"}
    assert {f.name for f in dataclasses.fields(defaults)} <= covered


def test_field_default_reads_a_dataclass_field_of_a_settings_type_with_required_fields() -> None:
    @dataclasses.dataclass(frozen=True)
    class Worker:
        name: str
        retries: int = 3
        items: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    assert flags.field_default(Worker, "retries") == "3"
    with pytest.raises(ValueError, match="no plain default"):
        flags.field_default(Worker, "name")
    with pytest.raises(ValueError, match="no plain default"):
        flags.field_default(Worker, "items")
