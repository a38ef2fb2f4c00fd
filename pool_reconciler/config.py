"""Flags and environment variables of ``tatara-pool-reconciler`` (spec/pool-reconciler.md §3.1).

Every setting is ``--flag value`` (or ``--flag=value``); when the flag is absent its environment
variable is used; when both are absent the default applies. The reference's three flags keep
their names, variables and defaults (``--controller-namespace``/``TATARA_POOL_NAMESPACE``,
``--heartbeat-seconds``/``TATARA_POOL_HEARTBEAT_SECONDS``, ``--spawn-timeout``/
``TATARA_POOL_SPAWN_TIMEOUT`` — parsed and enforced here, spec §5.9). Added (DESIGN §4):
``--watch-namespace``, leader election (on by default, Lease durations 15/10/2 s), the
``/healthz``/``/readyz``/``/metrics`` address, ``--reset-image`` (spec §7.8) and ``--log-level``.

Invalid values exit with status 2 and a message naming the flag or variable (spec §3.1).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, NoReturn

from pool_reconciler.pool_decide import DEFAULT_RESET_IMAGE
from shared.duration import DurationError, parse_duration
from shared.kube.leader import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LeaseTiming,
)

__all__ = ["LOG_LEVELS", "ConfigError", "PoolReconcilerConfig", "build_parser", "parse_config", "parse_or_exit"]

PROG: Final = "tatara-pool-reconciler"

LOG_LEVELS: Final = ("trace", "debug", "info", "warn", "warning", "error")
"""Accepted ``--log-level`` values (``trace`` = debug; ``warn`` = warning)."""

_PYTHON_LEVELS: Final = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
                         "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}


class ConfigError(ValueError):
    """An invalid flag or environment value; the text names it."""


@dataclass(frozen=True)
class PoolReconcilerConfig:
    """The pool reconciler's settings after flags, environment and defaults are merged (§3.1)."""

    watch_namespace: str = ""
    """Empty: watch pools, allocations and Processes in all namespaces."""
    controller_namespace: str = "tatara-pool-system"
    health_host: str = "0.0.0.0"
    health_port: int = 8081
    heartbeat_seconds: int = 30
    """Requeue delay after a pass (spec §3.6)."""
    spawn_timeout: timedelta = timedelta(minutes=10)
    """How long an allocation may wait for a member before it is Failed (spec §5.9)."""
    reset_image: str = DEFAULT_RESET_IMAGE
    """Image of the Reset return policy's Job (spec §7.8)."""
    leader_elect: bool = True
    leader_election_lease_name: str = "tatara-pool-reconciler"
    leader_election_namespace: str = ""
    """Empty: the controller namespace."""
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)
    log_level: str = "info"
    workers: int = 4
    """Concurrent reconciles per controller."""

    @property
    def health_addr(self) -> str:
        """``host:port`` (IPv6 hosts in brackets)."""
        host = f"[{self.health_host}]" if ":" in self.health_host else self.health_host
        return f"{host}:{self.health_port}"

    @property
    def lease_namespace(self) -> str:
        """The namespace of the leader-election Lease."""
        return self.leader_election_namespace or self.controller_namespace

    @property
    def python_log_level(self) -> int:
        """``log_level`` as a :mod:`logging` level number."""
        return _PYTHON_LEVELS[self.log_level]


# ── value parsers (each raises ValueError with a short reason) ──────────────


def _text(value: str) -> str:
    return value


def _unsigned(value: str) -> int:
    if not value.strip().isdigit():
        raise ValueError(f"expected an unsigned integer, got {value!r}")
    return int(value)


