"""Flag-or-environment option tables for both binaries' start-up configuration.

Each :class:`Option` is a flag with an environment-variable fallback and a default; a value
parser turns the text into a value or raises ``ValueError`` with a short reason, which
:func:`resolve` turns into a :class:`ConfigError` naming the flag or variable it came from
(flag beats environment beats default, as the reference's command lines behave; the tables of both
binaries: docs/behaviour.md#configuration).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import timedelta
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

from shared.domain.duration import DurationError, parse_duration
from shared.domain.sharding import check_label_value, combine_selectors, parse_selector, ring
from shared.kube.leader import LeaseOptions, LeaseTiming
from shared.kube.ring import Ring

LOG_LEVELS: Final = ("trace", "debug", "info", "warn", "warning", "error")
"""Accepted ``--log-level`` values (``trace`` = debug; ``warn`` = warning)."""

PYTHON_LEVELS: Final = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
                        "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR}
"""``--log-level`` value → :mod:`logging` level number."""


class ConfigError(ValueError):
    """An invalid flag or environment value; the text names it, e.g.
    ``--heartbeat-seconds (TATARA_HEARTBEAT_SECONDS): expected an unsigned integer, got '-1'``."""


# ── value parsers (each raises ValueError with a short reason) ──────────────


def text(value: str) -> str:
    return value


def unsigned(value: str) -> int:
    if not value.strip().isdigit():
        raise ValueError(f"expected an unsigned integer, got {value!r}")
    return int(value)


def positive(value: str) -> int:
    number = unsigned(value)
    if number < 1:
        raise ValueError(f"expected a positive integer, got {value!r}")
    return number


def seconds(value: str) -> float:
    try:
        parsed = float(value)
    except ValueError:
        raise ValueError(f"expected seconds (a number), got {value!r}") from None
    if not parsed > 0 or parsed == float("inf"):
        raise ValueError(f"expected a positive number of seconds, got {value!r}")
    return parsed


def duration(value: str) -> timedelta:
    try:
        parsed = parse_duration(value)
    except DurationError as err:
        raise ValueError(f"expected a duration such as 10m or 1h 30m, got {value!r} ({err})") from None
    if parsed <= timedelta(0):
        raise ValueError(f"expected a positive duration, got {value!r}")
    return parsed


def boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def socket_addr(value: str) -> tuple[str, int]:
    """``IP:port`` (``[v6]:port`` for IPv6); host names are refused, as in the reference."""
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


def url(value: str) -> str:
    if value == "":
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.rstrip("/")


def label_selector(value: str) -> str:
    """A Kubernetes label selector (:func:`shared.domain.sharding.parse_selector`), stripped; empty: all."""
    return parse_selector(value).text


SHARDING_MODES: Final = ("static", "dynamic")
"""``--sharding`` values (docs/architecture.md#sharding, #dynamic-sharding)."""


def sharding_mode(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in SHARDING_MODES:
        raise ValueError(f"expected one of {', '.join(SHARDING_MODES)}, got {value!r}")
    return lowered


def optional_label_value(value: str) -> str:
    """A label value (a ring or member name), or empty for the default."""
    if value:
        check_label_value("expected a label value", value)
    return value


def log_level(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return lowered


# ── option tables ─────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Option:
    """One flag: its environment variable, value parser, help, metavar and default text.

    ``default`` is not written by hand: :func:`with_defaults` fills it in from the settings dataclass's
    default for :attr:`dest`, so each default is written once (None until then)."""

    flag: str
    env: str
    parse: Callable[[str], Any]
    help: str
    metavar: str = "VALUE"
    default: str | None = None

    @property
    def dest(self) -> str:
        """The attribute name: ``--watch-namespace`` → ``watch_namespace``."""
        return self.flag.removeprefix("--").replace("-", "_")


def default_text(value: object) -> str:
    """A settings default as the text its option shows and parses: ``true``/``false``; an integer as
    written; a float in its shortest form (``2.0`` → ``2``); a whole-second timedelta in humantime units
    (``10m``, ``1h 30m``, ``0s``); text as is.

    Raises:
        TypeError: a value of any other type, or a timedelta with a fraction of a second.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, timedelta):
        total = value.total_seconds()
        if total != int(total) or total < 0:
            raise TypeError(f"no default text for {value!r}: not a whole number of seconds")
        left, parts = int(total), []
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
            if left >= size:
                parts.append(f"{left // size}{unit}")
                left %= size
        return " ".join(parts) or "0s"
    raise TypeError(f"no default text for {value!r}")


_LEASE_FIELDS: Final = {"leader_election_lease_duration": "lease_duration",
                        "leader_election_renew_deadline": "renew_deadline",
                        "leader_election_retry_period": "retry_period"}
"""Option dests that are fields of :attr:`ControllerSettings.lease_timing`, not of the settings."""


def setting(settings: ControllerSettings, dest: str) -> object:
    """The value of ``settings`` an option ``dest`` stands for: a field, the ``health_addr`` property
    (``--health-addr`` is ``health_host`` and ``health_port``), or one of the Lease durations.

    Raises:
        AttributeError: ``settings`` has nothing by that name.
    """
    lease = _LEASE_FIELDS.get(dest)
    return getattr(settings.lease_timing, lease) if lease is not None else getattr(settings, dest)


def with_defaults(defaults: ControllerSettings, options: Sequence[Option]) -> tuple[Option, ...]:
    """``options``, each with its default text taken from ``defaults`` (the settings dataclass built with
    no arguments) by :func:`setting` and :func:`default_text`: the one place each default is written is
    the dataclass.

    Raises:
        AttributeError: an option stands for nothing in ``defaults``.
    """
    return tuple(replace(o, default=default_text(setting(defaults, o.dest))) for o in options)


def field_default(settings_type: type[Any], name: str) -> str:
    """The :func:`default_text` of dataclass ``settings_type``'s field ``name`` default (for a settings
    type with required fields, which cannot be built bare for :func:`with_defaults`).

    Raises:
        KeyError: no such field; ValueError: the field has no plain default.
    """
    found = {f.name: f for f in fields(settings_type)}[name]
    if found.default is MISSING:
        raise ValueError(f"{settings_type.__name__}.{name} has no plain default")
    return default_text(found.default)


def _default(option: Option) -> str:
    if option.default is None:
        raise ValueError(f"{option.flag} has no default text: build the table with with_defaults()")
    return option.default


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def build_parser(options: Sequence[Option], *, prog: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """An argument parser whose ``--help`` shows each option's variable and default; errors raise ConfigError."""
    parser = _Parser(prog=prog, description=description, epilog=epilog)
    for option in options:
        shown = f'"{_default(option)}"'
        parser.add_argument(option.flag, dest=option.dest, metavar=option.metavar, default=None,
                            help=f"{option.help} [env {option.env}; default {shown}]")
    return parser


def resolve(option: Option, flag_value: str | None, environ: Mapping[str, str]) -> Any:
    """The option's value: the flag, else its environment variable, else the default.

    Raises:
        ConfigError: the chosen text does not parse (the message names where it came from).
    """
    if flag_value is not None:
        raw, source = flag_value, option.flag
    elif option.env in environ:
        raw, source = environ[option.env], option.env
    else:
        raw, source = _default(option), f"default of {option.flag}"
    try:
        return option.parse(raw)
    except ValueError as err:
        raise ConfigError(f"{source}: {err}") from None


def resolve_all(options: Sequence[Option], parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                environ: Mapping[str, str], *, log_level_env: str) -> dict[str, Any]:
    """Every option's value by ``dest``. A bare ``RUST_LOG`` level stands in for an absent
    ``--log-level`` / ``log_level_env``; an unparsable one means ``info`` (the reference's rule)."""
    namespace = parser.parse_args(list(argv or []))
    values = {o.dest: resolve(o, getattr(namespace, o.dest), environ) for o in options}
    if namespace.log_level is None and log_level_env not in environ and "RUST_LOG" in environ:
        try:
            values["log_level"] = log_level(environ["RUST_LOG"])
        except ValueError:
            values["log_level"] = "info"
    return values


# ── what every tatara binary has ─────────────────────────────────────────────


@dataclass(frozen=True)
class ControllerSettings:
    """The settings both binaries share: where to watch, the health/metrics address, leader election and
    the log level. Each binary's config subclasses it (with its own defaults) and adds its own fields."""

    watch_namespace: str = ""
    """Empty: watch every namespace."""
    watch_label_selector: str = ""
    """Label selector of the objects this instance owns (Flux's sharding flag); empty: every object
    (docs/architecture.md#sharding)."""
    controller_namespace: str = ""
    health_host: str = "0.0.0.0"
    health_port: int = 8080
    leader_elect: bool = True
    leader_election_lease_name: str = ""
    leader_election_namespace: str = ""
    """Empty: the controller namespace."""
    lease_timing: LeaseTiming = field(default_factory=LeaseTiming)
    log_level: str = "info"
    sharding: str = "static"
    """``static``: reconcile what ``watch_label_selector`` selects; ``dynamic``: join a ring of instances that a
    sharder assigns objects to (docs/architecture.md#dynamic-sharding)."""
    shard_name: str = ""
    """This instance's member name in a dynamic ring (its member Lease's name); empty: the host name (a pod's
    name)."""
    shard_ring: str = ""
    """The dynamic ring's name; empty: ``leader_election_lease_name``."""

    @property
    def dynamic(self) -> bool:
        """True with ``--sharding=dynamic``."""
        return self.sharding == "dynamic"

    @property
    def ring(self) -> Ring:
        """The dynamic ring's keys (:func:`shared.domain.sharding.ring`)."""
        return ring(self.shard_ring or self.leader_election_lease_name)

    @property
    def member(self) -> str:
        """This instance's member name: ``shard_name``, else the host name."""
        return self.shard_name or socket.gethostname()

    @property
    def owned_selector(self) -> str:
        """The label selector of the objects this instance reconciles: ``watch_label_selector``, and with dynamic
        sharding also the ring's shard label naming this member."""
        if not self.dynamic:
            return self.watch_label_selector
        return combine_selectors(self.watch_label_selector, self.ring.member_selector(self.member))

    @property
    def sharder_lease_name(self) -> str:
        """The Lease electing the ring's one sharder (dynamic sharding)."""
        return f"{self.ring.name}-sharder"

    def check_sharding(self) -> None:
        """Raise :class:`ConfigError` for dynamic-sharding settings that cannot work: no leader election (the
        membership is a Lease), a ring or member name that is not a label value, or a member named like the
        sharder's Lease or the binary's own Lease."""
        if not self.dynamic:
            return
        if not self.leader_elect:
            raise ConfigError("--sharding=dynamic needs --leader-elect=true: each instance's membership is a Lease")
        try:
            check_label_value("--shard-ring (or --leader-election-lease-name, its default)", self.ring.name)
            check_label_value("--shard-name (or the host name, its default)", self.member)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if self.member in (self.sharder_lease_name, self.leader_election_lease_name):
            raise ConfigError(f"--shard-name {self.member!r} would share a Lease with the ring's sharder or the "
                              "binary's own Lease")

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
    def lease(self) -> LeaseOptions | None:
        """The Lease to campaign for, or None when leader election is off."""
        if not self.leader_elect:
            return None
        if self.dynamic:  # every instance works, each under a membership Lease of its own
            return LeaseOptions(self.member, self.lease_namespace, self.lease_timing,
                                labels=((self.ring.lease_label, self.ring.name),))
        return LeaseOptions(self.leader_election_lease_name, self.lease_namespace, self.lease_timing)

    @property
    def python_log_level(self) -> int:
        """``log_level`` as a :mod:`logging` level number."""
        return PYTHON_LEVELS[self.log_level]


def watch_label_selector_option(env: str, owned: str) -> Option:
    """``--watch-label-selector`` with its variable ``env``, for a binary owning ``owned`` (help text)."""
    return Option("--watch-label-selector", env, label_selector,
                  f"Label selector of the {owned} this instance reconciles, as Flux's flag: e.g. "
                  "sharding.fluxcd.io/key=shard1 for a shard, !sharding.fluxcd.io/key for the instance taking "
                  "what no shard claims; empty reconciles all.", "SELECTOR")


def sharding_options(env_prefix: str) -> tuple[Option, ...]:
    """``--sharding``, ``--shard-name`` and ``--shard-ring``, their variables named ``<env_prefix>SHARDING`` …
    (docs/architecture.md#dynamic-sharding)."""
    return (
        Option("--sharding", f"{env_prefix}SHARDING", sharding_mode,
               "static: reconcile what --watch-label-selector selects; dynamic: join a ring of instances, each "
               "holding a membership Lease, that a sharder assigns objects to by consistent hashing.", "MODE"),
        Option("--shard-name", f"{env_prefix}SHARD_NAME", optional_label_value,
               "With --sharding=dynamic: this instance's member name (its Lease's name; a label value); "
               "empty: the host name.", "NAME"),
        Option("--shard-ring", f"{env_prefix}SHARD_RING", optional_label_value,
               "With --sharding=dynamic: the ring's name (a label value); empty: --leader-election-lease-name.",
               "NAME"),
    )


def controller_options(env_prefix: str) -> tuple[Option, ...]:
    """The leader-election and log-level flags, their variables named ``<env_prefix>LEADER_ELECT`` … and
    ``<env_prefix>LOG_LEVEL`` (e.g. ``TATARA_`` or ``TATARA_POOL_``); their defaults are the settings'
    (:func:`with_defaults`; Lease durations 15/10/2 s from :class:`~shared.kube.leader.LeaseTiming`)."""
    return (
        Option("--leader-elect", f"{env_prefix}LEADER_ELECT", boolean,
               "Run controllers only while holding the leader-election Lease (true/false).", "BOOL"),
        Option("--leader-election-lease-name", f"{env_prefix}LEADER_ELECTION_LEASE_NAME", text,
               "Name of the coordination.k8s.io/v1 Lease.", "NAME"),
        Option("--leader-election-namespace", f"{env_prefix}LEADER_ELECTION_NAMESPACE", text,
               "Namespace of the Lease; empty uses --controller-namespace.", "NAMESPACE"),
        Option("--leader-election-lease-duration", f"{env_prefix}LEADER_ELECTION_LEASE_DURATION", seconds,
               "Seconds a standby waits after the last renewal before taking the Lease over.", "SECONDS"),
        Option("--leader-election-renew-deadline", f"{env_prefix}LEADER_ELECTION_RENEW_DEADLINE", seconds,
               "Seconds the leader keeps retrying a renewal before it stops leading.", "SECONDS"),
        Option("--leader-election-retry-period", f"{env_prefix}LEADER_ELECTION_RETRY_PERIOD", seconds,
               "Seconds between acquire / renew attempts.", "SECONDS"),
        Option("--log-level", f"{env_prefix}LOG_LEVEL", log_level,
               f"Log level: {', '.join(LOG_LEVELS)}.", "LEVEL"),
    )


def resolve_settings(options: Sequence[Option], parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                     environ: Mapping[str, str] | None, *, env_prefix: str) -> dict[str, Any]:
    """:func:`resolve_all`, with ``--health-addr`` split into ``health_host``/``health_port`` and the three
    Lease durations folded into ``lease_timing`` — the keyword arguments of a :class:`ControllerSettings`.

    Raises:
        ConfigError: a bad flag or value, or Lease durations that break leader election's rule.
    """
    values = resolve_all(options, parser, argv, environ or {}, log_level_env=f"{env_prefix}LOG_LEVEL")
    values["health_host"], values["health_port"] = values.pop("health_addr")
    try:
        values["lease_timing"] = LeaseTiming(values.pop("leader_election_lease_duration"),
                                             values.pop("leader_election_renew_deadline"),
                                             values.pop("leader_election_retry_period"))
    except ValueError as err:
        raise ConfigError(f"leader election: {err}") from None
    return values


def parse_or_exit(parse: Callable[[Sequence[str] | None, Mapping[str, str]], Any],
                  build: Callable[[], argparse.ArgumentParser],
                  argv: Sequence[str] | None, environ: Mapping[str, str]) -> Any:
    """``parse(argv, environ)``; on a :class:`ConfigError` print the usage and the error to stderr and exit 2.
    ``--help`` prints the help and exits 0 (argparse)."""
    try:
        return parse(argv, environ)
    except ConfigError as err:
        parser = build()
        parser.exit(2, f"{parser.format_usage()}{parser.prog}: error: {err}\n")
