"""Build ``helm`` from its published Go module, pinned, into ``<cache>/helm/<version>/helm``.

Helm is not packaged for this platform either, so the chart tests build it the way the local
control plane is built (:mod:`tools.controlplane.build`, README.md#local-control-plane), with
``go install helm.sh/helm/v3/cmd/helm@<version>`` (:mod:`tools.controlplane.goinstall`: its go.mod
has no ``replace``/``exclude`` directives). Upstream's release ldflags are copied from its Makefile:
the version stamp (``internal/version.*``) and the Kubernetes version that ``helm template``/``helm
lint`` assume without a cluster (``pkg/chartutil`` and ``pkg/lint/rules`` ``k8sVersionMajor/Minor``,
derived from the ``k8s.io/client-go`` requirement, as upstream's Makefile does).

Usage: ``python -m tools.controlplane.helm`` (or ``python -m tools.helm_bin``) builds it if
missing and prints its path.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from tools.controlplane.build import BuildError, default_cache_dir, print_built
from tools.controlplane.goinstall import GoInstalled

HELM_VERSION = "v3.22.0"
"""Pinned ``helm.sh/helm/v3`` release (Go module proxy; go line 1.26.0, client-go v0.37.0)."""

_CLIENT_GO = re.compile(r"^\s*(?:require\s+)?k8s\.io/client-go\s+v0\.(\d+)\.\d+", re.M)


@dataclass(frozen=True)
class Helm(GoInstalled):
    """Where the ``helm`` binary of one pinned version lives."""

    module = "helm.sh/helm/v3"
    command = "helm"

    version: str = HELM_VERSION

    @classmethod
    def default(cls) -> Helm:
        return cls(default_cache_dir() / "helm" / HELM_VERSION)

    def ldflags(self, upstream_go_mod: str) -> str:
        """Upstream's release ldflags for this version, given ``helm.sh/helm/v3``'s own go.mod text.

        Raises:
            BuildError: the go.mod does not require ``k8s.io/client-go`` (format changed).
        """
        match = _CLIENT_GO.search(upstream_go_mod)
        if match is None:
            raise BuildError(f"{self.module}@{self.version} go.mod does not require k8s.io/client-go")
        k8s_minor = match.group(1)
        flags = [
            "-s", "-w",
            f"-X {self.module}/internal/version.version={self.version}",
            f"-X {self.module}/internal/version.gitTreeState=clean",
        ]
        for pkg in ("pkg/lint/rules", "pkg/chartutil"):
            flags += [f"-X {self.module}/{pkg}.k8sVersionMajor=1",
                      f"-X {self.module}/{pkg}.k8sVersionMinor={k8s_minor}"]
        return " ".join(flags)


def main() -> int:
    """Build helm if missing, print its path; exit 1 with the reason when the build fails."""
    tool = Helm.default()
    return print_built(tool.command, tool.version, tool.ensure_built, cached=tool.is_built())


if __name__ == "__main__":
    sys.exit(main())
