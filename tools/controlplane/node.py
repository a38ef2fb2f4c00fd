"""A real node for the local control plane: containerd, runc, the CNI plugins and the kubelet in a sandbox.

(README.md#a-real-node.) The node joins a :class:`~tools.controlplane.cluster.LocalControlPlane` started with
``for_node=True``. Everything of the node runs inside a :class:`~tools.controlplane.sandbox.Sandbox` (private
mount, network and PID namespaces), so nothing collides with another run and nothing is left behind:

- **containerd** v2.2 (built from its Go module, :mod:`tools.controlplane.containerd`) with its state and root
  under this run's directory, runc from Debian, and the CRI plugin's CNI set to a bridge (``cni0``) with
  host-local IPAM on :data:`~tools.controlplane.nodenet.POD_CIDR`, Debian's CNI plugins;
  ``restrict_oom_score_adj`` because the machine lacks ``CAP_SYS_RESOURCE``; the sandbox (pause) image is
  built locally (:mod:`tools.controlplane.images`) and pinned.
- **kubelet** v1.36.3 (built with the control plane) as ``system:node:tatara-node`` with a client certificate,
  ``cgroupDriver: cgroupfs`` and ``failCgroupV1: false`` (the host has cgroup v1), its cgroups under a root
  of this run's own (``/tatara-<pid>-<id>``, removed at stop), serving on the node IP with a certificate from the
  plane's CA, x509 + webhook authentication and webhook authorization (as kubeadm configures it). No DNS
  server runs: ``clusterDNS`` names the node IP, where a query is refused at once (so pods keep the
  ``ClusterFirst`` policy without the kubelet's MissingClusterDNS warning on every pod), and the node's own
  ``resolv.conf`` is empty.
- **the proxy** (:mod:`tools.controlplane.netns_proxy`): the API server and every port in ``forwards`` on the
  host's loopback appear on the node IP, and the API server reaches the kubelet and pods through its egress
  selector. The ``kubernetes`` Service VIP is DNATed to the API server's forward inside the sandbox.

Images reach containerd by ``ctr images import`` of OCI archives (:meth:`LocalNode.import_image`); pods use
them with ``imagePullPolicy: Never`` or ``IfNotPresent``. Start and stop are as careful as the control plane's:
own process groups, death with the parent, SIGTERM then SIGKILL; the sandbox's end kills what is left.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from tools.controlplane.cluster import LocalControlPlane, write_kubeconfig
from tools.controlplane.containerd import built as containerd_built
from tools.controlplane.images import PAUSE_IMAGE, ImageBuilder
from tools.controlplane.nodenet import (
    API_NODE_PORT,
    KUBELET_PORT,
    NODE_CIDR,
    NODE_IP,
    NODE_NAME,
    POD_CIDR,
)
from tools.controlplane.sandbox import Sandbox, SandboxError
from tools.processes import die_with_parent, log_tail, stop_process_group

log = logging.getLogger(__name__)

START_TIMEOUT = 120.0
"""Seconds the node has to become Ready (about 5 s measured on 2 cores, the images built)."""
STOP_GRACE = 20.0
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "tatara-"
"""A node's cgroup root is ``tatara-<pid>-<id>`` (the pid of the process that started it)."""
DIR_PREFIX = "tatara-node-"
"""A node's run folder is ``tatara-node-<pid>-<id>`` in the work dir."""
CNI_BIN_DIR = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")
LIBC_DIR = Path("/usr/lib")
"""Where Debian's libc6-dev puts the static libc (``<multiarch triplet>/libc.a``) the pause binary links."""
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
K8S_NAMESPACE = "k8s.io"
"""containerd's namespace for the CRI's images and containers."""

DEBIAN_PACKAGES = ("runc", "containernetworking-plugins", "iptables", "iproute2", "buildah", "mmdebstrap", "gcc",
                   "libc6-dev")
"""The node's Debian packages (``make debian-deps`` installs them, with the Makefile's list, which a unit test
keeps a superset of this one): the runtime, and the image tools (gcc and libc6-dev for the static pause)."""


class NodeError(RuntimeError):
    """The node could not start, or a node operation failed (the message has the relevant log tail)."""


