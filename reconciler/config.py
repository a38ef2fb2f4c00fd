"""Flags and environment variables of ``tatara-reconciler`` (docs/behaviour.md#tatara-reconciler-flags).

Every setting is ``--flag value`` (or ``--flag=value``); when the flag is absent its environment
variable is used; when both are absent the default applies. The reference's flags keep their
names, variables and defaults; added here (docs/divergences.md#start-up-flags): leader election (on
by default, Lease durations 15/10/2 s), the Prometheus URL for PromQL boundary checks, the log level
and the ProcessTable status write interval.

``--health-addr`` serves ``/healthz``, ``/readyz`` and ``/metrics`` on one port (docs/runtime.md#health).
Invalid values exit with status 2 and a message naming the flag or variable.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from shared.domain import flags
from shared.domain.flags import LOG_LEVELS, ConfigError, ControllerSettings, Option, controller_options
from shared.domain.hostnames import DEFAULT_FLEET_CLUSTER, DEFAULT_FLEET_DOMAIN, DEFAULT_FLEET_LOCATION

__all__ = ["LOG_LEVELS", "SHARDED_PID_BLOCK_SIZE", "ConfigError", "ReconcilerConfig", "build_parser", "parse_config",
           "parse_or_exit", "pid_block_size"]


@dataclass(frozen=True)
class ReconcilerConfig(ControllerSettings):
    """The reconciler's settings after flags, environment and defaults are merged."""

    controller_namespace: str = "tatara-system"
    health_port: int = 8080
    leader_election_lease_name: str = "tatara-reconciler"
    heartbeat_seconds: int = 30
    """HEARTBEAT: the requeue delay of every wait, suspended Processes included (docs/behaviour.md#timing)."""
    export_worker_image: str = "ghcr.io/pleme-io/tatara-export-worker:0.2.0"
    export_worker_service_account: str = "tatara-export-worker"
    fleet_cluster: str = DEFAULT_FLEET_CLUSTER
    fleet_location: str = DEFAULT_FLEET_LOCATION
    fleet_domain: str = DEFAULT_FLEET_DOMAIN
    dns_lb_target: str = ""
    """Empty: no DNSEndpoint objects are rendered."""
    prometheus_url: str = ""
    """Empty: PromQL boundary conditions evaluate to Unknown."""
    table_status_interval: float = 2.0
    """Seconds between two ProcessTable status writes."""
    workers: int = 4
    """Concurrent reconciles of the Process controller (controller-runtime's MaxConcurrentReconciles)."""
    table_lease_name: str = "tatara-reconciler-processtable"
    """The Lease electing the one ProcessTable status writer among sharded instances
    (docs/architecture.md#one-processtable-many-shards)."""

    pid_block_size: int = 0
    """Sequence numbers one ProcessTable bump reserves; 0: :data:`SHARDED_PID_BLOCK_SIZE` when sharded, else 1
    (docs/architecture.md#one-processtable-many-shards)."""

    @property
    def sharded(self) -> bool:
        """True with a ``--watch-label-selector`` or dynamic sharding: the instance reconciles a part of the
        Processes."""
        return bool(self.watch_label_selector) or self.dynamic

    @property
    def pid_block(self) -> int:
        """The block size in effect: :func:`pid_block_size` of the flag and :attr:`sharded`."""
        return pid_block_size(self.pid_block_size, sharded=self.sharded)


SHARDED_PID_BLOCK_SIZE: Final = 32
"""Numbers a sharded instance reserves per bump when ``--pid-block-size`` is 0 (the default)."""


def pid_block_size(flag: int, *, sharded: bool) -> int:
    """``flag`` when set (above 0); else 1 unsharded (one number per bump, as the reference) and
    :data:`SHARDED_PID_BLOCK_SIZE` sharded (several writers contend on one table)."""
    if flag > 0:
        return flag
    return SHARDED_PID_BLOCK_SIZE if sharded else 1


# ── the flag table ───────────────────────────────────────────────────────────


