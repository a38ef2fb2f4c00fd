"""A pinned command built with ``go install <module>/cmd/<command>@<version>`` into
``<cache>/<command>/<version>/<command>``: how helm and kubeconform are built (README.md#local-control-plane).

- The module's go.mod must have no ``replace``/``exclude`` directives: ``go install pkg@version`` then builds
  it with exactly upstream's dependency graph (MVS over the module's own requirements), and refuses it
  otherwise, so that is checked first with a clear error;
- ``GOTOOLCHAIN=local`` and ``CGO_ENABLED=0`` (:func:`tools.controlplane.build.run_go`): a requirement on a
  newer Go fails loudly;
- the binary is written under a ``bin.partial`` folder and renamed, under a file lock
  (:func:`tools.controlplane.build.build_once`), so concurrent test runs build it once. Go's module and build
  caches make a rebuild after ``make clean`` fast.

Each command supplies its module, its build tags and upstream's release ldflags.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tools.controlplane.build import BuildError, build_once, run_go

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GoInstalled:
    """Where the binary of one pinned version of :attr:`command` lives, and how it is built."""

    module: ClassVar[str]
    """The Go module, e.g. ``helm.sh/helm/v3``; the command is ``<module>/cmd/<command>``."""
    command: ClassVar[str]
    """The binary's name."""
    tags: ClassVar[tuple[str, ...]] = ()
    """Go build tags of upstream's release build."""

    root: Path
    version: str

    @property
    def binary(self) -> Path:
        return self.root / self.command

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
        """Upstream's release ldflags for this version, given the module's own go.mod text."""
        raise NotImplementedError

    def _go(self, *args: str, env: dict[str, str] | None = None) -> str:
        return run_go(*args, cwd=self.root, purpose=self.command, env={"GOFLAGS": None, **(env or {})})

    def _build(self) -> None:
        started = time.monotonic()
        info = json.loads(self._go("mod", "download", "-json", f"{self.module}@{self.version}"))
        upstream = Path(info["GoMod"]).read_text()
        if re.search(r"^\s*(replace|exclude)\b", upstream, re.M):
            raise BuildError(f"{self.module}@{self.version} go.mod has replace/exclude directives; "
                             "`go install` refuses it (build it through a wrapper module instead)")
        partial = self.root / "bin.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        tags = [f"-tags={','.join(self.tags)}"] if self.tags else []
        self._go("install", "-trimpath", *tags, f"-ldflags={self.ldflags(upstream)}",
                 f"{self.module}/cmd/{self.command}@{self.version}", env={"GOBIN": str(partial)})
        (partial / self.command).replace(self.binary)
        shutil.rmtree(partial, ignore_errors=True)
        log.info("built %s %s in %.0f s", self.command, self.version, time.monotonic() - started)
