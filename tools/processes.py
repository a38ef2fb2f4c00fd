"""Starting and stopping the subprocesses the local tooling starts, each in its own session (process group)."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
try:
    _prctl: Callable[..., int] | None = ctypes.CDLL("libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None
"""Resolved once here: loading a library in the child between fork and exec can deadlock a threaded parent."""


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


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


def stop_process_group(proc: subprocess.Popen[bytes], grace: float, *, killed_wait: float = 10.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session=True``) and wait until no process
    of the group is left, SIGKILLing the group after ``grace`` seconds; a group still there ``killed_wait``
    seconds after the SIGKILL (a process stuck in the kernel) is given up on, with a warning.

    Unlike :func:`stop_process_groups` this waits for the whole group, not just ``proc``: ``nsenter`` (the
    node's components, tools/controlplane/sandbox.py) exits at once when signalled, before the command it
    started has finished stopping."""
    pgid = proc.pid
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline, killed_at = time.monotonic() + grace, 0.0
    while True:
        proc.poll()
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        now = time.monotonic()
        if not killed_at and now > deadline:
            with suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            killed_at = now
        elif killed_at and now > killed_at + killed_wait:
            log.warning("process group %d still there %.0f s after SIGKILL; giving up on it", pgid, killed_wait)
            break
        time.sleep(0.05)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(1)


def log_tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of the log file ``path`` (empty when it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def start_server(argv: Sequence[str], log_path: Path) -> subprocess.Popen[bytes]:
    """Start a loopback server ``argv`` in its own session, dying with us, stdout and stderr appended to
    ``log_path``."""
    with open(log_path, "ab") as out:
        return subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=die_with_parent())


def wait_until_ready(proc: subprocess.Popen[bytes], ready: Callable[[], bool], *, timeout: float,
                     failed: Callable[[str], Exception], stop: Callable[[], None]) -> None:
    """Poll ``ready()`` until it holds; ``failed(why)`` is raised when ``proc`` exits first, or (after
    ``stop()``) when ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise failed(f"exited with {proc.returncode}")
        if time.monotonic() > deadline:
            stop()
            raise failed(f"not ready after {timeout:.0f} s")
        time.sleep(0.05)


def serve_until_signalled(running: Callable[[], bool]) -> None:
    """The standalone ``python -m tools.<server>``: return on SIGTERM, Ctrl-C, or once ``running()`` is False."""
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    try:
        while not stop and running():
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
