"""``tatara up`` with real Flux that cannot be built says so, exits 1 and leaves nothing running (``--fast``: the
failure is Flux's, the node plays no part). ``make run`` as a user gets it, on the node with real Flux:
tests/e2e/node_up/test_up.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_up import ROOT
from tools.controlplane.build import Toolchain
from tools.controlplane.cluster import free_port


def processes_mentioning(text: str) -> list[str]:
    """Command lines of the running processes whose command line or environment contains ``text``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if text in cmdline or text in environ:
            found.append(cmdline)
    return found


def test_up_that_cannot_build_real_flux_says_so_and_exits_1_leaving_nothing(tmp_path: Path) -> None:
    # a cache holding the control plane (symlinked) but no Flux, and no `go` on PATH to build it with
    cache = tmp_path / "cache"
    cache.mkdir()
    plane_cache = Toolchain.default().root.parent
    Toolchain.default().ensure_built()  # the plane itself must start (built first on a clean machine)
    (cache / plane_cache.name).symlink_to(plane_cache)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and not (Path(p) / "go").exists())
    env = {**{k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, "TATARA_CACHE_DIR": str(cache), "PATH": path}
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "up", "--fast", "--exit-when-settled", "--timeout", "60",
         "--reconciler-port", str(free_port()), "--pool-port", str(free_port()),
         "--nats-port", str(free_port()), "--receiver-port", str(free_port()), "--tracing=off"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "tatara: real Flux did not start: `go` is not on PATH" in result.stderr
    assert "--flux=standin" in result.stderr
    assert "Traceback" not in result.stderr
    (server,) = [line.rsplit(": ", 1)[1] for line in result.stdout.splitlines()
                 if line.startswith("local control plane ready")]
    # the plane it started is stopped again: no process serves on its port
    assert not processes_mentioning(f"--secure-port={server.rsplit(':', 1)[1]}")
    assert not list(cache.glob("flux/*/bin/*"))
