"""Test helpers around the real local API server: CRD install, waiting, YAML loading.

CRD install and waiting are the tooling's own (:func:`tools.crds.install_crds`, :func:`tools.wait.wait_for`),
re-exported here under the names the tests have always imported."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client, config

from shared.kube.client import KubeClient, Resource
from shared.kube.kubeconfig import Credentials, KubeConfig
from tools.crds import install_crds as tools_install_crds
from tools.crds import third_party_crds
from tools.wait import wait_for

__all__ = ["FIXTURES", "api_client", "install_crds", "install_crds_async", "load_yaml_docs", "third_party_crds",
           "wait_for", "widget_crd"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def widget_crd(group: str) -> tuple[Resource, dict[str, Any]]:
    """A throwaway namespaced kind ``Widget`` in ``group`` (v1): free-form spec and status, a status
    subresource (so ``metadata.generation`` moves on spec changes only). Returns its Resource and CRD."""
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }}},
            }],
        },
    }
    return Resource(group, "v1", "widgets", "Widget"), crd


def load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document in ``path``."""
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


async def api_client(kubeconfig: Path) -> client.ApiClient:
    """A kubernetes-asyncio ApiClient for ``kubeconfig``; the caller closes it."""
    return await config.new_client_from_config(config_file=str(kubeconfig))


def kube_config_of(api: client.ApiClient) -> KubeConfig:
    """The server and credentials of a kubernetes-asyncio ``api``, for a :class:`KubeClient` of our own."""
    conf = api.configuration
    bearer = (conf.api_key or {}).get("BearerToken") or (conf.api_key or {}).get("authorization")
    token = str(bearer).removeprefix("Bearer ").strip() if bearer else None
    if not conf.host:
        raise ValueError("the kubernetes-asyncio configuration names no server")
    return KubeConfig(server=conf.host, ca_file=conf.ssl_ca_cert, cert_file=conf.cert_file, key_file=conf.key_file,
                      insecure=not conf.verify_ssl, credentials=Credentials(token=token))


async def install_crds_async(api: client.ApiClient, docs: Iterable[dict[str, Any]], timeout: float = 60.0) -> None:
    """:func:`tools.crds.install_crds` as the user of a kubernetes-asyncio ``api`` (left open for the caller)."""
    async with KubeClient(kube_config_of(api)) as kc:
        await tools_install_crds(kc, docs, timeout)


def install_crds(kubeconfig: Path, docs: Iterable[dict[str, Any]], timeout: float = 60.0) -> None:
    """Synchronous :func:`install_crds_async`, safe to call from sync code or inside a running loop."""
    docs = list(docs)
    error: list[BaseException] = []

    async def run() -> None:
        async with await KubeClient.from_kubeconfig(kubeconfig) as kc:
            await tools_install_crds(kc, docs, timeout)

    def target() -> None:
        try:
            asyncio.run(run())
        except BaseException as err:
            error.append(err)

    thread = threading.Thread(target=target, name="install-crds")
    thread.start()
    thread.join()
    if error:
        raise error[0]
