"""The node's configuration files: containerd's TOML (version 3, state on the sandbox's tmpfs, runc with cgroupfs,
the CNI folders, the pinned local pause image), the kubelet's KubeletConfiguration, the pods' CNI network; and
which Debian packages the node reports missing."""

from __future__ import annotations

import ipaddress
import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.controlplane import node
from tools.controlplane.images import PAUSE_IMAGE
from tools.controlplane.node import (
    cni_config,
    containerd_config,
    kubelet_config,
    missing_debian_packages,
)
from tools.controlplane.nodenet import KUBELET_PORT, NODE_CIDR, NODE_IP, POD_CIDR

SOCKET = "/run/containerd/containerd.sock"
"""containerd's default gRPC socket, on the sandbox's /run tmpfs."""

CRI_RUNTIME = "io.containerd.cri.v1.runtime"
CRI_IMAGES = "io.containerd.cri.v1.images"


@pytest.fixture
def containerd(tmp_path: Path) -> dict[str, Any]:
    return tomllib.loads(containerd_config(tmp_path / "containerd", tmp_path / "cni"))


@pytest.fixture
def kubelet(tmp_path: Path) -> dict[str, Any]:
    return kubelet_config(tmp_path / "ca.crt", (tmp_path / "serving.crt", tmp_path / "serving.key"),
                          "/tatara-0123abcd", tmp_path / "resolv.conf")


# -- containerd ----------------------------------------------------------------------------------------------


def test_containerd_config_is_version_3_with_state_on_the_sandboxs_run(containerd: dict[str, Any]) -> None:
    assert containerd["version"] == 3  # containerd 2.x's schema; version 2 would be migrated with warnings
    assert containerd["state"] == "/run/containerd"
    assert containerd["grpc"]["address"] == SOCKET
    assert containerd["imports"] == []  # nothing from the host's /etc/containerd
    assert "io.containerd.nri.v1.nri" in containerd["disabled_plugins"]


def test_everything_containerd_keeps_is_under_this_runs_root(tmp_path: Path, containerd: dict[str, Any]) -> None:
    root = tmp_path / "containerd"
    plugins = containerd["plugins"]
    kept = [containerd["root"], plugins["io.containerd.internal.v1.opt"]["path"],
            plugins["io.containerd.image-verifier.v1.bindir"]["bin_dir"]]
    assert len(set(kept)) == len(kept)
    for path in kept:
        assert Path(path).is_relative_to(root), path


def test_the_cri_runs_runc_with_cgroupfs_and_restricted_oom_score_adj(containerd: dict[str, Any]) -> None:
    runtime = containerd["plugins"][CRI_RUNTIME]
    assert runtime["restrict_oom_score_adj"] is True  # no CAP_SYS_RESOURCE on the machine
    default = runtime["containerd"]["default_runtime_name"]
    runc = runtime["containerd"]["runtimes"][default]
    assert default == "runc"
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["BinaryName"] == "/usr/sbin/runc"  # Debian's runc
    assert runc["options"]["SystemdCgroup"] is False  # the kubelet's cgroupDriver is cgroupfs


def test_the_cri_reads_the_cni_config_from_the_given_folder_and_debians_plugins(
        tmp_path: Path, containerd: dict[str, Any]) -> None:
    cni = containerd["plugins"][CRI_RUNTIME]["cni"]
    assert cni["conf_dir"] == str(tmp_path / "cni")
    assert cni["bin_dirs"] == ["/usr/lib/cni"]  # containernetworking-plugins installs them there on Debian


def test_the_local_pause_image_is_the_pinned_sandbox_image(containerd: dict[str, Any]) -> None:
    images = containerd["plugins"][CRI_IMAGES]
    assert images["pinned_images"]["sandbox"] == PAUSE_IMAGE
    assert images["snapshotter"] == "overlayfs"  # the build leaves every other snapshotter out


# -- kubelet -------------------------------------------------------------------------------------------------


def test_kubelet_config_kind(kubelet: dict[str, Any]) -> None:
    assert (kubelet["apiVersion"], kubelet["kind"]) == ("kubelet.config.k8s.io/v1beta1", "KubeletConfiguration")


