"""The node's private addresses agree with each other: the node IP on its subnet, the Service VIP first of the
Service range, no two subnets overlapping, and the API server's certificate naming what in-node clients dial."""

from __future__ import annotations

import ipaddress
import itertools

from tools.controlplane.nodenet import (
    API_SERVER_SANS,
    NODE_CIDR,
    NODE_IP,
    POD_CIDR,
    SERVICE_CIDR,
    SERVICE_VIP,
)


def test_the_node_ip_is_a_host_of_the_node_subnet() -> None:
    assert ipaddress.IPv4Address(NODE_IP) in list(ipaddress.IPv4Network(NODE_CIDR).hosts())


def test_the_service_vip_is_the_first_address_of_the_service_range() -> None:
    # kube-apiserver gives the `kubernetes` Service the first host address of --service-cluster-ip-range
    assert ipaddress.IPv4Address(SERVICE_VIP) == next(ipaddress.IPv4Network(SERVICE_CIDR).hosts())


def test_the_node_pod_and_service_subnets_do_not_overlap() -> None:
    networks = [ipaddress.IPv4Network(cidr) for cidr in (NODE_CIDR, POD_CIDR, SERVICE_CIDR)]
    for a, b in itertools.combinations(networks, 2):
        assert not a.overlaps(b), (a, b)


def test_no_node_subnet_is_loopback_or_public() -> None:
    for cidr in (NODE_CIDR, POD_CIDR, SERVICE_CIDR):
        network = ipaddress.IPv4Network(cidr)
        assert network.is_private, cidr
        assert not network.is_loopback, cidr


def test_the_api_servers_certificate_names_the_vip_the_node_ip_and_the_service_dns_names() -> None:
    assert {SERVICE_VIP, NODE_IP, "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} <= set(
        API_SERVER_SANS)
