"""Flags and environment variables of ``tatara-reconciler`` (process-reconciler §1.1).

Every setting is ``--flag value`` (or ``--flag=value``); when the flag is absent its environment
variable is used; when both are absent the default applies (§1.1). The reference's flags keep
their names, variables and defaults; added here (DESIGN §4): leader election (on by default,
Lease durations 15/10/2 s), the Prometheus URL for PromQL boundary checks, the log level and the
ProcessTable status write interval.

``--health-addr`` serves ``/healthz``, ``/readyz`` and ``/metrics`` on one port (DESIGN §4).
Invalid values exit with status 2 and a message naming the flag or variable (§1.2 step 2).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

from shared.kube.leader import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LeaseTiming,
)

__all__ = ["LOG_LEVELS", "ConfigError", "ReconcilerConfig", "build_parser", "parse_config", "parse_or_exit"]

LOG_LEVELS: Final = ("trace", "debug", "info", "warn", "warning", "error")
"""Accepted ``--log-level`` values (``trace`` = debug; ``warn`` = warning)."""

_PYTHON_LEVELS: Final = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
                         "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}


class ConfigError(ValueError):
    """An invalid flag or environment value; the text names it, e.g.
    ``--heartbeat-seconds (TATARA_HEARTBEAT_SECONDS): expected an unsigned integer, got '-1'``."""


@dataclass(frozen=True)
class ReconcilerConfig:
    """The reconciler's settings after flags, environment and defaults are merged (§1.1)."""

    watch_namespace: str = ""
    """Empty: watch Processes in all namespaces."""
    controller_namespace: str = "tatara-system"
    health_host: str = "0.0.0.0"
    health_port: int = 8080
    heartbeat_seconds: int = 30
    """Requeue delay for suspended Processes (§0.2)."""
    export_worker_image: str = "ghcr.io/pleme-io/tatara-export-worker:0.2.0"
    export_worker_service_account: str = "tatara-export-worker"
    fleet_cluster: str = "pleme-dev"
    fleet_location: str = "use1"
    fleet_domain: str = "quero.lol"
    dns_lb_target: str = ""
    """Empty: no DNSEndpoint objects are rendered."""
    leader_elect: bool = True
    leader_election_lease_name: str = "tatara-reconciler"
    leader_election_namespace: str = ""
    """Empty: the controller namespace."""
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)
    prometheus_url: str = ""
    """Empty: PromQL boundary conditions evaluate to Unknown."""
    log_level: str = "info"
    table_status_interval: float = 2.0
    """Seconds between two ProcessTable status writes."""

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


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"expected seconds (a number), got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return seconds


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _socket_addr(value: str) -> tuple[str, int]:
    """``IP:port`` (``[v6]:port`` for IPv6); host names are refused, as in the reference (§1.1)."""
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


