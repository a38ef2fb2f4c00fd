"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager).

Built from the published Go modules on first use and cached by version
(:mod:`shared.controlplane.build`); started on loopback with generated certificates and
RBAC on (:mod:`shared.controlplane.cluster`). Used by the tests and by ``tatara local``.
"""

from shared.controlplane.build import BuildError, Toolchain
from shared.controlplane.cluster import ControlPlaneError, LocalControlPlane, running

__all__ = ["BuildError", "ControlPlaneError", "LocalControlPlane", "Toolchain", "running"]
