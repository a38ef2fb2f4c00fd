"""Flags and environment variables of ``tatara-export-worker`` (docs/behaviour.md#tatara-export-worker-flags).

The reference's command line, as an export Job passes it: ``--spec <ExportSpec JSON>`` (or ``--spec-json
<file>``), ``--process-namespace``, ``--process-name``, ``--receipt-configmap``, optionally
``--previous-root`` and ``--receipt-key`` (default ``receipt.yaml``), and ours, ``--idempotency-key`` (the key a sink
de-duplicates a retried export by; docs/wire-format.md#export-idempotency-keys). Each flag falls back to its environment
variable, then to its default. A missing or unparsable value exits with status 2 and a message naming the
flag or variable; no receipt is written then (there is no export to attest).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from shared.domain import flags
from shared.domain.api.codec import wire_decoder
from shared.domain.api.export import ExportSpec
from shared.domain.export_key import idempotency_key_header
from shared.domain.flags import ConfigError, Option

__all__ = ["ConfigError", "WorkerConfig", "build_parser", "parse_config", "parse_or_exit"]


@dataclass(frozen=True)
class WorkerConfig:
    """The worker's settings after flags, environment and defaults are merged."""

    spec: ExportSpec
    process_namespace: str
    process_name: str
    receipt_configmap: str
    previous_root: str | None = None
    receipt_key: str = "receipt.yaml"
    idempotency_key: str | None = None
    log_level: str = "info"

    @property
    def python_log_level(self) -> int:
        """``log_level`` as a :mod:`logging` level number."""
        return flags.PYTHON_LEVELS[self.log_level]


_OPTIONS: Final = (
    Option("--spec", "TATARA_EXPORT_SPEC", flags.text,
           "The ExportSpec to run, as JSON (exactly one of --spec and --spec-json).", "JSON", default=""),
    Option("--spec-json", "TATARA_EXPORT_SPEC_JSON", flags.text,
           "A file holding the ExportSpec as JSON.", "PATH", default=""),
    Option("--process-namespace", "TATARA_PROCESS_NAMESPACE", flags.text,
           "Namespace of the Process the export belongs to (and of the receipt ConfigMap).", "NAMESPACE", default=""),
    Option("--process-name", "TATARA_PROCESS_NAME", flags.text, "Name of the Process.", "NAME", default=""),
    Option("--receipt-configmap", "TATARA_RECEIPT_CONFIGMAP", flags.text,
           "ConfigMap the receipt is written to.", "NAME", default=""),
    Option("--previous-root", "TATARA_PREVIOUS_ROOT", flags.text,
           "Composed root the receipt chains on (the Process's attestation root); empty: none.", "HEX", default=""),
    Option("--receipt-key", "TATARA_RECEIPT_KEY", flags.text,
           "Key of the receipt in the ConfigMap's data.", "KEY",
           default=flags.field_default(WorkerConfig, "receipt_key")),
    Option("--idempotency-key", "TATARA_IDEMPOTENCY_KEY", flags.text,
           "Sent as Nats-Msg-Id (NATS) and Idempotency-Key (HTTP) so a sink de-duplicates a retry; "
           "empty: none.", "KEY", default=""),
    Option("--log-level", "TATARA_LOG_LEVEL", flags.log_level,
           f"Log level: {', '.join(flags.LOG_LEVELS)}.", "LEVEL",
           default=flags.field_default(WorkerConfig, "log_level")),
)


_REQUIRED: Final = frozenset({"process_namespace", "process_name", "receipt_configmap", "receipt_key"})


def build_parser() -> argparse.ArgumentParser:
    """The ``tatara-export-worker`` argument parser; ``--help`` shows each variable and default."""
    return flags.build_parser(
        _OPTIONS,
        prog="tatara-export-worker",
        description="Ship one export of an ephemeral Process and write its receipt. Each flag falls back to "
                    "its environment variable, then to its default. Exit status: 0 shipped, 1 not shipped "
                    "(the receipt says why) or the receipt could not be written, 2 bad flags.",
        epilog="KUBECONFIG, else the in-cluster service account, configures the API client. Logging also "
               "honours RUST_LOG (a bare level) when neither --log-level nor TATARA_LOG_LEVEL is given.",
    )


def _spec(text: str, source: str) -> ExportSpec:
    try:
        return wire_decoder(ExportSpec).decode(text)
    except msgspec.DecodeError as err:
        raise ConfigError(f"{source}: not an ExportSpec: {err}") from None


def parse_config(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> WorkerConfig:
    """Merge ``argv`` (without the program name), ``environ`` and the defaults.

    Raises:
        ConfigError: an unknown flag, a required value missing, neither or both of ``--spec`` and
            ``--spec-json``, an unreadable spec file, a spec that is not an ExportSpec, or an idempotency key
            that no header can carry.
    """
    values = flags.resolve_all(_OPTIONS, build_parser(), argv, environ or {}, log_level_env="TATARA_LOG_LEVEL")
    for option in _OPTIONS:
        if option.dest in _REQUIRED and not values[option.dest]:
            raise ConfigError(f"{option.flag} (or {option.env}) is required")
    inline, path = values.pop("spec"), values.pop("spec_json")
    if bool(inline) == bool(path):
        raise ConfigError("exactly one of --spec and --spec-json is required")
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"--spec-json: cannot read {path}: {err}") from None
        spec = _spec(text, "--spec-json")
    else:
        spec = _spec(inline, "--spec")
    values["previous_root"] = values["previous_root"] or None
    values["idempotency_key"] = values["idempotency_key"] or None
    if values["idempotency_key"] is not None:
        try:
            idempotency_key_header(values["idempotency_key"])
        except ValueError as err:
            raise ConfigError(f"--idempotency-key: {err}") from None
    return WorkerConfig(spec=spec, **values)


def parse_or_exit(argv: Sequence[str] | None, environ: Mapping[str, str]) -> WorkerConfig:
    """:func:`parse_config`; on bad input print the usage and the error to stderr and exit 2."""
    config: WorkerConfig = flags.parse_or_exit(parse_config, build_parser, argv, environ)
    return config

