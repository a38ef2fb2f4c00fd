"""Flags and environment variables of ``tatara-pool-reconciler`` (docs/behaviour.md#tatara-pool-reconciler-flags).

Every setting is ``--flag value`` (or ``--flag=value``); when the flag is absent its environment
variable is used; when both are absent the default applies. The reference's three flags keep
their names, variables and defaults (``--controller-namespace``/``TATARA_POOL_NAMESPACE``,
``--heartbeat-seconds``/``TATARA_POOL_HEARTBEAT_SECONDS``, ``--spawn-timeout``/
``TATARA_POOL_SPAWN_TIMEOUT`` — parsed and enforced here, docs/behaviour.md#spawn-timeout). Added
(docs/divergences.md#pool-reconciler-start-up-flags):
``--watch-namespace``, leader election (on by default, Lease durations 15/10/2 s), the
``/healthz``/``/readyz``/``/metrics`` address, ``--reset-image`` (docs/behaviour.md#return-policies) and
``--log-level``.

Invalid values exit with status 2 and a message naming the flag or variable
(docs/runtime.md#entry-point-and-flags).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from pool_reconciler.returns import DEFAULT_RESET_IMAGE
from shared.domain import flags
from shared.domain.flags import LOG_LEVELS, ConfigError, ControllerSettings, Option, controller_options

__all__ = ["LOG_LEVELS", "ConfigError", "PoolReconcilerConfig", "build_parser", "parse_config", "parse_or_exit"]

PROG: Final = "tatara-pool-reconciler"


@dataclass(frozen=True)
class PoolReconcilerConfig(ControllerSettings):
    """The pool reconciler's settings after flags, environment and defaults are merged."""

    controller_namespace: str = "tatara-pool-system"
    health_port: int = 8081
    leader_election_lease_name: str = "tatara-pool-reconciler"
    heartbeat_seconds: int = 30
    """Requeue delay after a pass, seconds."""
    spawn_timeout: timedelta = timedelta(minutes=10)
    """How long an allocation may wait for a member before it is Failed."""
    reset_image: str = DEFAULT_RESET_IMAGE
    """Image of the Reset return policy's Job."""
    workers: int = 4
    """Concurrent reconciles per controller."""


# ── the flag table ───────────────────────────────────────────────────────────


_OPTIONS: Final = flags.with_defaults(PoolReconcilerConfig(), (
    Option("--controller-namespace", "TATARA_POOL_NAMESPACE", flags.text,
            "Namespace the controller runs in; default namespace of the leader-election Lease.", "NAMESPACE"),
    Option("--heartbeat-seconds", "TATARA_POOL_HEARTBEAT_SECONDS", flags.positive,
            "Requeue delay in seconds after a pool or allocation pass.", "SECONDS"),
    Option("--spawn-timeout", "TATARA_POOL_SPAWN_TIMEOUT", flags.duration,
            "How long an allocation may wait for a free member before it is Failed (e.g. 10m).", "DURATION"),
    Option("--watch-namespace", "TATARA_POOL_WATCH_NAMESPACE", flags.text,
            "Namespace whose pools, allocations and Processes are reconciled; empty watches all.", "NAMESPACE"),
    flags.watch_label_selector_option("TATARA_POOL_WATCH_LABEL_SELECTOR", "pools and allocations"),
    Option("--health-addr", "TATARA_POOL_HEALTH_ADDR", flags.socket_addr,
            "IP:port serving /healthz, /readyz and /metrics (a literal IP, no host names).", "IP:PORT"),
    Option("--reset-image", "TATARA_POOL_RESET_IMAGE", flags.text,
            "Container image of the Reset return policy's Job.", "IMAGE"),
    Option("--workers", "TATARA_POOL_WORKERS", flags.positive,
            "Concurrent reconciles per controller.", "N"),
    *controller_options("TATARA_POOL_"),
    *flags.sharding_options("TATARA_POOL_"),
))


def build_parser() -> argparse.ArgumentParser:
    """The ``tatara-pool-reconciler`` argument parser; ``--help`` shows each variable and default."""
    return flags.build_parser(
        _OPTIONS,
        prog=PROG,
        description="The EphemeralPool and EphemeralAllocation controllers of tatara. Each flag falls back "
                    "to its environment variable, then to its default.",
        epilog="Logging also honours RUST_LOG (a bare level) when neither --log-level nor TATARA_POOL_LOG_LEVEL "
               "is given. KUBECONFIG or the in-cluster service account configure the API client. "
               "--version prints the version.",
    )


def parse_config(argv: Sequence[str] | None = None,
                 environ: Mapping[str, str] | None = None) -> PoolReconcilerConfig:
    """Merge ``argv`` (without the program name), ``environ`` and the defaults: a flag wins over its
    variable, a variable over the default.

    Raises:
        ConfigError: an unknown flag, a value that does not parse (the message names the flag or
            variable), inconsistent Lease durations, or dynamic sharding that cannot work
            (:meth:`~shared.domain.flags.ControllerSettings.check_sharding`).
    """
    values = flags.resolve_settings(_OPTIONS, build_parser(), argv, environ, env_prefix="TATARA_POOL_")
    config = PoolReconcilerConfig(**values)
    config.check_sharding()
    return config


def parse_or_exit(argv: Sequence[str] | None, environ: Mapping[str, str]) -> PoolReconcilerConfig:
    """:func:`parse_config`; on bad input print the usage and the error to stderr and exit 2.

    ``--help`` prints the help and exits 0.
    """
    config: PoolReconcilerConfig = flags.parse_or_exit(parse_config, build_parser, argv, environ)
    return config