def _positive(value: str) -> int:
    number = _unsigned(value)
    if number < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"expected seconds (a number), got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def _duration(value: str) -> timedelta:
    try:
        parsed = parse_duration(value)
    except DurationError as err:
        raise ValueError(f"expected a duration such as 10m or 1h 30m, got {value!r} ({err})") from None
    if parsed <= timedelta(0):
        raise ValueError(f"expected a positive duration, got {value!r}")
    return parsed


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _socket_addr(value: str) -> tuple[str, int]:
    """``IP:port`` (``[v6]:port`` for IPv6); host names are refused."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected IP:port, got {value!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        kind: Any = ipaddress.IPv6Address
    else:
        kind = ipaddress.IPv4Address
    try:
        kind(host)
    except ValueError:
        raise ValueError(f"expected IP:port with a literal IP address, got {value!r}") from None
    return host, int(port)


def _log_level(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return lowered


# ── the flag table ───────────────────────────────────────────────────────────


@dataclass(frozen=True)
class _Option:
    flag: str
    env: str
    default: str
    parse: Callable[[str], Any]
    help: str
    metavar: str = "VALUE"


_OPTIONS: Final = (
    _Option("--controller-namespace", "TATARA_POOL_NAMESPACE", "tatara-pool-system", _text,
            "Namespace the controller runs in; default namespace of the leader-election Lease.", "NAMESPACE"),
    _Option("--heartbeat-seconds", "TATARA_POOL_HEARTBEAT_SECONDS", "30", _positive,
            "Requeue delay in seconds after a pool or allocation pass.", "SECONDS"),
    _Option("--spawn-timeout", "TATARA_POOL_SPAWN_TIMEOUT", "10m", _duration,
            "How long an allocation may wait for a free member before it is Failed (e.g. 10m).", "DURATION"),
    _Option("--watch-namespace", "TATARA_POOL_WATCH_NAMESPACE", "", _text,
            "Namespace whose pools, allocations and Processes are reconciled; empty watches all.", "NAMESPACE"),
    _Option("--health-addr", "TATARA_POOL_HEALTH_ADDR", "0.0.0.0:8081", _socket_addr,
            "IP:port serving /healthz, /readyz and /metrics (a literal IP, no host names).", "IP:PORT"),
    _Option("--reset-image", "TATARA_POOL_RESET_IMAGE", DEFAULT_RESET_IMAGE, _text,
            "Container image of the Reset return policy's Job.", "IMAGE"),
    _Option("--workers", "TATARA_POOL_WORKERS", "4", _positive,
            "Concurrent reconciles per controller.", "N"),
    _Option("--leader-elect", "TATARA_POOL_LEADER_ELECT", "true", _bool,
            "Run controllers only while holding the leader-election Lease (true/false).", "BOOL"),
    _Option("--leader-election-lease-name", "TATARA_POOL_LEADER_ELECTION_LEASE_NAME", "tatara-pool-reconciler",
            _text, "Name of the coordination.k8s.io/v1 Lease.", "NAME"),
    _Option("--leader-election-namespace", "TATARA_POOL_LEADER_ELECTION_NAMESPACE", "", _text,
            "Namespace of the Lease; empty uses --controller-namespace.", "NAMESPACE"),
    _Option("--leader-election-lease-duration", "TATARA_POOL_LEADER_ELECTION_LEASE_DURATION",
            f"{DEFAULT_LEASE_DURATION:g}", _seconds,
            "Seconds a standby waits after the last renewal before taking the Lease over.", "SECONDS"),
    _Option("--leader-election-renew-deadline", "TATARA_POOL_LEADER_ELECTION_RENEW_DEADLINE",
            f"{DEFAULT_RENEW_DEADLINE:g}", _seconds,
            "Seconds the leader keeps retrying a renewal before it stops leading.", "SECONDS"),
    _Option("--leader-election-retry-period", "TATARA_POOL_LEADER_ELECTION_RETRY_PERIOD",
            f"{DEFAULT_RETRY_PERIOD:g}", _seconds,
            "Seconds between acquire / renew attempts.", "SECONDS"),
    _Option("--log-level", "TATARA_POOL_LOG_LEVEL", "info", _log_level,
            f"Log level: {', '.join(LOG_LEVELS)}.", "LEVEL"),
)


def _dest(option: _Option) -> str:
    return option.flag.removeprefix("--").replace("-", "_")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``tatara-pool-reconciler`` argument parser; ``--help`` shows each variable and default."""
    parser = _Parser(
        prog=PROG,
        description="The EphemeralPool and EphemeralAllocation controllers of tatara. Each flag falls back "
                    "to its environment variable, then to its default.",
        epilog="Logging also honours RUST_LOG (a bare level) when neither --log-level nor TATARA_POOL_LOG_LEVEL "
               "is given. KUBECONFIG or the in-cluster service account configure the API client. "
               "--version prints the version.",
    )
    for option in _OPTIONS:
        shown = f'"{option.default}"' if option.default else '""'
        parser.add_argument(option.flag, dest=_dest(option), metavar=option.metavar, default=None,
                            help=f"{option.help} [env {option.env}; default {shown}]")
    return parser


def _resolve(option: _Option, flag_value: str | None, environ: Mapping[str, str]) -> Any:
    if flag_value is not None:
        raw, source = flag_value, option.flag
    elif option.env in environ:
        raw, source = environ[option.env], option.env
    else:
        raw, source = option.default, f"default of {option.flag}"
    try:
        return option.parse(raw)
    except ValueError as err:
        raise ConfigError(f"{source}: {err}") from None


def parse_config(argv: Sequence[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> PoolReconcilerConfig:
    """Merge ``argv`` (without the program name), ``environ`` and the defaults (§3.1).

    Raises:
        ConfigError: an unknown flag, a value that does not parse (the message names the flag or
            variable), or inconsistent Lease durations.
    """
    environ = {} if environ is None else environ
    namespace = build_parser().parse_args(list(argv or []))
    values = {_dest(o): _resolve(o, getattr(namespace, _dest(o)), environ) for o in _OPTIONS}
    if namespace.log_level is None and "TATARA_POOL_LOG_LEVEL" not in environ and "RUST_LOG" in environ:
        try:
            values["log_level"] = _log_level(environ["RUST_LOG"])
        except ValueError:
            values["log_level"] = "info"  # §3.2: an unset or invalid RUST_LOG gives info
    host, port = values.pop("health_addr")
    try:
        timing = LeaseTiming(values.pop("leader_election_lease_duration"),
                             values.pop("leader_election_renew_deadline"),
                             values.pop("leader_election_retry_period"))
    except ValueError as err:
        raise ConfigError(f"leader election: {err}") from None
    return PoolReconcilerConfig(health_host=host, health_port=port, lease_timing=timing, **values)


def parse_or_exit(argv: Sequence[str] | None, environ: Mapping[str, str]) -> PoolReconcilerConfig:
    """:func:`parse_config`; on bad input print the usage and the error to stderr and exit 2 (§3.1).

    ``--help`` prints the help and exits 0.
    """
    try:
        return parse_config(argv, environ)
    except ConfigError as err:
        parser = build_parser()
        parser.exit(2, f"{parser.format_usage()}{PROG}: error: {err}\n")
