"""A private mount, network and PID namespace for the local node (README.md#a-real-node).

containerd, runc, the CNI plugins and the kubelet write to fixed host paths (``/run/containerd``,
``/run/netns``, ``/var/lib/kubelet``, ``/var/lib/cni``, ``/var/log/pods``, ``/var/log/containers`` …) and
configure the network they run in. So that two runs never collide and nothing is left behind, they run in a
sandbox made of fresh namespaces held by one process:

- **mount**: a private namespace (no propagation back to the host) with tmpfs over ``/run`` and ``/var/log``,
  and an overlay over ``/var/lib`` whose upper layer is a tmpfs, so the host's ``/var/lib`` shows through
  unchanged and every write lands in memory, with empty tmpfs over ``/var/lib/kubelet`` and ``/var/lib/cni``
  (a host's own kubelet or CNI state stays hidden);
- **network**: a namespace with only ``lo`` and the bridge :data:`~tools.controlplane.nodenet.NODE_BRIDGE`
  holding the node IP; the pods' CNI bridge comes later; the ``kubernetes`` Service VIP is DNATed to the API
  server's forward (no kube-proxy); there is no default route, so nothing can leave;
- **PID**: the holder is PID 1 of a new PID namespace (Kubernetes's own ``pause``, which reaps orphans and
  exits on SIGTERM). When it ends, the kernel kills every process in the namespace: containerd's shims and
  the containers they started, which would otherwise outlive their parents.

The holder is started by ``unshare --kill-child`` from a process that dies with its parent
(``PR_SET_PDEATHSIG``, so :meth:`Sandbox.start` belongs on the main thread: tools/processes.py), so killing
the test run or ``tatara up`` (even with SIGKILL) tears the sandbox down.
Components join it with ``nsenter`` (:meth:`Sandbox.popen`); the host reads their files under
``/proc/<holder>/root`` (:meth:`Sandbox.path`).

It keeps runs apart from each other and from the host's paths; it is not a security boundary: the node runs
as root, and a pod given a hostPath sees the host's file system.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tools.controlplane.nodenet import API_NODE_PORT, NODE_BRIDGE, NODE_CIDR, NODE_IP, SERVICE_VIP
from tools.processes import die_with_parent, log_tail

log = logging.getLogger(__name__)

START_TIMEOUT = 30.0
"""Seconds the holder has to set the namespaces up."""

HIDDEN = (Path("/run"), Path("/var/log"), Path("/var/lib"))
"""What the sandbox mounts over: its own folder must not be under them (the host could not see it)."""

class SandboxError(RuntimeError):
    """The sandbox could not be set up (the message has the holder's output). The node wraps it in its
    ``NodeError``."""


def setup_script(work: Path, pause: Path, ready: Path) -> str:
    """The holder's shell script: mounts, network, then ``exec pause``.

    ``work`` is a host directory the overlay's tmpfs is mounted on (inside the namespace only); ``ready`` is
    touched once everything is in place.
    """
    upper = work / "varlib"
    node_prefix = NODE_CIDR.split("/")[1]
    dnat = f"-d {SERVICE_VIP}/32 -p tcp --dport 443 -j DNAT --to-destination {NODE_IP}:{API_NODE_PORT}"
    lines = [
        "set -eu",
        "mount -t tmpfs -o mode=0755 tatara-run /run",
        "mount -t tmpfs -o mode=0755 tatara-log /var/log",
        f"mkdir -p {shlex.quote(str(upper))}",
        f"mount -t tmpfs -o mode=0755 tatara-varlib {shlex.quote(str(upper))}",
        f"mkdir {shlex.quote(str(upper / 'upper'))} {shlex.quote(str(upper / 'work'))}",
        "mount -t overlay tatara-varlib-overlay -o "
        + shlex.quote(f"lowerdir=/var/lib,upperdir={upper / 'upper'},workdir={upper / 'work'}") + " /var/lib",
        # the host's own kubelet or CNI state, if it has any, must not show through
        "mkdir -p /var/lib/kubelet /var/lib/cni",
        "mount -t tmpfs -o mode=0700 tatara-kubelet /var/lib/kubelet",
        "mount -t tmpfs -o mode=0755 tatara-cni /var/lib/cni",
        "ip link set lo up",
        f"ip link add {NODE_BRIDGE} type bridge",
        f"ip addr add {NODE_IP}/{node_prefix} dev {NODE_BRIDGE}",
        f"ip link set {NODE_BRIDGE} up",
        f"iptables -w -t nat -A PREROUTING {dnat}",
        f"iptables -w -t nat -A OUTPUT {dnat}",
        f"touch {shlex.quote(str(ready))}",
        f"exec {shlex.quote(str(pause))}",
    ]
    return "\n".join(lines) + "\n"


@dataclass
class Sandbox:
    """The namespaces of one node, held by one process; see the module docstring.

    Args:
        dir: a host directory of this run (the overlay's mount point and the holder's log go there).
        pause: Kubernetes's ``pause`` binary (the holder, PID 1 of the sandbox).
    """

    dir: Path
    pause: Path
    _unshare: subprocess.Popen[bytes] | None = None
    holder_pid: int = 0
    _log: Path = field(default=Path())

    def start(self) -> Sandbox:
        """Create the namespaces and wait until the holder has set them up.

        Raises:
            SandboxError: the holder exited or did not get ready within :data:`START_TIMEOUT`.
        """
        hidden = [p for p in HIDDEN if self.dir.resolve().is_relative_to(p)]
        if hidden:
            raise SandboxError(f"the sandbox's folder {self.dir} is under {hidden[0]}, which the sandbox covers; "
                               "use a work folder elsewhere (e.g. TMPDIR=/tmp)")
        self.dir.mkdir(parents=True, exist_ok=True)
        ready = self.dir / "sandbox.ready"
        self._log = self.dir / "sandbox.log"
        script = setup_script(self.dir, self.pause, ready)
        with open(self._log, "ab") as out:
            self._unshare = subprocess.Popen(
                ["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc", "--propagation", "private",
                 "--kill-child=SIGKILL", "sh", "-c", script],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=die_with_parent())
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not ready.exists():
                if self._unshare.poll() is not None:
                    raise SandboxError(f"the sandbox's holder exited with {self._unshare.returncode}:\n"
                                       f"{log_tail(self._log)}")
                if time.monotonic() > deadline:
                    raise SandboxError(f"the sandbox was not ready after {START_TIMEOUT:.0f} s:\n"
                                       f"{log_tail(self._log)}")
                time.sleep(0.05)
            self.holder_pid = self._child_of(self._unshare.pid)
        except BaseException:
            self.stop()
            raise
        log.info("sandbox ready (holder pid %d)", self.holder_pid)
        return self

    @staticmethod
    def _child_of(pid: int) -> int:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) != 1:
            raise SandboxError(f"expected unshare ({pid}) to have one child, found {children}")
        return int(children[0])

    @property
    def netns(self) -> Path:
        """The sandbox's network namespace, as a path other processes can open."""
        return Path(f"/proc/{self.holder_pid}/ns/net")

    def namespaces(self) -> dict[str, str]:
        """The holder's namespaces as the kernel names them (``{"pid": "pid:[4026532…]", …}``): no process of
        the host is in them once the sandbox has ended."""
        return {kind: os.readlink(f"/proc/{self.holder_pid}/ns/{kind}") for kind in ("pid", "mnt", "net")}

    def path(self, inside: str | Path) -> Path:
        """The host path of ``inside`` (an absolute path as the sandbox sees it)."""
        return Path(f"/proc/{self.holder_pid}/root") / Path(inside).relative_to("/")

    def command(self, args: Sequence[str]) -> list[str]:
        """``args`` wrapped to run inside the sandbox (``nsenter`` forks into the PID namespace)."""
        return ["nsenter", f"--target={self.holder_pid}", "--mount", "--net", "--pid", "--", *args]

    def popen(self, args: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None
              ) -> subprocess.Popen[bytes]:
        """Start ``args`` inside the sandbox in its own process group, output appended to ``log_path``. The
        process group holds both ``nsenter`` and the command (its child). It needs no death signal of its own:
        it is in the sandbox's PID namespace, which ends with the holder, which dies with this process."""
        with open(log_path, "ab") as out:
            return subprocess.Popen(self.command(args), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=dict(env) if env is not None else None,
                                    start_new_session=True)

    def stop(self) -> None:
        """End the holder: the kernel kills everything still in the sandbox and drops its mounts. Returns once
        no process is left in its namespaces: the ``nsenter`` of a component (in the sandbox's mount and network
        namespaces, not its PID namespace) exits only after the kernel has killed its child."""
        if self._unshare is None:
            return
        held: set[str] = set()
        if self.holder_pid:
            with contextlib.suppress(OSError):
                held = set(self.namespaces().values())
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.holder_pid, signal.SIGTERM)
        else:  # not known yet (stopped while starting): unshare's death kills the holder (--kill-child)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._unshare.pid, signal.SIGKILL)
        try:
            self._unshare.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._unshare.pid, signal.SIGKILL)
            self._unshare.wait()
        self._unshare = None
        self.holder_pid = 0
        _wait_empty(held)


def members(namespaces: set[str]) -> list[int]:
    """The processes in any of ``namespaces`` (``pid:[…]``, ``mnt:[…]``, ``net:[…]`` as readlink names them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        for kind in ("pid", "mnt", "net"):
            with contextlib.suppress(OSError):
                if os.readlink(entry / "ns" / kind) in namespaces:
                    found.append(int(entry.name))
                    break
    return found


def _wait_empty(namespaces: set[str], timeout: float = 10.0) -> None:
    """Wait until no process is in ``namespaces``; SIGKILL what is still there at ``timeout``, then wait again."""
    if not namespaces:
        return
    for last_try in (False, True):
        deadline = time.monotonic() + timeout
        while (left := members(namespaces)) and time.monotonic() < deadline:
            time.sleep(0.05)  # a poll of /proc: the kernel tells no one when a process has gone
        if not left:
            return
        if last_try:
            log.warning("processes %s are still in the ended sandbox", left)
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
