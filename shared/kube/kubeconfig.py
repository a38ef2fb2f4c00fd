"""Where the API server is and how to authenticate to it: a kubeconfig file, or the pod's service account.

A small loader of our own on PyYAML, instead of kubernetes-asyncio's: importing that package loads its
generated OpenAPI models (a quarter of a second of every binary's start, docs/runtime.md#client). It reads
what client-go's ``clientcmd`` and ``rest.InClusterConfig`` read, for the credentials the project meets:

- kubeconfig (``$KUBECONFIG``, its first file, or ``~/.kube/config``): the ``current-context`` (or the one
  named), its cluster's ``server``, ``certificate-authority`` / ``-data``, ``insecure-skip-tls-verify``,
  ``tls-server-name``, ``proxy-url``; its user's ``client-certificate`` / ``-data`` and ``client-key`` /
  ``-data``, ``token`` / ``tokenFile``, ``username``/``password``, and ``exec`` plugins
  (``client.authentication.k8s.io`` ExecCredential: token and client certificate, re-run when the credential's
  ``expirationTimestamp`` has passed or after a 401). Relative file paths are relative to the kubeconfig's
  folder, as clientcmd resolves them.
- in-cluster (``rest.InClusterConfig``): ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``, the CA
  and token the kubelet mounts in ``/var/run/secrets/kubernetes.io/serviceaccount``; the token file is re-read
  every minute and at once after a 401 (client-go's cached token source, ``ResetTokenOlderThan``).

Raises :class:`ConfigError` for a configuration it cannot use.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from shared.kube.http import basic_credentials

__all__ = [
    "SERVICE_ACCOUNT_DIR", "SERVICE_CERT_FILENAME", "SERVICE_TOKEN_FILENAME", "TOKEN_FILE_REFRESH",
    "ConfigError", "Credentials", "KubeConfig", "load_incluster", "load_kubeconfig",
]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_TOKEN_FILENAME = str(SERVICE_ACCOUNT_DIR / "token")
SERVICE_CERT_FILENAME = str(SERVICE_ACCOUNT_DIR / "ca.crt")
TOKEN_FILE_REFRESH = 60.0
"""Seconds a token read from a file is used before the file is read again (client-go: one minute)."""


class ConfigError(Exception):
    """No usable configuration: no kubeconfig, an unknown context, not in a pod, an unreadable file."""


@dataclass
class Credentials:
    """What authenticates a request: a bearer token (static, from a file, or from an exec plugin),
    basic auth, or nothing (a client certificate in the TLS context does it).

    :meth:`authorization` is the ``Authorization`` header value (None: none to send); :meth:`expire`
    makes the next call read the token afresh (after a 401).
    """

    token: str | None = None
    token_file: str | None = None
    basic: tuple[str, str] | None = None
    exec_plugin: Callable[[], tuple[str, float | None]] | None = None
    """Runs the exec plugin: (token, expiry as a ``time.time()`` value or None)."""
    clock: Callable[[], float] = time.monotonic
    _cached: str | None = field(default=None, repr=False)
    _expires: float = field(default=0.0, repr=False)

    def authorization(self) -> str | None:
        if self.basic is not None:
            return basic_credentials(*self.basic)
        if self.token_file is not None:
            if self._cached is None or self.clock() >= self._expires:
                try:
                    self._cached = Path(self.token_file).read_text().strip()
                except OSError as err:
                    raise ConfigError(f"cannot read the token file {self.token_file}: {err}") from err
                self._expires = self.clock() + TOKEN_FILE_REFRESH
            return f"Bearer {self._cached}"
        if self.exec_plugin is not None:
            if self._cached is None or (self._expires and time.time() >= self._expires):
                token, expiry = self.exec_plugin()
                self._cached, self._expires = token, expiry or 0.0
            return f"Bearer {self._cached}" if self._cached else None
        return f"Bearer {self.token}" if self.token else None

    def expire(self) -> None:
        """Forget a token read from a file or an exec plugin: the next request reads it again."""
        if self.token_file is not None or self.exec_plugin is not None:
            self._cached = None


@dataclass
class KubeConfig:
    """One API server and the credentials for it (what :class:`~shared.kube.client.KubeClient` connects with)."""

    server: str
    ca_file: str | None = None
    ca_data: str | None = None
    """PEM text of the CA bundle."""
    insecure: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    credentials: Credentials = field(default_factory=Credentials)

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context: the CA (or the system's), the client certificate, verification unless insecure."""
        try:
            context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        except (OSError, ssl.SSLError) as err:
            raise ConfigError(f"cannot load the CA: {err}") from err
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if self.cert_file or self.cert_data:
            _load_cert_chain(context, self.cert_file, self.key_file, self.cert_data, self.key_data)
        return context


def _load_cert_chain(context: ssl.SSLContext, cert_file: str | None, key_file: str | None,
                     cert_data: bytes | None, key_data: bytes | None) -> None:
    """``load_cert_chain`` takes paths only: inline data goes through private temporary files, removed at once."""
    with tempfile.TemporaryDirectory(prefix="kubeconfig-") as folder:
        if cert_data is not None:
            cert_file = os.path.join(folder, "cert.pem")
            Path(cert_file).write_bytes(cert_data)
        if key_data is not None:
            key_file = os.path.join(folder, "key.pem")
            Path(key_file).write_bytes(key_data)
        try:
            context.load_cert_chain(str(cert_file), keyfile=key_file)
        except (OSError, ssl.SSLError) as err:
            raise ConfigError(f"cannot load the client certificate: {err}") from err