def missing_debian_packages() -> list[str]:
    """The :data:`DEBIAN_PACKAGES` whose files are not installed."""
    probes = {"runc": RUNC.exists(), "containernetworking-plugins": (CNI_BIN_DIR / "bridge").exists(),
              "iptables": shutil.which("iptables") is not None, "iproute2": shutil.which("ip") is not None,
              "buildah": shutil.which("buildah") is not None, "mmdebstrap": shutil.which("mmdebstrap") is not None,
              "gcc": shutil.which("gcc") is not None, "libc6-dev": any(LIBC_DIR.glob("*/libc.a"))}
    return [pkg for pkg in DEBIAN_PACKAGES if not probes[pkg]]


def cgroup_v1_hierarchies(root: Path = CGROUP_ROOT) -> list[Path]:
    """The cgroup v1 hierarchies mounted under ``root`` (each a mount point holding ``cgroup.procs``; the
    cgroup2 ``unified`` one of a hybrid host left out). Empty on a host with cgroup v2 only."""
    return [p for p in sorted(root.iterdir()) if p.name != "unified" and p.is_dir() and os.path.ismount(p)
            and (p / "cgroup.procs").exists()]


def node_prerequisites(root: Path = CGROUP_ROOT) -> list[str]:
    """What this machine lacks to run the node, in words; empty when it can: root (namespaces, mounts and
    cgroups), the :data:`DEBIAN_PACKAGES`, and cgroup v1 or hybrid (the kubelet runs with ``cgroupfs``; a host
    with cgroup v2 only is not supported yet, README.md#a-real-node)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("root (the node makes namespaces, mounts and cgroups)")
    missing = missing_debian_packages()
    if missing:
        problems.append(f"the Debian packages {' '.join(missing)} (make debian-deps installs them)")
    if not cgroup_v1_hierarchies(root):
        problems.append(f"cgroup v1 or hybrid cgroups (no v1 hierarchy is mounted under {root}; a host with "
                        "cgroup v2 only is not supported yet)")
    return problems


def cni_config() -> dict[str, Any]:
    """The pods' network: one bridge, host-local IPAM on :data:`POD_CIDR`, a default route to the bridge."""
    return {"cniVersion": "1.0.0", "name": "tatara", "plugins": [{
        "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_CIDR}]], "routes": [{"dst": "0.0.0.0/0"}]},
    }]}


def containerd_config(root: Path, cni_conf_dir: Path) -> str:
    """containerd's config (version 3, containerd 2.x): state on the sandbox's tmpfs, root in ``root``,
    runc with cgroupfs, CNI from ``cni_conf_dir``, the local pause image pinned."""
    return f"""version = 3
root = "{root / 'root'}"
state = "/run/containerd"
imports = []
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "{CONTAINERD_SOCKET}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{root / 'opt'}"

[plugins."io.containerd.image-verifier.v1.bindir"]
  bin_dir = "{root / 'image-verifier'}"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_selinux = false
  enable_cdi = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{CNI_BIN_DIR}"]
    conf_dir = "{cni_conf_dir}"
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        SystemdCgroup = false
"""


