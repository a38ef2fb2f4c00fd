"""Test helpers around the real local API server: CRD install, waiting, YAML loading."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from shared.kube.client import Resource
from tools.crds import THIRD_PARTY_CRDS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

T = TypeVar("T")


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


def third_party_crds() -> list[dict[str, Any]]:
    """The Flux (HelmRelease, Kustomization, OCIRepository, GitRepository, HelmRepository) and DNSEndpoint CRDs."""
    return [doc for path in sorted(THIRD_PARTY_CRDS.glob("*.yaml")) for doc in load_yaml_docs(path)]


async def api_client(kubeconfig: Path) -> client.ApiClient:
    """A kubernetes-asyncio ApiClient for ``kubeconfig``; the caller closes it."""
    return await config.new_client_from_config(config_file=str(kubeconfig))


async def wait_for(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something other than None/False; return that.

    Raises:
        TimeoutError: ``timeout`` seconds passed first (message names ``what``).
    """
    deadline = time.monotonic() + timeout
    while True:
        result = await probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)


async def install_crds_async(api: client.ApiClient, docs: Iterable[dict[str, Any]], timeout: float = 60.0) -> None:
    """Create (or replace) each CRD in ``docs`` and wait until all are ``Established``."""
    docs = list(docs)
    ext = client.ApiextensionsV1Api(api)
    names = []
    for doc in docs:
        name = doc["metadata"]["name"]
        names.append(name)
        try:
            await ext.create_custom_resource_definition(doc)
        except ApiException as err:
            if err.status != 409:
                raise
            current = await ext.read_custom_resource_definition(name)
            body = {**doc, "metadata": {**doc["metadata"], "resourceVersion": current.metadata.resource_version}}
            await ext.replace_custom_resource_definition(name, body)

    for name in names:
        async def established(name: str = name) -> bool:
            crd = await ext.read_custom_resource_definition(name)
            conditions = (crd.status.conditions if crd.status else None) or []
            return any(c.type == "Established" and c.status == "True" for c in conditions)

        await wait_for(established, timeout=timeout, what=f"CRD {name} Established")

    # Right after Established the API server may still answer 429 "storage is (re)initializing".
    custom = client.CustomObjectsApi(api)
    for doc in docs:
        spec = doc["spec"]
        version = next(v["name"] for v in spec["versions"] if v.get("served", True))

        async def listable(spec: dict[str, Any] = spec, version: str = version) -> bool:
            try:
                await custom.list_cluster_custom_object(spec["group"], version, spec["names"]["plural"], limit=1)
            except ApiException as err:
                if err.status in (404, 429, 503):
                    return False
                raise
            return True

        await wait_for(listable, timeout=timeout, what=f"{spec['names']['plural']} to be listable")


def install_crds(kubeconfig: Path, docs: Iterable[dict[str, Any]], timeout: float = 60.0) -> None:
    """Synchronous :func:`install_crds_async`, safe to call from sync code or inside a running loop."""
    docs = list(docs)
    error: list[BaseException] = []

    async def run() -> None:
        api = await api_client(kubeconfig)
        try:
            await install_crds_async(api, docs, timeout)
        finally:
            await api.close()

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
