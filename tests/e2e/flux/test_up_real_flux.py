"""``make run`` as a user gets it: ``tatara up --exit-when-settled`` with real Flux (the default) applies the
examples through the local registry and git server, every example settles as it declares, real ConfigMaps
appear, and nothing is left running (docs/architecture.md#tatara-up)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_up import EXPECTED_PHASES, ROOT
from tools.controlplane.build import Toolchain
from tools.controlplane.cluster import free_port
from tools.controlplane.flux import ensure_all_built


def test_up_with_real_flux_applies_the_examples_and_stops_everything() -> None:
    ensure_all_built()  # built here on a clean machine, so the subprocess's timeout covers only the run
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    ports = free_port(), free_port()
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "up", "--exit-when-settled", "--timeout", "300",
         "--reconciler-port", str(ports[0]), "--pool-port", str(ports[1]),
         "--nats-port", str(free_port()), "--receiver-port", str(free_port())],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-4000:]
    assert "STAND-IN running (--flux=standin)" not in result.stdout
    assert "real Flux running" in result.stdout
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("SUMMARY ")]
    summary = json.loads(line.removeprefix("SUMMARY "))
    assert summary["settled"] is True
    assert {(e["kind"], e["name"]): e["phase"] for e in summary["examples"]} == EXPECTED_PHASES
    applied = set(summary["flux"]["applied"])
    # kustomize-controller applied the git paths of the Processes still alive (tools/up_flux.py names them
    # <process>-<last path segment>); helm-controller installed the pool members' chart (<release>-release)
    assert {"tatara-examples/podinfo-podinfo", "tatara-examples/family-family", "tatara-examples/family-web-web",
            "tatara-examples/family-worker-worker"} <= applied
    assert any(name.endswith("-release") for name in applied), applied
    assert not Path(summary["kubeconfig"]).exists()
    # every Flux process ran with its files under the stack's folder (the registry's config, the controllers'
    # SSL_CERT_FILE): the folder and the processes are gone
    assert not Path(summary["flux"]["dir"]).exists()
    assert not processes_mentioning(summary["flux"]["dir"]), "a Flux process outlived tatara up"


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
        [sys.executable, "-m", "tools.cli", "up", "--exit-when-settled", "--timeout", "60",
         "--reconciler-port", str(free_port()), "--pool-port", str(free_port()),
         "--nats-port", str(free_port()), "--receiver-port", str(free_port())],
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
