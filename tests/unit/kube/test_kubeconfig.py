"""shared.kube.kubeconfig: what a kubeconfig and a pod's service account resolve to (client-go's clientcmd and
rest.InClusterConfig), on files written here with certificates of a real CA (tools.controlplane.pki). The same
loader connects to the real API server in every integration test and in a pod on the node tier
(tests/e2e/node/test_token.py)."""

from __future__ import annotations

import base64
import os
import ssl
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.kube.kubeconfig import (
    TOKEN_FILE_REFRESH,
    ConfigError,
    Credentials,
    load_incluster,
    load_kubeconfig,
)
from tools.controlplane.pki import CertificateAuthority

CA = CertificateAuthority("kubeconfig-test-ca")


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document))
    return path


def kubeconfig(cluster: dict[str, Any], user: dict[str, Any], *, current: str = "main",
               extra_contexts: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": current,
            "clusters": [{"name": "c", "cluster": cluster}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}, *extra_contexts]}


def ca_subjects(context: ssl.SSLContext) -> list[str]:
    return [str(dict(pair[0] for pair in cert["subject"])["commonName"]) for cert in context.get_ca_certs()]


def test_files_are_read_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    pair = CA.issue_client("alice", ("team",))
    (tmp_path / "pki").mkdir()
    pair.write(tmp_path / "pki", "alice")
    (tmp_path / "pki" / "ca.crt").write_bytes(CA.cert_pem)
    path = write(tmp_path / "config", kubeconfig(
        {"server": "https://127.0.0.1:6443", "certificate-authority": "pki/ca.crt", "tls-server-name": "kube"},
        {"client-certificate": "pki/alice.crt", "client-key": "pki/alice.key"}))
    config = load_kubeconfig(path)
    assert config.server == "https://127.0.0.1:6443"
    assert config.ca_file == str(tmp_path / "pki" / "ca.crt")
    assert (config.cert_file, config.key_file) == (str(tmp_path / "pki" / "alice.crt"),
                                                   str(tmp_path / "pki" / "alice.key"))
    assert config.tls_server_name == "kube"
    assert config.credentials.authorization() is None  # the certificate authenticates
    context = config.ssl_context()
    assert ca_subjects(context) == ["kubeconfig-test-ca"]
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_inline_data_and_a_named_context(tmp_path: Path) -> None:
    pair = CA.issue_client("bob")
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    document = kubeconfig({"server": "https://other:1"}, {"token": "unused"}, extra_contexts=(
        {"name": "inline", "context": {"cluster": "inline", "user": "inline"}},))
    document["clusters"].append({"name": "inline", "cluster": {
        "server": "https://10.0.0.1:443", "certificate-authority-data": b64(CA.cert_pem)}})
    document["users"].append({"name": "inline", "user": {
        "client-certificate-data": b64(pair.cert_pem), "client-key-data": b64(pair.key_pem)}})
    config = load_kubeconfig(write(tmp_path / "config", document), context="inline")
    assert config.server == "https://10.0.0.1:443"
    assert (config.cert_data, config.key_data) == (pair.cert_pem, pair.key_pem)
    assert ca_subjects(config.ssl_context()) == ["kubeconfig-test-ca"]  # and the key pair loads
    assert list(tmp_path.iterdir()) == [tmp_path / "config"]  # no key material left behind


def test_the_kubeconfig_environment_variable_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "first", kubeconfig({"server": "https://first:1"}, {"token": "t1"}))
    monkeypatch.setenv("KUBECONFIG", f"{path}{os.pathsep}{tmp_path / 'second'}")
    config = load_kubeconfig()
    assert config.server == "https://first:1"
    assert config.credentials.authorization() == "Bearer t1"


