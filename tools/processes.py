"""Stopping the subprocesses the local tooling starts, each in its own session (process group)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path


def stop_process_groups(procs: Sequence[subprocess.Popen[bytes]], grace: float) -> None:
    """SIGTERM the process group of each process still running, then wait for each up to ``grace`` seconds;
    SIGKILL the group of any still running after that. The processes must have been started with
    ``start_new_session=True`` (their PID is their group)."""
    for proc in procs:
        if proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of the log file ``path`` (empty when it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
