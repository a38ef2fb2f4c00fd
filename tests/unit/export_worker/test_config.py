"""export_worker/config.py: the reference's command line, environment fallbacks, and bad input (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from export_worker.config import ConfigError, parse_config
from shared.domain.api.export import ChannelKind

SPEC = '{"source":{"runMarker":{}},"channel":{"stdout":{}}}'
ARGS = ["--spec", SPEC, "--process-namespace", "ns", "--process-name", "p", "--receipt-configmap", "p-export-0-receipt"]
ROOT = Path(__file__).resolve().parents[3]


def test_the_jobs_arguments_parse_with_the_defaults() -> None:
    config = parse_config(ARGS, {})
    assert (config.process_namespace, config.process_name, config.receipt_configmap) == ("ns", "p",
                                                                                         "p-export-0-receipt")
    assert config.spec.channel.kind() is ChannelKind.STDOUT
    assert (config.previous_root, config.receipt_key, config.log_level) == (None, "receipt.yaml", "info")
    assert config.idempotency_key is None, "the reference's Jobs pass none: nothing is sent"


def test_the_idempotency_key_from_the_flag_or_the_environment() -> None:
    key = "tatara-export/u-1/3/0"
    assert parse_config([*ARGS, "--idempotency-key", key], {}).idempotency_key == key
    assert parse_config(ARGS, {"TATARA_IDEMPOTENCY_KEY": key}).idempotency_key == key
    assert parse_config([*ARGS, "--idempotency-key", ""], {}).idempotency_key is None


def test_previous_root_and_receipt_key_from_flags_or_environment() -> None:
    config = parse_config([*ARGS, "--previous-root", "ab" * 32], {"TATARA_RECEIPT_KEY": "export.yaml"})
    assert (config.previous_root, config.receipt_key) == ("ab" * 32, "export.yaml")
    assert parse_config([*ARGS, "--receipt-key", "r.yaml"], {"TATARA_RECEIPT_KEY": "e.yaml"}).receipt_key == "r.yaml"


def test_everything_but_the_spec_can_come_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(SPEC)
    config = parse_config(["--spec-json", str(path)], {"TATARA_PROCESS_NAMESPACE": "ns", "TATARA_PROCESS_NAME": "p",
                                                         "TATARA_RECEIPT_CONFIGMAP": "cm", "RUST_LOG": "debug"})
    assert (config.process_namespace, config.process_name, config.receipt_configmap, config.log_level) == (
        "ns", "p", "cm", "debug")


@pytest.mark.parametrize(("argv", "message"), [
    (ARGS[2:], "exactly one of --spec and --spec-json is required"),
    ([*ARGS, "--spec-json", "/nonexistent"], "exactly one of --spec and --spec-json is required"),
    (["--spec", SPEC, "--process-name", "p", "--receipt-configmap", "c"], "--process-namespace (or "
                                                                           "TATARA_PROCESS_NAMESPACE) is required"),
    (["--spec", "{", *ARGS[2:]], "--spec: not an ExportSpec"),
    (["--spec", '{"source":{}}', *ARGS[2:]], "--spec: not an ExportSpec: Object missing required field `channel`"),
    (["--spec-json", "/nonexistent", *ARGS[2:]], "--spec-json: cannot read /nonexistent"),
    ([*ARGS, "--receipt-key", ""], "--receipt-key (or TATARA_RECEIPT_KEY) is required"),
    ([*ARGS, "--bogus", "1"], "unrecognized arguments: --bogus"),
    ([*ARGS, "--idempotency-key", "a\nb"], "--idempotency-key: idempotency key 'a\\nb' holds a character outside"),
], ids=["no spec", "two specs", "no namespace", "a spec that is not JSON", "a spec without a channel",
        "an unreadable spec file", "an empty receipt key", "an unknown flag",
        "a key no header can carry"])
def test_bad_input_names_what_is_wrong(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(argv, {})
    assert message in str(caught.value)


def test_the_binary_exits_2_on_a_bad_flag_and_writes_nothing_to_stdout() -> None:
    proc = subprocess.run([sys.executable, "-m", "export_worker.main", "--spec", "{", *ARGS[2:]], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "tatara-export-worker: error: --spec: not an ExportSpec" in proc.stderr
