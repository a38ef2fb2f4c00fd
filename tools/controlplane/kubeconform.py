"""Build ``kubeconform`` from its published Go module, pinned, into ``<cache>/kubeconform/<version>/kubeconform``.

The examples are checked with the real validator (kubeconform README, "Usage" and
"CustomResourceDefinition (CRD) Support"), built the way helm is (:mod:`tools.controlplane.helm`):

- ``github.com/yannh/kubeconform``'s go.mod has no ``replace``/``exclude`` directives, so
  ``go install github.com/yannh/kubeconform/cmd/kubeconform@<version>`` builds it with exactly
  upstream's dependency graph (the kubeconform README, "Installation": "With a specific version tag");
- upstream's release flags are copied from its ``.goreleaser.yml``: ``-trimpath``, ``-tags=netgo``
  and the version stamp ``-X main.version=<version>`` (what ``kubeconform -v`` prints);
- ``GOTOOLCHAIN=local`` and ``CGO_ENABLED=0`` (:func:`tools.controlplane.build.run_go`): a requirement
  on a newer Go fails loudly.

The binary is written under a ``.partial`` folder and renamed, under a file lock
(:func:`tools.controlplane.build.build_once`), so concurrent test runs build it once.

Usage: ``python -m tools.controlplane.kubeconform`` (or ``python -m tools.kubeconform_bin``) builds it
if missing and prints its path.
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

KUBECONFORM_VERSION = "v0.8.0"
"""Pinned ``github.com/yannh/kubeconform`` release (Go module proxy; go line 1.26)."""

_MODULE = "github.com/yannh/kubeconform"


@dataclass(frozen=True)
class Kubeconform:
    """Where the ``kubeconform`` binary of one pinned version lives."""

    root: Path
    version: str = KUBECONFORM_VERSION

    @classmethod
    def default(cls) -> Kubeconform:
        return cls(default_cache_dir() / "kubeconform" / KUBECONFORM_VERSION)

    @property
    def binary(self) -> Path:
        return self.root / "kubeconform"

    def is_built(self) -> bool:
        return os.access(self.binary, os.X_OK)

    def ensure_built(self) -> Path:
        """Build the binary if missing and return its path.

        Raises:
            BuildError: ``go`` is not installed or a ``go`` command failed.
        """
        build_once(self.root, self.is_built, self._build)
        return self.binary

    def ldflags(self) -> str:
        """Upstream's release ldflags (``.goreleaser.yml``: the ``main.version`` stamp), stripped."""
        return f"-s -w -X main.version={self.version}"

    def _go(self, *args: str, env: dict[str, str] | None = None) -> str:
        return run_go(*args, cwd=self.root, purpose="kubeconform", env={"GOFLAGS": None, **(env or {})})

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
        self._go("install", "-trimpath", "-tags=netgo", f"-ldflags={self.ldflags()}",
                 f"{_MODULE}/cmd/kubeconform@{self.version}", env={"GOBIN": str(partial)})
        (partial / "kubeconform").replace(self.binary)
        shutil.rmtree(partial, ignore_errors=True)
        log.info("built kubeconform %s in %.0f s", self.version, time.monotonic() - started)


def main() -> int:
    """Build kubeconform if missing, print its path; exit 1 with the reason when the build fails."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    kubeconform = Kubeconform.default()
    started = time.monotonic()
    cached = kubeconform.is_built()
    try:
        path = kubeconform.ensure_built()
    except BuildError as err:
        print(f"kubeconform: {err}", file=sys.stderr)
        return 1
    note = "cached" if cached else f"built in {time.monotonic() - started:.0f} s"
    print(f"kubeconform {kubeconform.version} ({note}): {path}", file=sys.stderr)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