def kubelet_config(ca_file: Path, tls: tuple[Path, Path], cgroup_root: str, resolv_conf: Path) -> dict[str, Any]:
    """The kubelet's ``KubeletConfiguration`` (kubelet.config.k8s.io/v1beta1); see the module docstring."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": NODE_IP, "port": KUBELET_PORT, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
        "tlsCertFile": str(tls[0]), "tlsPrivateKeyFile": str(tls[1]),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(ca_file)}},
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs", "cgroupRoot": cgroup_root, "failCgroupV1": False, "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        "resolvConf": str(resolv_conf), "clusterDomain": "cluster.local", "clusterDNS": [NODE_IP],
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False, "rotateCertificates": False, "serverTLSBootstrap": False,
        "syncFrequency": "10s", "fileCheckFrequency": "10s", "nodeStatusUpdateFrequency": "5s",
        "protectKernelDefaults": False, "localStorageCapacityIsolation": False,
        "shutdownGracePeriod": "0s", "maxPods": 110,
    }


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path


@dataclass
class LocalNode:
    """One node (containerd + kubelet in a sandbox) joined to ``plane``; see the module docstring.

    Args:
        plane: a started control plane with ``for_node=True``.
        forwards: ports of services on the host's 127.0.0.1 that pods reach at ``NODE_IP`` on the same port
            (NATS, the HTTP receiver).
        work_dir: parent of this run's directory (default: the system temp dir).
        log_dir: where the node's logs (kubelet, containerd, proxy, the pods') are copied when it stops (None:
            they go with the run's directory).
    """

    plane: LocalControlPlane
    forwards: Sequence[int] = ()
    work_dir: Path | None = None
    log_dir: Path | None = None
    dir: Path = field(default=Path())
    sandbox: Sandbox | None = None
    _daemons: list[_Daemon] = field(default_factory=list)
    _cgroup: str = ""
    _images: ImageBuilder = field(default_factory=ImageBuilder.default)
    _ctr_path: Path = field(default=Path())

    # -- public --------------------------------------------------------------------

    @property
    def name(self) -> str:
        return NODE_NAME

    @property
    def ip(self) -> str:
        return NODE_IP

    @property
    def cgroup(self) -> str:
        """The name of this node's cgroup root (``tatara-<pid>-<id>``, in every cgroup v1 hierarchy); empty when
        stopped."""
        return self._cgroup

    def start(self) -> LocalNode:
        """Build what is missing, start the sandbox, proxy, containerd and kubelet; wait for the Node to be Ready.

        Raises:
            NodeError: a Debian package is missing, or a component exited or did not get ready in time.
            tools.controlplane.build.BuildError, tools.controlplane.images.ImageError: a build failed.
        """
        if not self.plane.for_node:
            raise NodeError("the control plane was not started with for_node=True")
        problems = node_prerequisites()
        if problems:
            raise NodeError(f"the node needs {'; '.join(problems)}")
        containerd = containerd_built()
        containerd.ensure_built()
        kubelet = self.plane.toolchain.ensure_built() / "kubelet"
        pause = self._images.pause_binary()
        pause_image = self._images.pause()
        parent = Path(self.work_dir or tempfile.gettempdir())
        _remove_stale_dirs(parent)
        self.dir = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=parent))
        try:
            self.sandbox = Sandbox(self.dir / "sandbox", pause)
            try:
                self.sandbox.start()
            except SandboxError as err:
                raise NodeError(str(err)) from err
            self._start_proxy()
            self._make_cgroup_root()
            self._start_containerd(containerd.binary.parent)
            self.import_image(pause_image)
            self._start_kubelet(kubelet)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the kubelet, containerd and the proxy (SIGTERM, then SIGKILL), keep their logs and the pods' logs
        in ``log_dir`` (when given), end the sandbox (and with it every container), remove the cgroups and this
        run's directory."""
        for daemon in reversed(self._daemons):
            stop_process_group(daemon.proc, STOP_GRACE)
        self._daemons.clear()
        self._keep_logs()
        if self.sandbox is not None:
            self.sandbox.stop()
            self.sandbox = None
        self._remove_cgroup_root()
        if self.dir != Path() and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = Path()

    def _keep_logs(self) -> None:
        if self.log_dir is None or self.dir == Path():
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.dir.glob("*.log")):
            with contextlib.suppress(OSError):
                shutil.copyfile(path, self.log_dir / path.name)
        if self.sandbox is not None and self.sandbox.holder_pid:
            with contextlib.suppress(OSError):
                shutil.copytree(self.sandbox.path("/var/log/pods"), self.log_dir / "pods", dirs_exist_ok=True)

    def __enter__(self) -> LocalNode:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def import_image(self, archive: Path) -> None:
        """Import an OCI archive into containerd's CRI namespace (the image keeps the name it was pushed with).

        Raises:
            NodeError: ``ctr`` failed.
        """
        self._ctr("images", "import", "--no-unpack=false", str(archive), timeout=300)

    def restart_containerd(self) -> None:
        """SIGTERM containerd and start it again with the same config (running containers stay, as on a
        real node: their shims outlive containerd); wait until it answers."""
        daemon = self._daemon("containerd")
        stop_process_group(daemon.proc, STOP_GRACE)
        self._daemons.remove(daemon)
        self._start_containerd(containerd_built().binary.parent)

    def tasks(self) -> dict[str, tuple[int, str]]:
        """containerd's tasks (the running containers and pod sandboxes): ``{container ID: (pid, status)}``.

        Raises:
            NodeError: ``ctr`` failed.
        """
        out = {}
        for line in self._ctr("tasks", "list").splitlines()[1:]:
            fields = line.split()
            if len(fields) >= 3 and fields[1].isdigit():
                out[fields[0]] = (int(fields[1]), fields[2])
        return out

    def kill_container(self, container_id: str) -> None:
        """SIGKILL a container's processes (``containerd://<id>`` or ``<id>``), as an OOM kill or a crash would;
        the kubelet restarts it under the pod's restartPolicy.

        Raises:
            NodeError: ``ctr`` failed (no such container).
        """
        cid = container_id.removeprefix("containerd://")
        self._ctr("tasks", "kill", "--signal", "SIGKILL", cid)

    # -- internals -------------------------------------------------------------------

    def _daemon(self, name: str) -> _Daemon:
        for daemon in self._daemons:
            if daemon.name == name:
                return daemon
        raise NodeError(f"{name} is not running")

    def _launch(self, name: str, proc: subprocess.Popen[bytes]) -> _Daemon:
        daemon = _Daemon(name, proc, self.dir / f"{name}.log")
        self._daemons.append(daemon)
        return daemon

    def _wait(self, daemon: _Daemon, ready: Callable[[], bool], timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if daemon.proc.poll() is not None:
                raise NodeError(f"{daemon.name} exited with {daemon.proc.returncode}:\n{log_tail(daemon.log_path)}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise NodeError(f"{daemon.name} not ready after {timeout:.0f} s:\n{log_tail(daemon.log_path)}")
            time.sleep(0.1)

    def _start_proxy(self) -> None:
        assert self.sandbox is not None
        forwards = [f"{NODE_IP}:{API_NODE_PORT}=127.0.0.1:{self.plane.api_port}",
                    *(f"{NODE_IP}:{port}=127.0.0.1:{port}" for port in self.forwards)]
        log_path = self.dir / "proxy.log"
        with open(log_path, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "tools.controlplane.netns_proxy", f"--netns={self.sandbox.netns}",
                 *(f"--forward={f}" for f in forwards), f"--connect-socket={self.plane.egress_socket}",
                 f"--allow={NODE_CIDR}", f"--allow={POD_CIDR}"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=die_with_parent(), cwd=Path(__file__).resolve().parents[2])
        daemon = self._launch("proxy", proc)
        self._wait(daemon, lambda: "ready" in log_tail(log_path).splitlines(), timeout=30)

    def _make_cgroup_root(self) -> None:
        """``/tatara-<pid>-<id>`` in every cgroup v1 hierarchy, cpuset's copied from its parent (a new cpuset cgroup
        starts empty and takes no task)."""
        _remove_stale_cgroups()
        self._cgroup = f"{CGROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:6]}"
        for hierarchy in _hierarchies():
            path = hierarchy / self._cgroup
            path.mkdir(exist_ok=True)
            if hierarchy.name == "cpuset":
                for key in ("cpuset.cpus", "cpuset.mems"):
                    (path / key).write_text((hierarchy / key).read_text())

    def _remove_cgroup_root(self) -> None:
        if self._cgroup:
            _remove_cgroup_tree(self._cgroup)
        self._cgroup = ""

    def _start_containerd(self, bin_dir: Path) -> None:
        assert self.sandbox is not None
        root = self.dir / "containerd"
        cni = self.dir / "cni"
        cni.mkdir(exist_ok=True)
        (cni / "10-tatara.conflist").write_text(json.dumps(cni_config(), indent=2))
        config = self.dir / "containerd.toml"
        config.write_text(containerd_config(root, cni))
        env = {"PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"}
        proc = self.sandbox.popen([str(bin_dir / "containerd"), f"--config={config}", "--log-level=warn"],
                                  self.dir / "containerd.log", env=env)
        daemon = self._launch("containerd", proc)
        self._ctr_path = bin_dir / "ctr"
        self._wait(daemon, self._containerd_answers, timeout=60)

    def _containerd_answers(self) -> bool:
        try:
            self._ctr("version", timeout=5)
        except NodeError:
            return False
        return True

    def _ctr(self, *args: str, timeout: float = 60) -> str:
        assert self.sandbox is not None
        socket = self.sandbox.path(CONTAINERD_SOCKET)
        try:
            proc = subprocess.run([str(self._ctr_path), f"--address={socket}", f"--namespace={K8S_NAMESPACE}", *args],
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as err:
            raise NodeError(f"ctr {' '.join(args)} did not answer within {timeout:.0f} s") from err
        if proc.returncode != 0:
            raise NodeError(f"ctr {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
        return proc.stdout

    def _start_kubelet(self, kubelet: Path) -> None:
        assert self.sandbox is not None
        d = self.dir / "kubelet"
        d.mkdir()
        client_cert, client_key = self.plane.issue_client(f"system:node:{NODE_NAME}", ("system:nodes",)).write(
            d, "client")
        tls = self.plane.issue_server([NODE_IP, NODE_NAME]).write(d, "serving")
        kubeconfig = d / "kubeconfig"
        write_kubeconfig(kubeconfig, f"https://{NODE_IP}:{API_NODE_PORT}", self.plane.ca_file,
                         f"system:node:{NODE_NAME}", client_cert, client_key)
        resolv = d / "resolv.conf"
        resolv.write_text("")
        config = d / "config.yaml"
        config.write_text(yaml.safe_dump(kubelet_config(self.plane.ca_file, tls, f"/{self._cgroup}", resolv)))
        proc = self.sandbox.popen([str(kubelet), f"--config={config}", f"--kubeconfig={kubeconfig}",
                                   f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}", "--v=1"],
                                  self.dir / "kubelet.log",
                                  env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})
        self._launch("kubelet", proc)

    def _wait_ready(self) -> None:
        ctx = ssl.create_default_context(cafile=str(self.plane.ca_file))
        ctx.load_cert_chain(str(self.plane.dir / "admin.crt"), str(self.plane.dir / "admin.key"))
        url = f"{self.plane.server}/api/v1/nodes/{NODE_NAME}"

        def ready() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                    node = json.loads(resp.read())
            except (urllib.error.URLError, OSError, ValueError):
                return False
            return any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (node.get("status") or {}).get("conditions") or [])

        self._wait(self._daemon("kubelet"), ready)


def _remove_cgroup_tree(name: str, root: Path = CGROUP_ROOT) -> None:
    """Remove ``/<name>`` and everything under it from every hierarchy, the cgroup2 ``unified`` one too (runc
    makes its cgroups there as well on a hybrid host); a cgroup that still holds a task stays, with a warning."""
    for hierarchy in _hierarchies(root, unified=True):
        top = hierarchy / name
        if not top.exists():
            continue
        for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                path.rmdir()
        try:
            top.rmdir()
        except OSError as err:
            log.warning("cgroup %s not removed: %s", top, err)


def owner_gone(name: str, prefix: str) -> bool:
    """Whether ``name`` (``<prefix><pid>-<id>``) belongs to a process that no longer runs."""
    pid = name.removeprefix(prefix).split("-", 1)[0]
    return name.startswith(prefix) and pid.isdigit() and not Path(f"/proc/{pid}").exists()


def _remove_stale_cgroups(root: Path = CGROUP_ROOT) -> None:
    """Remove the cgroup roots of nodes whose process is gone (``tatara-<pid>-<id>``: a run killed before it
    could clean up). Those of running nodes, in this process or another, are left alone."""
    stale = {p.name for h in _hierarchies(root, unified=True) for p in h.glob(f"{CGROUP_PREFIX}*-*")
             if owner_gone(p.name, CGROUP_PREFIX)}
    for name in sorted(stale):
        _remove_cgroup_tree(name, root)


def _remove_stale_dirs(parent: Path) -> None:
    """Remove the run folders (``tatara-node-<pid>-<id>``: containerd's unpacked images among them) of nodes
    whose process is gone; nothing of theirs is mounted any more (their sandbox ended with them)."""
    for path in parent.glob(f"{DIR_PREFIX}*-*"):
        if path.is_dir() and owner_gone(path.name, DIR_PREFIX):
            shutil.rmtree(path, ignore_errors=True)


def _hierarchies(root: Path = CGROUP_ROOT, *, unified: bool = False) -> Iterator[Path]:
    """The cgroup v1 hierarchies mounted under ``root``, and with ``unified`` the cgroup2 one of a hybrid
    host."""
    yield from cgroup_v1_hierarchies(root)
    if unified and (root / "unified" / "cgroup.procs").exists():
        yield root / "unified"