def test_the_kubelet_uses_cgroupfs_on_cgroup_v1_under_the_given_root(kubelet: dict[str, Any]) -> None:
    assert kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["failCgroupV1"] is False
    assert kubelet["cgroupRoot"] == "/tatara-0123abcd"


def test_the_kubelet_serves_on_the_node_ip_with_its_certificate(tmp_path: Path, kubelet: dict[str, Any]) -> None:
    assert kubelet["address"] == NODE_IP
    assert ipaddress.IPv4Address(kubelet["address"]) in ipaddress.IPv4Network(NODE_CIDR)
    assert kubelet["port"] == KUBELET_PORT == 10250
    assert kubelet["readOnlyPort"] == 0  # no unauthenticated port
    assert kubelet["tlsCertFile"] == str(tmp_path / "serving.crt")
    assert kubelet["tlsPrivateKeyFile"] == str(tmp_path / "serving.key")


def test_the_kubelet_authenticates_by_x509_and_webhook_and_authorizes_by_webhook(
        tmp_path: Path, kubelet: dict[str, Any]) -> None:
    authn = kubelet["authentication"]
    assert authn["anonymous"]["enabled"] is False
    assert authn["webhook"]["enabled"] is True
    assert authn["x509"]["clientCAFile"] == str(tmp_path / "ca.crt")
    assert kubelet["authorization"]["mode"] == "Webhook"


def test_the_kubelet_talks_to_containerds_socket(containerd: dict[str, Any], kubelet: dict[str, Any]) -> None:
    assert kubelet["containerRuntimeEndpoint"] == f"unix://{containerd['grpc']['address']}"


def test_the_kubelets_dns_is_the_node_ip_and_its_resolv_conf_the_given_file(
        tmp_path: Path, kubelet: dict[str, Any]) -> None:
    assert kubelet["clusterDNS"] == [NODE_IP]
    assert kubelet["resolvConf"] == str(tmp_path / "resolv.conf")
    assert kubelet["clusterDomain"] == "cluster.local"


def test_the_kubelet_config_is_plain_yaml(kubelet: dict[str, Any]) -> None:
    # the node writes it with yaml.safe_dump, which refuses anything but plain types (a Path, say)
    assert yaml.safe_load(yaml.safe_dump(kubelet)) == kubelet


# -- CNI -----------------------------------------------------------------------------------------------------


def test_the_pods_network_is_one_bridge_with_host_local_ipam_on_the_pod_cidr() -> None:
    config = cni_config()
    assert config["cniVersion"] == "1.0.0"
    (plugin,) = config["plugins"]
    assert plugin["type"] == "bridge"
    assert plugin["bridge"] == "cni0"
    assert plugin["isGateway"] is True  # the bridge holds the pods' gateway, so the node routes them
    assert plugin["ipMasq"] is False  # nothing leaves the sandbox to masquerade to
    ipam = plugin["ipam"]
    assert ipam["type"] == "host-local"
    assert ipam["ranges"] == [[{"subnet": POD_CIDR}]]
    assert ipam["routes"] == [{"dst": "0.0.0.0/0"}]
    assert json.loads(json.dumps(config)) == config  # written as JSON


# -- missing Debian packages ---------------------------------------------------------------------------------


TOOLS = {"iptables", "buildah", "mmdebstrap", "ip", "gcc"}
FILES = {"runc", "bridge", "libc.a"}


@pytest.mark.parametrize(
    ("on_path", "files", "expected"),
    [
        (TOOLS, FILES, []),
        (set(), set(), ["runc", "containernetworking-plugins", "iptables", "iproute2", "buildah", "mmdebstrap",
                        "gcc", "libc6-dev"]),
        (TOOLS, FILES - {"runc"}, ["runc"]),
        (TOOLS, FILES - {"bridge"}, ["containernetworking-plugins"]),
        (TOOLS - {"buildah", "ip"}, FILES, ["iproute2", "buildah"]),
        (TOOLS - {"gcc"}, FILES - {"libc.a"}, ["gcc", "libc6-dev"]),
    ],
    ids=["everything installed", "nothing installed", "no runc", "no CNI plugins",
         "no buildah and no ip (iproute2)", "no compiler for pause"],
)
def test_missing_debian_packages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, on_path: set[str],
                                 files: set[str], expected: list[str]) -> None:
    cni = tmp_path / "cni"
    cni.mkdir()
    if "bridge" in files:
        (cni / "bridge").touch()
    runc = tmp_path / "runc"
    if "runc" in files:
        runc.touch()
    libc = tmp_path / "lib"
    (libc / "x86_64-linux-gnu").mkdir(parents=True)
    if "libc.a" in files:
        (libc / "x86_64-linux-gnu" / "libc.a").touch()
    monkeypatch.setattr(node, "RUNC", runc)
    monkeypatch.setattr(node, "CNI_BIN_DIR", cni)
    monkeypatch.setattr(node, "LIBC_DIR", libc)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}" if name in on_path else None)
    assert missing_debian_packages() == expected


