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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

from shared.domain.duration import DurationError, parse_duration

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


def log_level(value: str) -> str:
    lowered = value.strip().lower()
    if lowered not in LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return lowered


# ── option tables ─────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Option:
    """One flag: its environment variable, default text, value parser, help and metavar."""

    flag: str
    env: str
    default: str
    parse: Callable[[str], Any]
    help: str
    metavar: str = "VALUE"

    @property
    def dest(self) -> str:
        """The attribute name: ``--watch-namespace`` → ``watch_namespace``."""
        return self.flag.removeprefix("--").replace("-", "_")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def build_parser(options: Sequence[Option], *, prog: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """An argument parser whose ``--help`` shows each option's variable and default; errors raise ConfigError."""
    parser = _Parser(prog=prog, description=description, epilog=epilog)
    for option in options:
        shown = f'"{option.default}"' if option.default else '""'
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
        raw, source = option.default, f"default of {option.flag}"
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
