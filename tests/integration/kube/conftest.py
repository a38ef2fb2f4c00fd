"""Fixtures for controller-runtime tests: a private control plane tests may restart or pause."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
import pytest

from shared.kube.client import NAMESPACES, KubeClient
from shared.kube.meta import ObjectMeta
from tools.controlplane import LocalControlPlane


class ConfigMap(msgspec.Struct):
    """The ConfigMap fields these tests read."""

    metadata: ObjectMeta
    data: dict[str, str] = {}


@pytest.fixture(scope="module")
def private_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """etcd + kube-apiserver of this module's own, so restarts and pauses disturb no other test."""
    plane = LocalControlPlane(controller_manager=False, work_dir=Path(tmp_path_factory.mktemp("plane")))
    plane.start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture
async def kclient(private_plane: LocalControlPlane) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_kubeconfig(private_plane.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


_counter = iter(range(1_000_000))


@pytest.fixture
async def ns(kclient: KubeClient) -> str:
    name = f"inf-{next(_counter)}"
    await kclient.create(NAMESPACES, {"metadata": {"name": name}})
    return name
