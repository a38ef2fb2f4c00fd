"""Real Flux on a local control plane: source-, kustomize- and helm-controller, a TLS OCI registry and a git
smart-HTTP server on loopback (docs/architecture.md#real-flux).

The binaries are built from their Go modules on first use (:mod:`tools.controlplane.flux`). :class:`FluxStack`
starts, against a started :class:`~tools.controlplane.cluster.LocalControlPlane`:

- the distribution registry on ``https://127.0.0.1:<port>`` with a serving certificate from the plane's CA
  (the rendered OCIRepository has no ``insecure``, so the registry must serve TLS);
- a git server (:class:`tools.git_http.GitHttpServer`) for GitRepositories;
- the three controllers with the flags that work outside a cluster (``--watch-all-namespaces``, no leader
  election, health and metrics on loopback, source-controller's artifact storage on loopback),
  ``SSL_CERT_FILE`` = the system bundle plus the plane's CA, and a ``--max-retry-delay`` of a few seconds so a
  fixed input (a pushed tag, a created Secret) is seen quickly.

The real Flux CRDs (:func:`flux_crds`, from each controller module's ``config/crd/bases``) must be installed
before :meth:`FluxStack.start`: a controller exits when its kinds are not served. Artifacts are pushed with
``oras`` in Flux's and Helm's media types (:meth:`FluxStack.push_flux_artifact`, :meth:`FluxStack.push_chart`).
:meth:`FluxStack.stop` stops every process it started (SIGTERM then SIGKILL, per process group).
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import ssl
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from tools.controlplane.cluster import LocalControlPlane, free_port, http_ok
from tools.controlplane.flux import CONTROLLERS, ORAS, REGISTRY, Built, ensure_all_built
from tools.git_http import GitHttpServer
from tools.processes import die_with_parent, log_tail, stop_process_groups

log = logging.getLogger(__name__)

FLUX_NAMESPACE = "flux-system"
"""Where the controllers think they run (``RUNTIME_NAMESPACE``) and where sources live by default."""

FLUX_CONFIG_MEDIA_TYPE = "application/vnd.cncf.flux.config.v1+json"
FLUX_CONTENT_MEDIA_TYPE = "application/vnd.cncf.flux.content.v1.tar+gzip"
"""The media types of an artifact ``flux push artifact`` writes (Flux's OCI artifact format)."""
HELM_CONFIG_MEDIA_TYPE = "application/vnd.cncf.helm.config.v1+json"
HELM_CHART_MEDIA_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
"""The media types of a chart ``helm push`` writes (Helm's OCI registry support)."""

START_TIMEOUT = 60.0
"""Seconds for each process to answer its health endpoint."""
STOP_GRACE = 10.0
MAX_RETRY_DELAY = "5s"
"""``--max-retry-delay`` of the local controllers (upstream: 15m)."""
SYSTEM_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


class FluxStackError(RuntimeError):
    """A process exited early or did not become healthy, or a push failed (the message has its output)."""


def flux_crds() -> list[dict[str, Any]]:
    """The real Flux CRDs of the pinned controllers (built first if missing), in controller then file order."""
    docs = []
    for comp in CONTROLLERS:
        built = Built.default(comp)
        built.ensure_built()
        for path in sorted(built.crd_dir.glob("*.yaml")):
            docs += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def tar_gz(files: Mapping[str, str | bytes], prefix: str = "") -> bytes:
    """A reproducible gzipped tar of ``files`` (path → content) under ``prefix`` (mode 0644, mtime 0)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for rel, content in sorted(files.items()):
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(f"{prefix}{rel}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def chart_files(name: str, version: str, templates: Mapping[str, str]) -> dict[str, str]:
    """A Helm chart's files: ``Chart.yaml`` (apiVersion v2, type application) and ``templates/<file>``."""
    chart = {"apiVersion": "v2", "name": name, "version": version, "type": "application"}
    return {"Chart.yaml": yaml.safe_dump(chart, sort_keys=False),
            **{f"templates/{rel}": text for rel, text in templates.items()}}


@dataclass
class _Daemon:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    health: str


@dataclass
class FluxStack:
    """Real Flux, a TLS registry and a git server for one started ``plane``; a context manager.

    After :meth:`start`: :attr:`registry` is ``127.0.0.1:<port>`` (``oci://`` URLs name it),
    :attr:`git` serves GitRepositories, :attr:`dir` holds the state (removed on stop) and the logs, unless
    ``log_dir`` is given: logs written there are kept.
    """

    plane: LocalControlPlane
    max_retry_delay: str = MAX_RETRY_DELAY
    log_dir: Path | None = None
    dir: Path = field(default=Path())
    registry: str = ""
    git: GitHttpServer = field(default_factory=GitHttpServer)
    _daemons: list[_Daemon] = field(default_factory=list)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> FluxStack:
        """Build what is missing, start the registry, the git server and the three controllers; wait until
        each is healthy. The Flux CRDs must already be installed (:func:`flux_crds`).

        Raises:
            tools.controlplane.build.BuildError: a Go build failed.
            FluxStackError: a process exited or did not become healthy (everything started is stopped).
            tools.git_http.GitServerError: git is not installed.
        """
        built = ensure_all_built()
        self.dir = Path(tempfile.mkdtemp(prefix="tatara-flux-"))
        try:
            bundle = self.dir / "ca-bundle.crt"
            system = SYSTEM_CA_BUNDLE.read_bytes() if SYSTEM_CA_BUNDLE.exists() else b""
            bundle.write_bytes(system + b"\n" + self.plane.ca_file.read_bytes())
            self._start_registry(built[REGISTRY.name])
            self.git.start()
            env = {**os.environ, "KUBECONFIG": str(self.plane.kubeconfig), "SSL_CERT_FILE": str(bundle),
                   "RUNTIME_NAMESPACE": FLUX_NAMESPACE}
            for comp in CONTROLLERS:
                self._start_controller(built[comp.name], env)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every process started (controllers first), the git server; remove :attr:`dir`."""
        stop_process_groups([d.proc for d in reversed(self._daemons)], STOP_GRACE)
        self._daemons.clear()
        self.git.stop()
        if self.dir != Path() and self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = Path()

    def __enter__(self) -> FluxStack:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def pids(self) -> list[int]:
        """PIDs of the running processes (registry, controllers)."""
        return [d.proc.pid for d in self._daemons if d.proc.poll() is None]

    def logs(self) -> dict[str, Path]:
        """Each process's log file by name."""
        return {d.name: d.log for d in self._daemons}

    def check_alive(self) -> None:
        """Raise :class:`FluxStackError` (with its log tail) if a process has exited."""
        for d in self._daemons:
            if d.proc.poll() is not None:
                raise FluxStackError(f"{d.name} exited with {d.proc.returncode}:\n{log_tail(d.log)}")

    # -- pushing ---------------------------------------------------------------------

    def oci_url(self, repository: str) -> str:
        """``oci://127.0.0.1:<port>/<repository>``."""
        return f"oci://{self.registry}/{repository}"

    def push_flux_artifact(self, repository: str, tag: str, files: Mapping[str, str]) -> str:
        """Push ``files`` as a Flux OCI artifact (config and content layer in Flux's media types) to
        ``<registry>/<repository>:<tag>``; return the manifest digest."""
        return self._oras_push(repository, tag, tar_gz(files), "content.tar.gz", FLUX_CONTENT_MEDIA_TYPE,
                               {}, FLUX_CONFIG_MEDIA_TYPE)

    def push_chart(self, repository: str, name: str, version: str, templates: Mapping[str, str]) -> str:
        """Package a chart (``Chart.yaml`` + ``templates``) and push it as ``helm push`` would, to
        ``<registry>/<repository>/<name>:<version>``; return the manifest digest."""
        archive = tar_gz(chart_files(name, version, templates), prefix=f"{name}/")
        config = {"apiVersion": "v2", "name": name, "version": version, "type": "application"}
        return self._oras_push(f"{repository}/{name}", version, archive, f"{name}-{version}.tgz",
                               HELM_CHART_MEDIA_TYPE, config, HELM_CONFIG_MEDIA_TYPE)

    def _oras_push(self, repository: str, tag: str, layer: bytes, layer_name: str, layer_type: str,
                   config: Mapping[str, Any], config_type: str) -> str:
        oras = Built.default(ORAS).ensure_built()
        with tempfile.TemporaryDirectory(dir=self.dir) as work:
            Path(work, layer_name).write_bytes(layer)
            Path(work, "config.json").write_text(json.dumps(config))
            proc = subprocess.run(
                [str(oras), "push", "--ca-file", str(self.plane.ca_file), "--format", "json",
                 "--config", f"config.json:{config_type}", f"{self.registry}/{repository}:{tag}",
                 f"{layer_name}:{layer_type}"],
                cwd=work, capture_output=True, text=True, check=False,
                env={**os.environ, "HOME": work, "DOCKER_CONFIG": work})
        if proc.returncode != 0:
            raise FluxStackError(f"oras push {repository}:{tag} failed: {proc.stdout}{proc.stderr}")
        return str(json.loads(proc.stdout)["digest"])

    # -- internals -------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], health: str, env: Mapping[str, str] | None = None,
               context: ssl.SSLContext | None = None) -> None:
        logs = self.log_dir or self.dir
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{name}.log"
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=dict(env or os.environ), start_new_session=True, preexec_fn=die_with_parent())
        daemon = _Daemon(name, proc, log_path, health)
        self._daemons.append(daemon)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise FluxStackError(f"{name} exited with {proc.returncode}:\n{log_tail(log_path)}")
            if http_ok(health, context):
                log.info("%s healthy (pid %d)", name, proc.pid)
                return
            time.sleep(0.2)
        raise FluxStackError(f"{name} not healthy after {START_TIMEOUT:.0f} s:\n{log_tail(log_path)}")

    def _start_registry(self, built: Built) -> None:
        cert, key = self.plane.issue_server(["127.0.0.1", "localhost"]).write(self.dir, "registry")
        port, debug = free_port(), free_port()
        self.registry = f"127.0.0.1:{port}"
        config = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.dir / "registry")}, "delete": {"enabled": True}},
            "http": {"addr": self.registry, "tls": {"certificate": str(cert), "key": str(key)},
                     "debug": {"addr": f"127.0.0.1:{debug}"}},
        }
        path = self.dir / "registry.yaml"
        path.write_text(yaml.safe_dump(config))
        context = ssl.create_default_context(cafile=str(self.plane.ca_file))
        env = {k: v for k, v in os.environ.items() if not k.startswith("REGISTRY_")}
        self._spawn("registry", [str(built.binary), "serve", str(path)], f"https://{self.registry}/v2/",
                    env, context)

    def _start_controller(self, built: Built, env: Mapping[str, str]) -> None:
        name = built.component.name
        health, metrics = free_port(), free_port()
        args = [str(built.binary), f"--metrics-addr=127.0.0.1:{metrics}", f"--health-addr=127.0.0.1:{health}",
                "--watch-all-namespaces=true", "--enable-leader-election=false", "--requeue-dependency=5s",
                f"--max-retry-delay={self.max_retry_delay}", "--log-level=info"]
        if name == "source-controller":
            storage, artifacts = free_port(), self.dir / "artifacts"
            artifacts.mkdir(exist_ok=True)
            args += [f"--storage-path={artifacts}", f"--storage-addr=127.0.0.1:{storage}",
                     f"--storage-adv-addr=127.0.0.1:{storage}"]
        self._spawn(name, args, f"http://127.0.0.1:{health}/readyz", env)
