"""``tatara up --fast --flux=standin --exit-when-settled`` as a real subprocess: its own control plane, both
reconcilers as subprocesses (no node), the Flux stand-in, every example (the compiled Lisp matrix too) reaching
the state it declares, and nothing left running. The default, on the local node with real Flux:
tests/e2e/node_up/test_up.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tools.controlplane.cluster import free_port

ROOT = Path(__file__).resolve().parents[2]
EXPECTED_PHASES = {
    ("Process", "podinfo"): "Attested",
    ("Process", "family"): "Attested",
    ("Process", "family-web"): "Attested",
    ("Process", "family-worker"): "Attested",
    ("Process", "scratch"): "Gone after Attested",
    ("Process", "release-train"): "Gone after Attested",
    ("EphemeralPool", "warm"): "Steady",
    ("EphemeralAllocation", "ci-run-1"): "Bound",
    ("Process", "closed-loop-attest"): "Running",
    ("Process", "observability-stack"): "Forking",
    # examples/lisp/echo-sweep.lisp, compiled as `tatara compile` does: four ephemeral environments,
    # one at a time (maxConcurrent 1), each attested (its CEL postcondition held), then torn down
    **{("Process", f"echo-sweep-version-{v}-replicas-{r}"): "Gone after Attested"
       for v in ("0-5-4", "0-5-5") for r in (1, 3)},
}
"""What each example's ``examples.tatara.pleme.io/expect`` annotation says, read independently of tatara up."""


def test_up_fast_with_the_flux_standin_brings_every_example_to_its_expected_state_and_stops_cleanly() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    ports = free_port(), free_port()
    nats_port, receiver_port, jaeger_port = free_port(), free_port(), free_port()
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "up", "--fast", "--flux=standin", "--exit-when-settled", "--timeout", "240",
         "--reconciler-port", str(ports[0]), "--pool-port", str(ports[1]),
         "--nats-port", str(nats_port), "--receiver-port", str(receiver_port), "--jaeger-port", str(jaeger_port)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "Flux STAND-IN running (--flux=standin): no real Flux runs" in result.stdout
    assert "Job runner STAND-IN running: no kubelet locally" in result.stdout
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("SUMMARY ")]
    summary = json.loads(line.removeprefix("SUMMARY "))
    assert summary["settled"] is True
    phases = {(e["kind"], e["name"]): e["phase"] for e in summary["examples"]}
    assert phases == EXPECTED_PHASES
    pids = {e["name"]: e["pid"] for e in summary["examples"]}
    assert pids["family-web"].startswith(pids["family"] + ".")
    assert pids["family-worker"].startswith(pids["family"] + ".")
    assert summary["metrics"] == {"tatara-reconciler": f"http://127.0.0.1:{ports[0]}/metrics",
                                  "tatara-pool-reconciler": f"http://127.0.0.1:{ports[1]}/metrics"}
    assert (summary["exports"]["nats"], summary["exports"]["receiver"]) == (
        f"nats://127.0.0.1:{nats_port}", f"http://127.0.0.1:{receiver_port}")
    assert set(summary["exports"]["stream_messages"]) == {"TATARA_RECEIPTS"}
    # examples/ephemeral-exports.yaml: three exports, each a Job run by the stand-in, each receipt Shipped
    jobs = {j["name"]: (j["state"], j["receipt"]) for j in summary["exports"]["jobs"]}
    assert jobs == {f"release-train-export-{i}": ("Complete", "Shipped") for i in range(3)}
    assert summary["exports"]["http_requests"] == 1
    assert summary["exports"]["stream_messages"] == {"TATARA_RECEIPTS": 1}
    # a real Jaeger received the spans of both reconcilers and of the export Jobs the stand-in ran
    assert summary["traces"]["query"] == f"http://127.0.0.1:{jaeger_port}"
    assert {"tatara-reconciler", "tatara-pool-reconciler", "tatara-export-worker"} <= set(
        summary["traces"]["services"]), summary["traces"]
    assert f"curl -s http://127.0.0.1:{jaeger_port}/api/services" in result.stdout
    # Everything it started is gone: the plane's directory is removed with it.
    assert not Path(summary["kubeconfig"]).exists()
    flags = [f"--health-addr=127.0.0.1:{port}" for port in ports]
    assert not [cmd for cmd in _cmdlines() if any(flag in cmd for flag in flags)], "a reconciler outlived up"


def _cmdlines() -> list[str]:
    out = []
    for proc in Path("/proc").iterdir():
        try:
            out.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return out
