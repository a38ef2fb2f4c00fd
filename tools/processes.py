"""Stopping the subprocesses the local tooling starts, each in its own session (process group)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from contextlib import suppress


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
