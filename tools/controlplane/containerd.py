"""Build containerd (the node's container runtime) from its published Go module.

Debian bookworm packages containerd 1.6, which kubelet v1.36 only talks to through its fallback path and
which is end-of-life, so containerd **v2.2.9** is compiled like the Flux controllers
(:mod:`tools.controlplane.flux`, README.md#a-real-node): one wrapper module, ``go get -tool`` of
``cmd/containerd``, ``cmd/ctr`` and ``cmd/containerd-shim-runc-v2``, ``CGO_ENABLED=0`` and the build tags
that leave out the snapshotters needing C libraries (``no_btrfs no_devmapper no_zfs no_aufs``; the node
uses overlayfs). Upstream's version ldflags (its ``Makefile``'s ``GO_LDFLAGS``) stamp the version.

Cached under ``<cache>/containerd/containerd-v2.2.9/bin/``. ``python -m tools.controlplane.containerd``
builds what is missing and prints the binaries' folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tools.controlplane.build import default_cache_dir, print_built
from tools.controlplane.flux import Built, GoComponent

_PKG = "github.com/containerd/containerd/v2"
CONTAINERD_VERSION = "v2.2.9"
"""Pinned containerd release (served by the Go module proxy; go line 1.25.0, so it builds with Go 1.26)."""

CONTAINERD = GoComponent(
    "containerd", _PKG, CONTAINERD_VERSION, f"{_PKG}/cmd/containerd",
    ldflags=(f"-X {_PKG}/version.Version={CONTAINERD_VERSION}", f"-X {_PKG}/version.Package={_PKG}"),
    tags=("no_btrfs", "no_devmapper", "no_zfs", "no_aufs"),
    also=(("ctr", f"{_PKG}/cmd/ctr"), ("containerd-shim-runc-v2", f"{_PKG}/cmd/containerd-shim-runc-v2")),
)


def built() -> Built:
    """Where the containerd binaries are cached (they may not be built yet)."""
    return Built(CONTAINERD, default_cache_dir() / "containerd" / f"containerd-{CONTAINERD_VERSION}")


def main() -> int:
    """Build what is missing and print the ``bin`` folder; exit 1 with the reason when the build fails."""
    target = built()

    def ensure() -> Path:
        target.ensure_built()
        return target.binary.parent

    return print_built("containerd", CONTAINERD_VERSION, ensure, cached=target.is_built())


if __name__ == "__main__":
    sys.exit(main())