def _url(value: str) -> str:
    if value == "":
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


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
    _Option("--watch-namespace", "TATARA_WATCH_NAMESPACE", "", _text,
            "Namespace whose Processes are reconciled; empty watches all namespaces.", "NAMESPACE"),
    _Option("--controller-namespace", "TATARA_CONTROLLER_NAMESPACE", "tatara-system", _text,
            "Namespace the controller runs in; default namespace of the leader-election Lease.", "NAMESPACE"),
    _Option("--health-addr", "TATARA_HEALTH_ADDR", "0.0.0.0:8080", _socket_addr,
            "IP:port serving /healthz, /readyz and /metrics (a literal IP, no host names).", "IP:PORT"),
    _Option("--heartbeat-seconds", "TATARA_HEARTBEAT_SECONDS", "30", _unsigned,
            "Requeue delay in seconds for suspended Processes.", "SECONDS"),
    _Option("--export-worker-image", "TATARA_EXPORT_WORKER_IMAGE", "ghcr.io/pleme-io/tatara-export-worker:0.2.0",
            _text, "Container image of export Jobs.", "IMAGE"),
    _Option("--export-worker-service-account", "TATARA_EXPORT_WORKER_SERVICE_ACCOUNT", "tatara-export-worker",
            _text, "serviceAccountName of export Jobs.", "NAME"),
    _Option("--fleet-cluster", "TATARA_FLEET_CLUSTER", "pleme-dev", _text,
            "Cluster segment of routing host names; the default cluster of stable-name claim keys.", "NAME"),
    _Option("--fleet-location", "TATARA_FLEET_LOCATION", "use1", _text,
            "Location segment of routing host names.", "NAME"),
    _Option("--fleet-domain", "TATARA_FLEET_DOMAIN", "quero.lol", _text,
            "Domain suffix of routing host names (may contain dots).", "DOMAIN"),
    _Option("--dns-lb-target", "TATARA_DNS_LB_TARGET", "", _text,
            "CNAME target of every DNSEndpoint; empty renders no DNSEndpoint.", "HOST"),
    _Option("--leader-elect", "TATARA_LEADER_ELECT", "true", _bool,
            "Run controllers only while holding the leader-election Lease (true/false).", "BOOL"),
    _Option("--leader-election-lease-name", "TATARA_LEADER_ELECTION_LEASE_NAME", "tatara-reconciler", _text,
            "Name of the coordination.k8s.io/v1 Lease.", "NAME"),
    _Option("--leader-election-namespace", "TATARA_LEADER_ELECTION_NAMESPACE", "", _text,
            "Namespace of the Lease; empty uses --controller-namespace.", "NAMESPACE"),
    _Option("--leader-election-lease-duration", "TATARA_LEADER_ELECTION_LEASE_DURATION",
            f"{DEFAULT_LEASE_DURATION:g}", _seconds,
            "Seconds a standby waits after the last renewal before taking the Lease over.", "SECONDS"),
    _Option("--leader-election-renew-deadline", "TATARA_LEADER_ELECTION_RENEW_DEADLINE",
            f"{DEFAULT_RENEW_DEADLINE:g}", _seconds,
            "Seconds the leader keeps retrying a renewal before it stops leading.", "SECONDS"),
    _Option("--leader-election-retry-period", "TATARA_LEADER_ELECTION_RETRY_PERIOD",
            f"{DEFAULT_RETRY_PERIOD:g}", _seconds,
            "Seconds between acquire / renew attempts.", "SECONDS"),
    _Option("--prometheus-url", "TATARA_PROMETHEUS_URL", "", _url,
            "Base URL of the Prometheus HTTP API for PromQL boundary conditions; empty makes them Unknown.", "URL"),
    _Option("--log-level", "TATARA_LOG_LEVEL", "info", _log_level,
            f"Log level: {', '.join(LOG_LEVELS)}.", "LEVEL"),
    _Option("--table-status-interval", "TATARA_TABLE_STATUS_INTERVAL", "2", _seconds,
            "Minimum seconds between two ProcessTable status writes.", "SECONDS"),
)


def _dest(option: _Option) -> str:
    return option.flag.removeprefix("--").replace("-", "_")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def build_parser() -> argparse.ArgumentParser:
    """The ``tatara-reconciler`` argument parser; ``--help`` shows each variable and default."""
    parser = _Parser(
        prog="tatara-reconciler",
        description="The Process and ProcessTable controllers of tatara. Each flag falls back to its "
                    "environment variable, then to its default.",
        epilog="Logging also honours RUST_LOG (a bare level) when neither --log-level nor TATARA_LOG_LEVEL "
               "is given; an unparsable RUST_LOG means info. KUBECONFIG or the in-cluster service account "
               "configure the API client.",
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


def parse_config(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> ReconcilerConfig:
    """Merge ``argv`` (without the program name), ``environ`` and the defaults (§1.1).

    Raises:
        ConfigError: an unknown flag, or a value that does not parse (the message names the flag or
            variable), or inconsistent Lease durations.
    """
    environ = {} if environ is None else environ
    namespace = build_parser().parse_args(list(argv or []))
    values = {_dest(o): _resolve(o, getattr(namespace, _dest(o)), environ) for o in _OPTIONS}
    if namespace.log_level is None and "TATARA_LOG_LEVEL" not in environ and "RUST_LOG" in environ:
        try:
            values["log_level"] = _log_level(environ["RUST_LOG"])
        except ValueError:
            values["log_level"] = "info"  # §1.2 step 1: an unparsable RUST_LOG gives info
    host, port = values.pop("health_addr")
    try:
        timing = LeaseTiming(values.pop("leader_election_lease_duration"),
                             values.pop("leader_election_renew_deadline"),
                             values.pop("leader_election_retry_period"))
    except ValueError as err:
        raise ConfigError(f"leader election: {err}") from None
    return ReconcilerConfig(health_host=host, health_port=port, lease_timing=timing, **values)


def parse_or_exit(argv: Sequence[str] | None, environ: Mapping[str, str]) -> ReconcilerConfig:
    """:func:`parse_config`; on bad input print the usage and the error to stderr and exit 2 (§1.2 step 2).

    ``--help`` prints the help and exits 0.
    """
    try:
        return parse_config(argv, environ)
    except ConfigError as err:
        parser = build_parser()
        parser.exit(2, f"{parser.format_usage()}tatara-reconciler: error: {err}\n")