# -- cgroups: the hierarchies, stale roots of killed runs --------------------------------------------------


def _cgroup_tree(root: Path, hierarchies: list[str]) -> None:
    for name in hierarchies:
        (root / name).mkdir(parents=True)
        (root / name / "cgroup.procs").touch()


def test_only_mounted_v1_hierarchies_count(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _cgroup_tree(tmp_path, ["cpu", "memory", "unified", "not-mounted"])
    mounted = {tmp_path / "cpu", tmp_path / "memory", tmp_path / "unified"}
    monkeypatch.setattr(node.os.path, "ismount", lambda p: Path(p) in mounted)
    assert node.cgroup_v1_hierarchies(tmp_path) == [tmp_path / "cpu", tmp_path / "memory"]


def test_a_cgroup_v2_only_host_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # cgroup v2 alone: /sys/fs/cgroup is the one mount; systemd's slices below it are no hierarchies
    _cgroup_tree(tmp_path, ["init.scope", "system.slice", "user.slice"])
    monkeypatch.setattr(node.os.path, "ismount", lambda p: Path(p) == tmp_path)
    monkeypatch.setattr(node, "missing_debian_packages", lambda: [])
    monkeypatch.setattr(node.os, "geteuid", lambda: 0)
    assert node.cgroup_v1_hierarchies(tmp_path) == []
    (problem,) = node.node_prerequisites(tmp_path)
    assert "cgroup v2 only is not supported" in problem


@pytest.mark.parametrize(
    ("name", "prefix", "alive", "gone"),
    [("tatara-123-abcdef", "tatara-", {123}, False),
     ("tatara-123-abcdef", "tatara-", set(), True),
     ("tatara-node-77-x1", "tatara-node-", set(), True),
     ("tatara-cfda498d", "tatara-", set(), False),  # an old-style name holds no PID: left alone
     ("other-123-abc", "tatara-", set(), False)],
    ids=["its run is alive", "its run is gone", "a run folder", "no pid in the name", "not ours"],
)
def test_owner_gone(monkeypatch: pytest.MonkeyPatch, name: str, prefix: str, alive: set[int], gone: bool) -> None:
    real = Path.exists
    monkeypatch.setattr(Path, "exists", lambda p: (int(p.name) in alive) if str(p).startswith("/proc/")
                        and p.name.isdigit() else real(p))
    assert node.owner_gone(name, prefix) is gone


def test_stale_cgroup_roots_are_removed_and_live_ones_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _cgroup_tree(tmp_path, ["cpu", "memory", "unified"])
    monkeypatch.setattr(node.os.path, "ismount", lambda p: Path(p).parent == tmp_path)
    for hierarchy in ("cpu", "memory", "unified"):
        (tmp_path / hierarchy / "tatara-111-dead00" / "kubepods" / "besteffort").mkdir(parents=True)
        (tmp_path / hierarchy / "tatara-222-live00" / "kubepods").mkdir(parents=True)
    monkeypatch.setattr(node, "owner_gone", lambda name, prefix: "-111-" in name)
    node._remove_stale_cgroups(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/tatara-*"))
    assert left == ["cpu/tatara-222-live00", "memory/tatara-222-live00", "unified/tatara-222-live00"]


def test_the_makefile_installs_every_package_the_node_needs() -> None:
    makefile = (Path(__file__).resolve().parents[4] / "Makefile").read_text()
    (line,) = [line for line in makefile.splitlines() if line.startswith("NODE_PACKAGES :=")]
    assert set(node.DEBIAN_PACKAGES) <= set(line.split(":=", 1)[1].split())
