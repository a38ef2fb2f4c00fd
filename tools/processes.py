"""Starting and stopping the subprocesses the local tooling starts, each in its own session (process group), and
what its loopback servers (NATS, Jaeger) share."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

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


def answers_ok(url: str) -> bool:
    """True when a GET of ``url`` answers 200 within 2 s (a loopback server's readiness probe)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError):
        return False


@dataclass
class LoopbackServer:
    """What the loopback servers (NATS, Jaeger) share: a temp folder made on first use, the server's log in it,
    the process, and the stop (SIGTERM, SIGKILL after :attr:`STOP_GRACE`, the folder removed); a context
    manager around the subclass's ``start``."""

    TEMP_PREFIX: ClassVar[str] = "tatara-server-"
    LOG_NAME: ClassVar[str] = "server.log"
    STOP_GRACE: ClassVar[float] = 10.0
    """Seconds between SIGTERM and SIGKILL on stop."""

    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _tmp: Path | None = field(default=None, init=False)

    @property
    def log_path(self) -> Path:
        """The server's log file (stdout and stderr)."""
        return self._work_dir() / self.LOG_NAME

    def _work_dir(self) -> Path:
        if self._tmp is None:
            self._tmp = Path(tempfile.mkdtemp(prefix=self.TEMP_PREFIX))
        return self._tmp

    def start(self) -> Self:
        raise NotImplementedError

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the server's log."""
        return log_tail(self.log_path, lines)

    def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after :attr:`STOP_GRACE`) and remove its temp folder."""
        if self.process is not None:
            stop_process_groups([self.process], self.STOP_GRACE)
            self.process = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