_OPTIONS: Final = flags.with_defaults(ReconcilerConfig(), (
    Option("--watch-namespace", "TATARA_WATCH_NAMESPACE", flags.text,
            "Namespace whose Processes are reconciled; empty watches all namespaces.", "NAMESPACE"),
    flags.watch_label_selector_option("TATARA_WATCH_LABEL_SELECTOR", "Processes"),
    Option("--controller-namespace", "TATARA_CONTROLLER_NAMESPACE", flags.text,
            "Namespace the controller runs in; default namespace of the leader-election Lease.", "NAMESPACE"),
    Option("--health-addr", "TATARA_HEALTH_ADDR", flags.socket_addr,
            "IP:port serving /healthz, /readyz and /metrics (a literal IP, no host names).", "IP:PORT"),
    Option("--heartbeat-seconds", "TATARA_HEARTBEAT_SECONDS", flags.positive,
            "Requeue delay in seconds of every wait (a safety net beside the watches); at least 1.", "SECONDS"),
    Option("--export-worker-image", "TATARA_EXPORT_WORKER_IMAGE", flags.text,
            "Container image of export Jobs.", "IMAGE"),
    Option("--export-worker-service-account", "TATARA_EXPORT_WORKER_SERVICE_ACCOUNT", flags.text,
            "serviceAccountName of export Jobs.", "NAME"),
    Option("--fleet-cluster", "TATARA_FLEET_CLUSTER", flags.text,
            "Cluster segment of routing host names; the default cluster of stable-name claim keys.", "NAME"),
    Option("--fleet-location", "TATARA_FLEET_LOCATION", flags.text,
            "Location segment of routing host names.", "NAME"),
    Option("--fleet-domain", "TATARA_FLEET_DOMAIN", flags.text,
            "Domain suffix of routing host names (may contain dots).", "DOMAIN"),
    Option("--dns-lb-target", "TATARA_DNS_LB_TARGET", flags.text,
            "CNAME target of every DNSEndpoint; empty renders no DNSEndpoint.", "HOST"),
    Option("--prometheus-url", "TATARA_PROMETHEUS_URL", flags.url,
            "Base URL of the Prometheus HTTP API for PromQL boundary conditions; empty makes them Unknown.", "URL"),
    Option("--table-status-interval", "TATARA_TABLE_STATUS_INTERVAL", flags.seconds,
            "Minimum seconds between two ProcessTable status writes.", "SECONDS"),
    Option("--workers", "TATARA_WORKERS", flags.positive,
            "Concurrent Process reconciles (never two on one Process).", "N"),
    Option("--table-lease-name", "TATARA_TABLE_LEASE_NAME", flags.text,
            "With --watch-label-selector or --sharding=dynamic: the Lease (same for every shard) electing the one "
            "instance that writes the ProcessTable's status.", "NAME"),
    Option("--pid-block-size", "TATARA_PID_BLOCK_SIZE", flags.unsigned,
            "Sequence numbers one ProcessTable bump reserves for this instance (handed out without further "
            "requests); 0: 32 with --watch-label-selector or --sharding=dynamic, else 1.", "N"),
    *controller_options("TATARA_"),
    *flags.sharding_options("TATARA_"),
))


def build_parser() -> argparse.ArgumentParser:
    """The ``tatara-reconciler`` argument parser; ``--help`` shows each variable and default."""
    return flags.build_parser(
        _OPTIONS,
        prog="tatara-reconciler",
        description="The Process and ProcessTable controllers of tatara. Each flag falls back to its "
                    "environment variable, then to its default.",
        epilog="Logging also honours RUST_LOG (a bare level) when neither --log-level nor TATARA_LOG_LEVEL "
               "is given; an unparsable RUST_LOG means info. KUBECONFIG or the in-cluster service account "
               "configure the API client.",
    )


def parse_config(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> ReconcilerConfig:
    """Merge ``argv`` (without the program name), ``environ`` and the defaults.

    Raises:
        ConfigError: an unknown flag, or a value that does not parse (the message names the flag or
            variable), inconsistent Lease durations, a sharded instance whose table Lease is its own Lease, or
            dynamic sharding that cannot work (:meth:`~shared.domain.flags.ControllerSettings.check_sharding`).
    """
    config = ReconcilerConfig(**flags.resolve_settings(_OPTIONS, build_parser(), argv, environ, env_prefix="TATARA_"))
    config.check_sharding()
    if config.sharded and config.table_lease_name in ("", config.leader_election_lease_name):
        raise ConfigError("--table-lease-name must name a Lease of its own (not --leader-election-lease-name) "
                          "when --watch-label-selector or --sharding=dynamic is set")
    if config.dynamic and config.table_lease_name in (config.member, config.sharder_lease_name):
        raise ConfigError(f"--table-lease-name {config.table_lease_name!r} is also a member's or the sharder's Lease")
    return config


def parse_or_exit(argv: Sequence[str] | None, environ: Mapping[str, str]) -> ReconcilerConfig:
    """:func:`parse_config`; on bad input print the usage and the error to stderr and exit 2.

    ``--help`` prints the help and exits 0.
    """
    config: ReconcilerConfig = flags.parse_or_exit(parse_config, build_parser, argv, environ)
    return config