def test_insecure_skip_tls_verify_turns_verification_off(tmp_path: Path) -> None:
    config = load_kubeconfig(write(tmp_path / "config", kubeconfig(
        {"server": "https://x:1", "insecure-skip-tls-verify": True}, {"username": "admin", "password": "pw"})))
    context = config.ssl_context()
    assert context.verify_mode == ssl.CERT_NONE
    assert not context.check_hostname
    assert config.credentials.authorization() == "Basic " + base64.b64encode(b"admin:pw").decode()


@pytest.mark.parametrize(("document", "message"), [
    pytest.param({"contexts": []}, "no current-context", id="no current context"),
    pytest.param(kubeconfig({"server": "https://x:1"}, {}, current="gone"), "no context named 'gone'",
                 id="an unknown context"),
    pytest.param(kubeconfig({}, {}), "has no server", id="a cluster without a server"),
])
def test_an_unusable_kubeconfig_is_a_config_error(tmp_path: Path, document: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_kubeconfig(write(tmp_path / "config", document))


def test_a_missing_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_kubeconfig(tmp_path / "absent")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_token_file_is_reread_after_a_minute_and_after_expire(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    clock = Clock()
    credentials = Credentials(token_file=str(token), clock=clock)
    assert credentials.authorization() == "Bearer first"
    token.write_text("second")
    clock.now += TOKEN_FILE_REFRESH - 1
    assert credentials.authorization() == "Bearer first"  # still within the minute
    clock.now += 1
    assert credentials.authorization() == "Bearer second"
    token.write_text("third")
    credentials.expire()  # a 401
    assert credentials.authorization() == "Bearer third"


def test_in_cluster_reads_the_service_environment(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(CA.cert_pem)
    config = load_incluster(token_file=str(tmp_path / "token"), ca_file=str(tmp_path / "ca.crt"),
                            environ={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    assert config.server == "https://10.96.0.1:443"
    assert config.credentials.authorization() == "Bearer sa-token"
    assert ca_subjects(config.ssl_context()) == ["kubeconfig-test-ca"]
    v6 = load_incluster(token_file=str(tmp_path / "token"), ca_file=str(tmp_path / "ca.crt"),
                        environ={"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"})
    assert v6.server == "https://[fd00::1]:443"


@pytest.mark.parametrize("environ", [
    pytest.param({}, id="no service host"),
    pytest.param({"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": ""}, id="an empty port"),
])
def test_outside_a_pod_in_cluster_is_a_config_error(tmp_path: Path, environ: dict[str, str]) -> None:
    (tmp_path / "token").write_text("t")
    with pytest.raises(ConfigError, match="not in a pod"):
        load_incluster(token_file=str(tmp_path / "token"), environ=environ)


def test_in_cluster_without_a_token_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no service-account token"):
        load_incluster(token_file=str(tmp_path / "absent"),
                       environ={"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"})


def test_an_exec_plugin_supplies_the_token_and_runs_again_once_it_expires(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    plugin = tmp_path / "plugin.py"
    # each run answers token-<n>; the first credential is already expired, the second is good for a long time
    plugin.write_text(
        "import json, os, pathlib, sys\n"
        f"runs = pathlib.Path({str(counter)!r})\n"
        "n = int(runs.read_text()) + 1 if runs.exists() else 1\n"
        "runs.write_text(str(n))\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "expiry = '2000-01-01T00:00:00Z' if n == 1 else '2999-01-01T00:00:00Z'\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',\n"
        "                  'status': {'token': f\"{os.environ['PREFIX']}-{n}\", 'expirationTimestamp': expiry}}))\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    config = load_kubeconfig(write(tmp_path / "config", kubeconfig({"server": "https://x:1"}, {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": [str(plugin)],
        "env": [{"name": "PREFIX", "value": "token"}]}})))
    assert counter.read_text() == "1"  # run when loaded
    assert config.credentials.authorization() == "Bearer token-2"  # the first one had expired
    assert config.credentials.authorization() == "Bearer token-2"
    assert counter.read_text() == "2"
    config.credentials.expire()  # a 401
    assert config.credentials.authorization() == "Bearer token-3"
