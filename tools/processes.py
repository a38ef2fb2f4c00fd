"""Starting and stopping the subprocesses the local tooling starts, each in its own session (process group)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when this process dies (``PR_SET_PDEATHSIG``), or None
    off the main thread: the kernel ties the signal to the *thread* that forked, so a child forked from a
    worker thread (anyio's, which ends after 10 s idle) would be killed when that thread ends. Callers off the
    main thread rely on stopping the child themselves."""
    return _die_with_parent if threading.current_thread() is threading.main_thread() else None


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
