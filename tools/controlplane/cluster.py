"""Run etcd + kube-apiserver (+ kube-controller-manager) on loopback, as envtest does.

Flags, readiness and shutdown follow controller-runtime's envtest (README.md#local-control-plane):
free loopback ports, generated certificates, an admin client certificate in
``system:masters``, ``--authorization-mode=RBAC``, readiness on ``/readyz``, every
process in its own process group, SIGTERM then SIGKILL after a grace period,
apiserver stopped before etcd, temp directory removed. Each child also gets
``PR_SET_PDEATHSIG`` so it dies with its parent even if the parent is SIGKILLed (when
started from the main thread: the signal is tied to the forking thread).

kube-controller-manager runs only the garbage-collector, namespace and serviceaccount
controllers, so ownerReference cascades and namespace deletion are real; a test may add others
(``extra_controllers``, e.g. the Job controller) and keep the ServiceAccount admission plugin
(``service_account_admission``) on a plane of its own.

With ``for_node=True`` the plane is a cluster a kubelet can join (:mod:`tools.controlplane.node`,
README.md#a-real-node): ServiceAccount and NodeRestriction admission, Node+RBAC authorization, the
kube-controller-manager controllers workloads need (:data:`NODE_CONTROLLERS`), kube-scheduler, a serving
certificate that also names the ``kubernetes`` Service VIP and the node's forward, a client certificate for
the kubelet API, and an egress selector that dials nodes and pods through the node's proxy (a UNIX socket,
:attr:`LocalControlPlane.egress_socket`).

With ``audit=True`` kube-apiserver also writes an audit log (:attr:`LocalControlPlane.audit_log`, JSON lines,
:mod:`tools.controlplane.audit`) of the requests ServiceAccounts make, at the ``Metadata`` level: who, which verb
on which resource, and the answer's code. Off by default; on, it costs one line per ServiceAccount request (an
admin's or a controller's client certificate is never logged).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from tools.controlplane.audit import SERVICE_ACCOUNT_POLICY
from tools.controlplane.build import Toolchain
from tools.controlplane.nodenet import API_SERVER_SANS, SERVICE_CIDR
from tools.controlplane.pki import CertificateAuthority, KeyPair, service_account_signing_key
from tools.processes import die_with_parent, log_tail, stop_process_groups

log = logging.getLogger(__name__)

ADMIN_USER = "admin"
ADMIN_GROUPS = ("system:masters",)
CONTROLLERS = ("garbage-collector-controller", "namespace-controller", "serviceaccount-controller")
"""kube-controller-manager controllers started."""

NODE_CONTROLLERS = (*CONTROLLERS, "serviceaccount-token-controller", "root-ca-certificate-publisher-controller",
                    "clusterrole-aggregation-controller", "job-controller", "replicaset-controller",
                    "deployment-controller", "ttl-after-finished-controller", "pod-garbage-collector-controller",
                    "node-lifecycle-controller", "taint-eviction-controller", "disruption-controller",
                    "endpoints-controller", "endpointslice-controller")
"""kube-controller-manager controllers started when a node runs: what Deployments, Jobs and pods with
ServiceAccount tokens need, the node's lifecycle, and Services' endpoints (for the API server's service
proxy; no kube-proxy routes a ClusterIP)."""

START_TIMEOUT = 90.0
"""Seconds to wait for each component to become ready (envtest waits 20 s; a 2-core CI machine needs 60 or more)."""

STOP_GRACE = 20.0
"""Seconds between SIGTERM and SIGKILL on shutdown (envtest's default)."""


class ControlPlaneError(RuntimeError):
    """A component exited early or did not become ready; the message has its log tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (racy; callers retry the start)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])



@dataclass
class _Component:
    name: str
    args: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log.debug("starting %s: %s", self.name, " ".join(self.args))
        # a component (re)started from a worker thread relies on stop() alone (tools/processes.py)
        with open(self.log_path, "ab") as out:
            self.process = subprocess.Popen(
                self.args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=die_with_parent(),
            )

    def log_tail(self, lines: int = 30) -> str:
        return log_tail(self.log_path, lines)

    def stop(self) -> None:
        if self.process is not None:
            stop_process_groups([self.process], STOP_GRACE)


@dataclass
class LocalControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) on loopback.

    Use as a context manager, or call :meth:`start` / :meth:`stop`. After start,
    :attr:`kubeconfig` is a kubeconfig file for the admin user (``system:masters``)
    and :attr:`server` is the API server's ``https://127.0.0.1:<port>`` URL.

    Args:
        toolchain: where the binaries are; built on first use.
        controller_manager: also run kube-controller-manager (GC, namespaces, SAs).
        work_dir: parent for the temp directory (default: the system temp dir).
        for_node: configure a cluster a kubelet can join, and run kube-scheduler (module docstring).
        extra_controllers: further kube-controller-manager controllers for a plane without a node (e.g.
            ``job-controller``: Jobs create their pods, which stay Pending without a scheduler).
        service_account_admission: keep the ServiceAccount admission plugin on a plane without a node (a pod
            naming a missing ServiceAccount is refused, as in a real cluster).
        audit: write the audit log of ServiceAccount requests to :attr:`audit_log` (module docstring).
        audit_policy: with ``audit``, this audit Policy instead of ServiceAccount requests at ``Metadata`` (e.g. the
            writes of some users, to tell which controller instance wrote what).
        apiserver_flags: further kube-apiserver flags, after the plane's own (e.g. ``--feature-gates=...``).
    """

    toolchain: Toolchain = field(default_factory=Toolchain.default)
    controller_manager: bool = True
    work_dir: Path | None = None
    for_node: bool = False
    extra_controllers: tuple[str, ...] = ()
    service_account_admission: bool = False
    audit: bool = False
    audit_policy: Mapping[str, Any] | None = None
    apiserver_flags: tuple[str, ...] = ()
    server: str = ""
    etcd_url: str = ""
    dir: Path = field(default=Path())
    _ca: CertificateAuthority | None = None
    _components: list[_Component] = field(default_factory=list)

    # -- public --------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig written at start."""
        return self.dir / "kubeconfig"

    @property
    def audit_log(self) -> Path:
        """The audit log (JSON lines; written only with ``audit=True``, appended to across
        :meth:`restart_apiserver`)."""
        return self.dir / "audit.log"

    @property
    def ca_file(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def api_port(self) -> int:
        """The API server's port on 127.0.0.1."""
        return int(self.server.rsplit(":", 1)[1])

    @property
    def egress_socket(self) -> Path:
        """The UNIX socket kube-apiserver dials nodes and pods through (``for_node`` only; the node's proxy
        listens on it)."""
        return self.dir / "egress.sock"

    def issue_client(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate for ``user`` in ``groups``, signed by the plane's CA."""
        if self._ca is None:
            raise ControlPlaneError("control plane not started")
        return self._ca.issue_client(user, groups)

    def kubeconfig_for(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """Write and return a kubeconfig authenticating as ``user`` in ``groups`` by client cert."""
        if self._ca is None:
            raise ControlPlaneError("control plane not started")
        pair = self._ca.issue_client(user, groups)
        safe = "".join(c if c.isalnum() else "-" for c in user)
        cert, key = pair.write(self.dir, f"user-{safe}")
        path = self.dir / f"kubeconfig-{safe}"
        self._write_kubeconfig(path, user, cert, key)
        return path

    def issue_server(self, hosts: list[str]) -> KeyPair:
        """A serving certificate for ``hosts`` signed by the plane's CA, so a client that trusts
        :attr:`ca_file` (as every component of the plane does) trusts the server too."""
        if self._ca is None:
            raise ControlPlaneError("control plane not started")
        return self._ca.issue_server(hosts)

    def start(self, attempts: int = 3) -> LocalControlPlane:
        """Build binaries if missing, start every component, wait until ready.

        Retries the whole start up to ``attempts`` times (free-port races).

        Raises:
            tools.controlplane.build.BuildError: the Go build failed.
            ControlPlaneError: a component did not become ready on the last attempt.
        """
        self.toolchain.ensure_built()
        for attempt in range(1, attempts + 1):
            try:
                self._start_once()
                return self
            except ControlPlaneError:
                self.stop()
                if attempt == attempts:
                    raise
                log.warning("control plane start failed (attempt %d), retrying", attempt)
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop components in reverse start order (apiserver before etcd); remove the temp dir."""
        for component in reversed(self._components):
            component.stop()
        self._components.clear()
        if self.dir != Path() and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = Path()

    def __enter__(self) -> LocalControlPlane:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver (SIGTERM) and start it again on the same port; wait for ``/readyz``.

        Clients see their connections drop and watches end, as in a control-plane upgrade.
        The new apiserver's watch cache starts at etcd's current revision.
        """
        component = self._component("kube-apiserver")
        component.stop()
        component.start()
        self._wait(component, lambda: http_ok(f"{self.server}/readyz", self._admin_ssl()))

    @contextlib.contextmanager
    def apiserver_paused(self) -> Iterator[None]:
        """SIGSTOP kube-apiserver for the ``with`` block: connections stay open, no byte flows."""
        proc = self._component("kube-apiserver").process
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(proc.pid, signal.SIGCONT)

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (through etcd's JSON gateway).

        Watches from an older resourceVersion that reach etcd then fail with 410 Gone.
        Returns the revision compacted to.
        """
        header = _post_json(f"{self.etcd_url}/v3/kv/range", {"key": "AA=="})["header"]
        revision = int(header["revision"])
        _post_json(f"{self.etcd_url}/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _component(self, name: str) -> _Component:
        for component in self._components:
            if component.name == name:
                return component
        raise ControlPlaneError(f"{name} is not running")

    def _admin_ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.dir / "admin.crt"), str(self.dir / "admin.key"))
        return ctx

    def pids(self) -> list[int]:
        """PIDs of the running component processes."""
        return [c.process.pid for c in self._components if c.process and c.process.poll() is None]

    # -- internals -------------------------------------------------------------------

    def _start_once(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="tatara-cp-", dir=self.work_dir))
        d = self.dir
        ca = self._ca = CertificateAuthority()
        self.ca_file.write_bytes(ca.cert_pem)
        hosts = ["localhost", "127.0.0.1", *(API_SERVER_SANS if self.for_node else ())]
        serving_cert, serving_key = ca.issue_server(hosts).write(d, "apiserver")
        admin_cert, admin_key = ca.issue_client(ADMIN_USER, ADMIN_GROUPS).write(d, "admin")
        sa_private, sa_public = service_account_signing_key()
        (d / "sa.key").write_bytes(sa_private)
        (d / "sa.pub").write_bytes(sa_public)

        etcd_client, etcd_peer, api_port = free_port(), free_port(), free_port()
        etcd_url = self.etcd_url = f"http://127.0.0.1:{etcd_client}"
        self.server = f"https://127.0.0.1:{api_port}"
        self._write_kubeconfig(self.kubeconfig, ADMIN_USER, admin_cert, admin_key)
        (d / "etcd").mkdir()

        etcd = self._launch("etcd", [
            str(self.toolchain.binary("etcd")),
            f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=default=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ])
        self._wait(etcd, lambda: http_ok(f"{etcd_url}/health"))

        apiserver = self._launch("kube-apiserver", [
            str(self.toolchain.binary("kube-apiserver")),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={d}",
            f"--tls-cert-file={serving_cert}",
            f"--tls-private-key-file={serving_key}",
            f"--client-ca-file={self.ca_file}",
            f"--service-account-issuer={self.server}/",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            *(self._node_apiserver_flags() if self.for_node else [
                "--authorization-mode=RBAC",
                *([] if self.service_account_admission else ["--disable-admission-plugins=ServiceAccount"])]),
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",
            *(self._audit_flags() if self.audit else []),
            "-v=1",
            *self.apiserver_flags,
        ])
        ssl_ctx = self._admin_ssl()
        self._wait(apiserver, lambda: http_ok(f"{self.server}/readyz", ssl_ctx))

        if self.controller_manager:
            kcm_port = free_port()
            kcm_cert, kcm_key = ca.issue_client("system:kube-controller-manager", ADMIN_GROUPS).write(d, "kcm")
            kcm_config = d / "kubeconfig-kcm"
            self._write_kubeconfig(kcm_config, "system:kube-controller-manager", kcm_cert, kcm_key)
            node_flags = [f"--service-account-private-key-file={d / 'sa.key'}", f"--root-ca-file={self.ca_file}"]
            controllers = NODE_CONTROLLERS if self.for_node else (*CONTROLLERS, *self.extra_controllers)
            kcm = self._launch("kube-controller-manager", [
                str(self.toolchain.binary("kube-controller-manager")),
                f"--kubeconfig={kcm_config}",
                f"--controllers={','.join(controllers)}",
                *(node_flags if self.for_node else []),
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                f"--cert-dir={d / 'kcm-certs'}",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                "-v=1",
            ])
            self._wait(kcm, lambda: http_ok(f"https://127.0.0.1:{kcm_port}/healthz", _self_signed()))
        if self.for_node:
            self._start_scheduler(ca)

    def _audit_flags(self) -> list[str]:
        """kube-apiserver's flags for the audit log: the policy file and a JSON log written as each request
        ends (``blocking``: written synchronously, in the request's own handler)."""
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(dict(self.audit_policy or SERVICE_ACCOUNT_POLICY)))
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
                "--audit-log-mode=blocking"]

    def _node_apiserver_flags(self) -> list[str]:
        """kube-apiserver's flags for a cluster with a node: admission, authorization, the kubelet client
        certificate and the egress selector through the node's proxy."""
        assert self._ca is not None
        d = self.dir
        kubelet_cert, kubelet_key = self._ca.issue_client("kube-apiserver-kubelet-client", ADMIN_GROUPS).write(
            d, "apiserver-kubelet-client")
        egress = d / "egress-selector.yaml"
        egress.write_text(yaml.safe_dump({
            "apiVersion": "apiserver.k8s.io/v1beta1", "kind": "EgressSelectorConfiguration",
            "egressSelections": [{"name": "cluster", "connection": {
                "proxyProtocol": "HTTPConnect", "transport": {"uds": {"udsName": str(self.egress_socket)}}}}]}))
        return ["--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
                f"--kubelet-client-certificate={kubelet_cert}", f"--kubelet-client-key={kubelet_key}",
                "--kubelet-preferred-address-types=InternalIP", f"--egress-selector-config-file={egress}"]

    def _start_scheduler(self, ca: CertificateAuthority) -> None:
        d = self.dir
        port = free_port()
        cert, key = ca.issue_client("system:kube-scheduler", ADMIN_GROUPS).write(d, "scheduler")
        config = d / "kubeconfig-scheduler"
        self._write_kubeconfig(config, "system:kube-scheduler", cert, key)
        scheduler = self._launch("kube-scheduler", [
            str(self.toolchain.binary("kube-scheduler")),
            f"--kubeconfig={config}",
            f"--authentication-kubeconfig={config}",
            f"--authorization-kubeconfig={config}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={d / 'scheduler-certs'}",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "-v=1",
        ])
        self._wait(scheduler, lambda: http_ok(f"https://127.0.0.1:{port}/healthz", _self_signed()))

    def _launch(self, name: str, args: list[str]) -> _Component:
        component = _Component(name, args, self.dir / f"{name}.log")
        component.start()
        self._components.append(component)
        return component

    def _wait(self, component: _Component, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            proc = component.process
            if proc is not None and proc.poll() is not None:
                raise ControlPlaneError(
                    f"{component.name} exited with {proc.returncode}:\n{component.log_tail()}")
            if ready():
                return
            time.sleep(0.1)
        raise ControlPlaneError(f"{component.name} not ready after {START_TIMEOUT:.0f} s:\n{component.log_tail()}")

    def _write_kubeconfig(self, path: Path, user: str, cert: Path, key: Path) -> None:
        write_kubeconfig(path, self.server, self.ca_file, user, cert, key)


def write_kubeconfig(path: Path, server: str, ca_file: Path, user: str, cert: Path, key: Path) -> None:
    """Write a kubeconfig (mode 0600) for ``server`` trusting ``ca_file``, authenticating as ``user`` with the
    client certificate ``cert`` and its ``key``."""
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "tatara-local", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": "tatara-local", "context": {"cluster": "tatara-local", "user": user}}],
        "current-context": "tatara-local",
    }
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def _self_signed() -> ssl.SSLContext:
    """A TLS context that accepts the self-signed serving certificate kube-controller-manager and kube-scheduler
    make for their own ``/healthz`` (only that endpoint is read with it)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _post_json(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        result: dict[str, Any] = json.loads(resp.read())
        return result


def http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    """True when ``url`` answers 200 within 2 s (``context`` for TLS); False on any error or other status."""
    try:
        with urllib.request.urlopen(url, timeout=2, context=context) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running(**kwargs: Any) -> Iterator[LocalControlPlane]:
    """``with running() as cp:`` — a started :class:`LocalControlPlane`, stopped on exit."""
    plane = LocalControlPlane(**kwargs)
    try:
        yield plane.start()
    finally:
        plane.stop()
