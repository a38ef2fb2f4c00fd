"""Build ``kubeconform`` from its published Go module, pinned, into ``<cache>/kubeconform/<version>/kubeconform``.

The examples are checked with the real validator (kubeconform README, "Usage" and
"CustomResourceDefinition (CRD) Support"), built the way helm is (:mod:`tools.controlplane.goinstall`):
``go install github.com/yannh/kubeconform/cmd/kubeconform@<version>`` (the kubeconform README,
"Installation": "With a specific version tag"). Upstream's release flags are copied from its
``.goreleaser.yml``: ``-trimpath``, ``-tags=netgo`` and the version stamp ``-X main.version=<version>``
(what ``kubeconform -v`` prints).

Usage: ``python -m tools.controlplane.kubeconform`` (or ``python -m tools.kubeconform_bin``) builds it
if missing and prints its path.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tools.controlplane.build import default_cache_dir, print_built
from tools.controlplane.goinstall import GoInstalled

KUBECONFORM_VERSION = "v0.8.0"
"""Pinned ``github.com/yannh/kubeconform`` release (Go module proxy; go line 1.26)."""


@dataclass(frozen=True)
class Kubeconform(GoInstalled):
    """Where the ``kubeconform`` binary of one pinned version lives."""

    module = "github.com/yannh/kubeconform"
    command = "kubeconform"
    tags = ("netgo",)

    version: str = KUBECONFORM_VERSION

    @classmethod
    def default(cls) -> Kubeconform:
        return cls(default_cache_dir() / "kubeconform" / KUBECONFORM_VERSION)

    def ldflags(self, upstream_go_mod: str = "") -> str:
        """Upstream's release ldflags (``.goreleaser.yml``: the ``main.version`` stamp), stripped."""
        return f"-s -w -X main.version={self.version}"


def main() -> int:
    """Build kubeconform if missing, print its path; exit 1 with the reason when the build fails."""
    tool = Kubeconform.default()
    return print_built(tool.command, tool.version, tool.ensure_built, cached=tool.is_built())


if __name__ == "__main__":
    sys.exit(main())
