"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager).

Built from the published Go modules on first use and cached by version
(:mod:`tools.controlplane.build`); started on loopback with generated certificates and
RBAC on (:mod:`tools.controlplane.cluster`). Used by the tests and by ``tatara local``.
"""

from tools.controlplane.build import BuildError, Toolchain
from tools.controlplane.cluster import ControlPlaneError, LocalControlPlane, running

__all__ = ["BuildError", "ControlPlaneError", "LocalControlPlane", "Toolchain", "running"]
