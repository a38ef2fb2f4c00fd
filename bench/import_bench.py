"""Start cost of each binary: the wall time and peak RSS of a fresh interpreter that imports the binary's
module, against the same interpreter doing nothing (``python -c pass``, the limit) in the same run.

Each contender runs ``--rounds`` times, alternating, in a fresh ``python -c`` (no import cache shared); the
median wall time and the largest peak RSS (``ru_maxrss`` of the child) are printed, with the number of modules
loaded. No control plane.

    .venv/bin/python -m bench.import_bench [--rounds 7] [--tree OTHER_CHECKOUT] [--bytecode]

``--bytecode`` imports from compiled bytecode, as the image does (its build runs ``compileall``): the children
write and read a private ``PYTHONPYCACHEPREFIX``, filled by one unmeasured import of each module first. Without
it the children inherit ``PYTHONDONTWRITEBYTECODE`` when it is set, and compile every module at every start.

Goal (tracker issue 27): ``import reconciler.app`` in ≤ 0.3 s on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

MODULES = {
    "python -c pass (the limit)": "",
    "tatara-reconciler (reconciler.main)": "reconciler.main",
    "tatara-pool-reconciler (pool_reconciler.main)": "pool_reconciler.main",
    "tatara-export-worker (export_worker.main)": "export_worker.main",
}

GOAL_SECONDS = 0.3
"""``import reconciler.app`` on a quiet machine (tracker issue 27)."""

PROBE = "import sys{imp}; print(len(sys.modules))"


@dataclass
class Result:
    seconds: list[float] = field(default_factory=list)
    rss_kib: int = 0
    modules: int = 0


def run_once(module: str, tree: str | None = None, env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """(wall seconds, peak RSS KiB, modules loaded) of one fresh interpreter importing ``module`` (environment
    ``env``, default this one's)."""
    code = PROBE.format(imp=f"; import {module}" if module else "")
    start = time.perf_counter()
    # ``-c`` puts the working folder first on sys.path: ``tree`` (another checkout) is what gets imported
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=tree, env=env)
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)  # the child's own rusage: its peak RSS
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stdout.close()
    if child.returncode != 0:
        raise SystemExit(f"importing {module} failed")
    return wall, usage.ru_maxrss, int(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tree", help="import the binaries from this checkout (e.g. /work/main) instead")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--bytecode", action="store_true", help="import compiled bytecode, as the image does")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="import-bench-pyc-") as pycache:
        env = None
        if args.bytecode:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env["PYTHONPYCACHEPREFIX"] = pycache
            for module in MODULES.values():
                run_once(module, args.tree, env)  # compiles into the prefix; not measured
        return report(args, measure(args.rounds, args.tree, env))


def measure(rounds: int, tree: str | None, env: dict[str, str] | None) -> dict[str, Result]:
    results = {name: Result() for name in MODULES}
    for _ in range(rounds):
        for name, module in MODULES.items():
            wall, rss, modules = run_once(module, tree, env)
            results[name].seconds.append(wall)
            results[name].rss_kib = max(results[name].rss_kib, rss)
            results[name].modules = modules
    return results


def report(args: argparse.Namespace, results: dict[str, Result]) -> int:
    load = os.getloadavg()[0]
    limit = statistics.median(results["python -c pass (the limit)"].seconds)
    if args.json:
        print(json.dumps({name: {"median_s": statistics.median(r.seconds), "rss_mib": r.rss_kib / 1024,
                                 "modules": r.modules} for name, r in results.items()}))
        return 0
    compiled = "from bytecode" if args.bytecode else "from source" if os.environ.get("PYTHONDONTWRITEBYTECODE") \
        else "bytecode as Python caches it"
    print(f"{args.rounds} rounds, alternating, {compiled}; load average {load:.2f}; "
          f"goal reconciler ≤ {GOAL_SECONDS} s (quiet)")
    print(f"{'binary':48} {'median s':>9} {'min s':>7} {'over limit s':>13} {'peak RSS MiB':>13} {'modules':>8}")
    for name, r in results.items():
        median = statistics.median(r.seconds)
        print(f"{name:48} {median:9.3f} {min(r.seconds):7.3f} {median - limit:13.3f} {r.rss_kib / 1024:13.1f} "
              f"{r.modules:8d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
