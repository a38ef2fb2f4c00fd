"""Build ``kstatus-judge``, a small Go program over ``sigs.k8s.io/cli-utils`` ``pkg/kstatus/status``, pinned,
into ``<cache>/kstatus/<version>-<source hash>/kstatus-judge``, and run it.

kstatus is the library Flux, kpt and cli-utils' ``kapply`` use to call an object Current, InProgress or
Failed; a Process, pool, allocation or table must read the same to it as to ``kubectl wait
--for=condition=Ready`` (docs/behaviour.md#conditions). The judge is built the way kubeconform is
(:mod:`tools.controlplane.kubeconform`):

- a wrapper module generated in the cache folder: ``tools/controlplane/kstatus_judge/main.go`` and a
  go.mod requiring cli-utils at :data:`CLI_UTILS_VERSION` from the Go module proxy; ``go mod tidy``
  completes the graph with minimal version selection from cli-utils' own go.mod, so the versions are
  those upstream pins;
- ``-trimpath``, ``GOTOOLCHAIN=local``, ``CGO_ENABLED=0`` (:func:`tools.controlplane.build.run_go`);
- written under a ``.partial`` name and renamed, under a file lock
  (:func:`tools.controlplane.build.build_once`), so concurrent test runs build it once. The folder name
  carries a hash of main.go, so an edited judge is rebuilt.

The judge reads objects (a YAML stream, JSON documents, or Lists) on stdin and prints one JSON line per
object: ``{"kind", "namespace", "name", "status", "message"}``, ``status`` being kstatus's
(``InProgress``, ``Failed``, ``Current``, ``Terminating``, ``NotFound``, ``Unknown``).

Usage: ``python -m tools.controlplane.kstatus`` builds it if missing and prints its path.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from tools.controlplane.build import CachedBinary, default_cache_dir, print_built, run_go

log = logging.getLogger(__name__)

CLI_UTILS_VERSION = "v0.37.2"
"""Pinned ``sigs.k8s.io/cli-utils`` release (Go module proxy)."""

SOURCE = Path(__file__).resolve().parent / "kstatus_judge" / "main.go"
"""The judge's Go source."""

_MODULE = "sigs.k8s.io/cli-utils"


class Verdict(msgspec.Struct, frozen=True):
    """kstatus's answer for one object."""

    kind: str
    namespace: str
    name: str
    status: str
    """``InProgress``, ``Failed``, ``Current``, ``Terminating``, ``NotFound`` or ``Unknown``."""
    message: str


_VERDICT = msgspec.json.Decoder(Verdict)


class JudgeError(RuntimeError):
    """The judge refused its input (an object it cannot decode, or kstatus returned an error)."""


@dataclass(frozen=True)
class KstatusJudge:
    """The ``kstatus-judge`` of one pinned cli-utils version (and one main.go), in folder ``root``."""

    root: Path
    version: str = CLI_UTILS_VERSION

    @classmethod
    def default(cls) -> KstatusJudge:
        digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
        return cls(default_cache_dir() / "kstatus" / f"{CLI_UTILS_VERSION}-{digest}")

    def ensure_built(self) -> Path:
        """The judge's path, built first when missing (:class:`~tools.controlplane.build.CachedBinary`).

        Raises:
            BuildError: ``go`` is not installed or a ``go`` command failed.
        """
        return CachedBinary(self.root / "kstatus-judge", self._build).ensure()

    def _build(self) -> None:
        started = time.monotonic()
        module = self.root / "module"
        shutil.rmtree(module, ignore_errors=True)
        module.mkdir(parents=True)
        shutil.copyfile(SOURCE, module / "main.go")
        (module / "go.mod").write_text(
            f"module tatara.local/kstatus-judge\n\ngo 1.26\n\nrequire {_MODULE} {self.version}\n")
        env: dict[str, str | None] = {"GOFLAGS": None}
        run_go("mod", "tidy", cwd=module, purpose="kstatus-judge", env=env)
        partial = self.root / "kstatus-judge.partial"
        run_go("build", "-trimpath", "-ldflags=-s -w", "-o", str(partial), ".", cwd=module,
               purpose="kstatus-judge", env=env)
        partial.replace(self.root / "kstatus-judge")
        log.info("built kstatus-judge (cli-utils %s) in %.0f s", self.version, time.monotonic() - started)

    def judge(self, objects: list[dict[str, Any]], *, timeout: float = 60.0) -> list[Verdict]:
        """kstatus's verdict on each of ``objects``, in order.

        Raises:
            BuildError: the judge could not be built.
            JudgeError: the judge refused the input (the message is its stderr).
        """
        binary = self.ensure_built()
        stdin = b"".join(json.dumps(o).encode() + b"\n" for o in objects)
        done = subprocess.run([str(binary)], input=stdin, capture_output=True, check=False, timeout=timeout)
        if done.returncode != 0:
            raise JudgeError(done.stderr.decode(errors="replace").strip())
        return [_VERDICT.decode(line) for line in done.stdout.splitlines() if line.strip()]


def main() -> int:
    """Build the judge if missing, print its path; exit 1 with the reason when the build fails."""
    judge = KstatusJudge.default()
    return print_built("kstatus-judge", f"(cli-utils {judge.version})", judge.ensure_built,
                       cached=(judge.root / "kstatus-judge").exists())


if __name__ == "__main__":
    sys.exit(main())
