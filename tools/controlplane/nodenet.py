"""The addresses of the local node's private network (README.md#a-real-node).

Every address here exists only inside the network namespace the node tooling creates
(:mod:`tools.controlplane.sandbox`); the host's own network is never configured. The control plane, the
export sinks and the tests stay on the host's loopback and are reached through
:mod:`tools.controlplane.netns_proxy`.
"""

from __future__ import annotations

from typing import Final

NODE_NAME: Final = "tatara-node"
"""The Node object's name (kubelet ``--hostname-override``)."""

NODE_IP: Final = "10.250.0.1"
"""The node's InternalIP, on the bridge ``tatara0`` inside the namespace; the kubelet serves on it, and the
forwards to the host's loopback services listen on it."""

NODE_CIDR: Final = "10.250.0.0/24"
"""The subnet of :data:`NODE_IP`."""

NODE_BRIDGE: Final = "tatara0"

POD_CIDR: Final = "10.244.0.0/24"
"""The pods' subnet: the CNI bridge ``cni0`` (gateway ``10.244.0.1``) with host-local IPAM."""

SERVICE_CIDR: Final = "10.0.0.0/24"
"""kube-apiserver's ``--service-cluster-ip-range``."""

SERVICE_VIP: Final = "10.0.0.1"
"""The ``kubernetes`` Service's ClusterIP (the first address of :data:`SERVICE_CIDR`): what pods see as
``KUBERNETES_SERVICE_HOST``. No kube-proxy runs; the namespace DNATs ``SERVICE_VIP:443`` to the API server's
forward on :data:`NODE_IP` (:data:`API_NODE_PORT`)."""

API_NODE_PORT: Final = 6443
"""Port on :data:`NODE_IP` that forwards to kube-apiserver on the host's loopback."""

KUBELET_PORT: Final = 10250

API_SERVER_SANS: Final = ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                          "kubernetes.default.svc.cluster.local", SERVICE_VIP, NODE_IP)
"""Extra names of the API server's serving certificate, so in-cluster clients (which dial
``https://10.0.0.1:443``) and the kubelet (``https://10.250.0.1:6443``) verify it."""
