"""`tatara local` starts a control plane and leaves nothing behind when stopped or killed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tools.controlplane import LocalControlPlane, Toolchain
from tools.controlplane.cluster import STOP_GRACE

BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
Starter = Callable[[], tuple[subprocess.Popen[str], Path]]


def processes_under(directory: Path) -> dict[int, str]:
    """PID → command name of every process whose command line mentions ``directory``."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(str(directory).encode() in arg for arg in argv):
            found[int(entry.name)] = os.path.basename(argv[0].decode(errors="replace"))
    return found


def wait_until(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def start_local(tmp_path: Path) -> Iterator[Callable[[], tuple[subprocess.Popen[str], Path]]]:
    """Starts `tatara local` with its temp dirs under ``tmp_path``; returns it and its kubeconfig path.

    Whatever a failing test leaves behind (the CLI, its components) is killed at teardown.
    """
    started: list[subprocess.Popen[str]] = []

    def start() -> tuple[subprocess.Popen[str], Path]:
        Toolchain.default().ensure_built()
        env = {**os.environ, "TMPDIR": str(tmp_path)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "local"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, env=env,
        )
        started.append(proc)
        assert proc.stdout is not None
        kubeconfig = None
        for line in proc.stdout:
            if match := re.match(r"export KUBECONFIG=(\S+)", line):
                kubeconfig = Path(match.group(1))
                break
        assert kubeconfig is not None, f"`tatara local` exited with {proc.wait()} before becoming ready"
        return proc, kubeconfig

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for pid in processes_under(tmp_path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_ctrl_c_stops_every_component_and_removes_the_temp_dir(start_local: Starter) -> None:
    proc, kubeconfig = start_local()
    plane_dir = kubeconfig.parent
    assert sorted(processes_under(plane_dir).values()) == sorted(BINARIES)

    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 0
    assert processes_under(plane_dir) == {}
    assert not plane_dir.exists()


def test_components_die_with_a_killed_parent(start_local: Starter) -> None:
    proc, kubeconfig = start_local()
    plane_dir = kubeconfig.parent
    assert len(processes_under(plane_dir)) == 3

    proc.kill()
    proc.wait(timeout=10)
    wait_until(lambda: processes_under(plane_dir) == {}, 30, "orphaned components to exit")
    shutil.rmtree(plane_dir, ignore_errors=True)


def test_stop_is_idempotent_and_start_can_follow(tmp_path: Path) -> None:
    plane = LocalControlPlane(controller_manager=False, work_dir=tmp_path)
    plane.stop()  # never started: nothing to do
    with plane:
        first_dir = plane.dir
        assert len(plane.pids()) == 2
    assert not first_dir.exists()
    assert plane.pids() == []
    plane.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM], ids=["SIGTERM from a supervisor"])
def test_sigterm_stops_cleanly_too(start_local: Starter, signum: int) -> None:
    proc, kubeconfig = start_local()
    proc.send_signal(signum)
    # the stop's own worst case: the three components one after another (apiserver before etcd), each SIGKILLed
    # after STOP_GRACE; a busy machine once took longer than a flat 60 s
    assert proc.wait(timeout=3 * STOP_GRACE + 30) == 0
    assert processes_under(kubeconfig.parent) == {}
