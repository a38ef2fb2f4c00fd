"""Build ``helm`` from its published Go module, pinned, into ``<cache>/helm/<version>/helm``.

Helm is not packaged for this platform either, so the chart tests build it the way the local
control plane is built (:mod:`tools.controlplane.build`, README.md#local-control-plane):

- ``helm.sh/helm/v3``'s go.mod has no ``replace``/``exclude`` directives, so no wrapper module is
  needed: ``go install helm.sh/helm/v3/cmd/helm@<version>`` builds it with exactly upstream's
  dependency graph (MVS over the module's own requirements);
- upstream's release ldflags are copied from its Makefile: the version stamp
  (``internal/version.*``) and the Kubernetes version that ``helm template``/``helm lint`` assume
  without a cluster (``pkg/chartutil`` and ``pkg/lint/rules`` ``k8sVersionMajor/Minor``, derived
  from the ``k8s.io/client-go`` requirement, as upstream's Makefile does);
- ``GOTOOLCHAIN=local`` and ``CGO_ENABLED=0``: a requirement on a newer Go fails loudly.

The binary is written next to a ``.partial`` name and renamed, under a file lock, so concurrent
test runs build it once. Go's module and build caches make a rebuild after ``make clean`` fast.

Usage: ``python -m tools.controlplane.helm`` (or ``python -m tools.helm_bin``) builds it if
missing and prints its path.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tools.controlplane.build import BuildError, build_once, default_cache_dir, run_go

log = logging.getLogger(__name__)

HELM_VERSION = "v3.22.0"
"""Pinned ``helm.sh/helm/v3`` release (Go module proxy; go line 1.26.0, client-go v0.37.0)."""

_MODULE = "helm.sh/helm/v3"
_CLIENT_GO = re.compile(r"^\s*(?:require\s+)?k8s\.io/client-go\s+v0\.(\d+)\.\d+", re.M)


@dataclass(frozen=True)
class Helm:
    """Where the ``helm`` binary of one pinned version lives."""

    root: Path
    version: str = HELM_VERSION

    @classmethod
    def default(cls) -> Helm:
        return cls(default_cache_dir() / "helm" / HELM_VERSION)

    @property
    def binary(self) -> Path:
        return self.root / "helm"

    def is_built(self) -> bool:
        return os.access(self.binary, os.X_OK)

    def ensure_built(self) -> Path:
        """Build the binary if missing and return its path.

        Raises:
            BuildError: ``go`` is not installed or a ``go`` command failed.
        """
        build_once(self.root, self.is_built, self._build)
        return self.binary

    def ldflags(self, upstream_go_mod: str) -> str:
        """Upstream's release ldflags for this version, given ``helm.sh/helm/v3``'s own go.mod text.

        Raises:
            BuildError: the go.mod does not require ``k8s.io/client-go`` (format changed).
        """
        match = _CLIENT_GO.search(upstream_go_mod)
        if match is None:
            raise BuildError(f"{_MODULE}@{self.version} go.mod does not require k8s.io/client-go")
        k8s_minor = match.group(1)
        flags = [
            "-s", "-w",
            f"-X {_MODULE}/internal/version.version={self.version}",
            f"-X {_MODULE}/internal/version.gitTreeState=clean",
        ]
        for pkg in ("pkg/lint/rules", "pkg/chartutil"):
            flags += [f"-X {_MODULE}/{pkg}.k8sVersionMajor=1", f"-X {_MODULE}/{pkg}.k8sVersionMinor={k8s_minor}"]
        return " ".join(flags)

    def _go(self, *args: str, env: dict[str, str] | None = None) -> str:
        return run_go(*args, cwd=self.root, purpose="helm", env={"GOFLAGS": None, **(env or {})})

    def _build(self) -> None:
        started = time.monotonic()
        info = json.loads(self._go("mod", "download", "-json", f"{_MODULE}@{self.version}"))
        upstream = Path(info["GoMod"]).read_text()
        if re.search(r"^\s*(replace|exclude)\b", upstream, re.M):
            raise BuildError(f"{_MODULE}@{self.version} go.mod has replace/exclude directives; "
                             "`go install` refuses it (build it through a wrapper module instead)")
        partial = self.root / "bin.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        self._go("install", "-trimpath", f"-ldflags={self.ldflags(upstream)}",
                 f"{_MODULE}/cmd/helm@{self.version}", env={"GOBIN": str(partial)})
        (partial / "helm").replace(self.binary)
        shutil.rmtree(partial, ignore_errors=True)
        log.info("built helm %s in %.0f s", self.version, time.monotonic() - started)


def main() -> int:
    """Build helm if missing, print its path; exit 1 with the reason when the build fails."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    helm = Helm.default()
    started = time.monotonic()
    cached = helm.is_built()
    try:
        path = helm.ensure_built()
    except BuildError as err:
        print(f"helm: {err}", file=sys.stderr)
        return 1
    note = "cached" if cached else f"built in {time.monotonic() - started:.0f} s"
    print(f"helm {helm.version} ({note}): {path}", file=sys.stderr)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