def load_incluster(*, token_file: str = SERVICE_TOKEN_FILENAME, ca_file: str = SERVICE_CERT_FILENAME,
                   environ: Mapping[str, str] | None = None) -> KubeConfig:
    """The pod's service account (client-go's ``rest.InClusterConfig``).

    Raises:
        ConfigError: ``KUBERNETES_SERVICE_HOST``/``_PORT`` unset or empty, or no token file.
    """
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
    if not os.path.isfile(token_file):
        raise ConfigError(f"not in a pod: no service-account token at {token_file}")
    if ":" in host:  # an IPv6 address, as net.JoinHostPort writes it
        host = f"[{host}]"
    return KubeConfig(server=f"https://{host}:{port}", ca_file=ca_file if os.path.isfile(ca_file) else None,
                      credentials=Credentials(token_file=token_file))


def default_kubeconfig_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$KUBECONFIG`` (its first entry), else ``~/.kube/config``."""
    env = os.environ if environ is None else environ
    listed = [entry for entry in env.get("KUBECONFIG", "").split(os.pathsep) if entry]
    return Path(listed[0]).expanduser() if listed else Path("~/.kube/config").expanduser()


def _named(entries: Any, name: str, what: str) -> dict[str, Any]:
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(what)
            return body if isinstance(body, dict) else {}
    raise ConfigError(f"kubeconfig: no {what} named {name!r}")


def load_kubeconfig(path: str | os.PathLike[str] | None = None, context: str | None = None) -> KubeConfig:
    """The API server and credentials of ``context`` (default: ``current-context``) in ``path``.

    Raises:
        ConfigError: no such file, no usable context, or a referenced file that cannot be read.
    """
    import yaml  # only the kubeconfig path needs it; in a pod nothing does

    source = Path(path).expanduser() if path else default_kubeconfig_path()
    try:
        document = yaml.safe_load(source.read_text()) or {}
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read the kubeconfig {source}: {err}") from err
    if not isinstance(document, dict):
        raise ConfigError(f"kubeconfig {source}: not a mapping")
    name = context or document.get("current-context")
    if not name:
        raise ConfigError(f"kubeconfig {source}: no current-context")
    ctx = _named(document.get("contexts"), name, "context")
    cluster = _named(document.get("clusters"), ctx.get("cluster", ""), "cluster")
    user = _named(document.get("users"), ctx["user"], "user") if ctx.get("user") else {}
    base = source.parent

    def file(value: Any) -> str | None:
        return str(base / os.path.expanduser(str(value))) if value else None

    def data(value: Any) -> bytes | None:
        return base64.b64decode(value) if value else None

    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError(f"kubeconfig {source}: cluster of context {name!r} has no server")
    ca_data = data(cluster.get("certificate-authority-data"))
    config = KubeConfig(
        server=server,
        ca_file=None if ca_data else file(cluster.get("certificate-authority")),
        ca_data=ca_data.decode() if ca_data else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy_url=cluster.get("proxy-url") or None,
        cert_data=data(user.get("client-certificate-data")),
        key_data=data(user.get("client-key-data")),
    )
    if config.cert_data is None:
        config.cert_file = file(user.get("client-certificate"))
    if config.key_data is None:
        config.key_file = file(user.get("client-key"))
    if user.get("token"):
        config.credentials = Credentials(token=str(user["token"]))
    elif user.get("tokenFile"):
        config.credentials = Credentials(token_file=file(user["tokenFile"]))
    elif user.get("username") and user.get("password"):
        config.credentials = Credentials(basic=(str(user["username"]), str(user["password"])))
    elif isinstance(user.get("exec"), dict):
        config.credentials = Credentials(exec_plugin=_exec_plugin(user["exec"], base, config))
        config.credentials.authorization()  # run it now: a client certificate it returns goes in the TLS context
    return config


def _exec_plugin(spec: dict[str, Any], base: Path, config: KubeConfig) -> Callable[[], tuple[str, float | None]]:
    """A runner of the kubeconfig's ``exec`` credential plugin (client-go's ``plugin/pkg/client/auth/exec``).

    The plugin's ``ExecCredential`` status gives a ``token`` and optionally an ``expirationTimestamp``; a client
    certificate it returns is loaded into ``config`` once, on the first run (when the client is built).
    """
    command = str(spec.get("command") or "")
    if not command:
        raise ConfigError("kubeconfig: exec plugin without a command")
    if "/" in command and not os.path.isabs(command):
        command = str(base / command)  # a relative path with a separator is relative to the kubeconfig
    args = [command, *(str(arg) for arg in spec.get("args") or ())]
    api_version = str(spec.get("apiVersion") or "client.authentication.k8s.io/v1")

    def run() -> tuple[str, float | None]:
        env = dict(os.environ)
        for pair in spec.get("env") or ():
            env[str(pair["name"])] = str(pair["value"])
        env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": api_version, "kind": "ExecCredential",
                                                  "spec": {"interactive": False}})
        try:
            done = subprocess.run(args, env=env, capture_output=True, check=True, timeout=60)
            status = json.loads(done.stdout)["status"]
        except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"kubeconfig exec plugin {command}: {err}") from err
        if status.get("clientCertificateData") and config.cert_data is None:
            config.cert_data = str(status["clientCertificateData"]).encode()
            config.key_data = str(status.get("clientKeyData") or "").encode()
        expiry = status.get("expirationTimestamp")
        when = datetime.fromisoformat(str(expiry).replace("Z", "+00:00")).timestamp() if expiry else None
        return str(status.get("token") or ""), when

    return run
