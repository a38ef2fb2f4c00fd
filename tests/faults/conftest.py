"""The fault-injection tier (``faults`` marker): a private control plane the tests may restart and pause,
the reconcilers as real subprocesses, and one seed for every random choice.

The seed is ``$TATARA_FAULT_SEED`` when set, else drawn at random; it is printed at the start of every
test (pytest shows it with a failure) so ``TATARA_FAULT_SEED=<seed> pytest tests/faults`` repeats a run.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from shared.kube.client import NAMESPACES, KubeClient
from tests.faults.harness import Binaries
from tests.support.kube import install_crds, load_yaml_docs, third_party_crds
from tools.controlplane import LocalControlPlane

CHARTS = Path(__file__).resolve().parents[2] / "charts"

SEED_VARIABLE = "TATARA_FAULT_SEED"
SEED = int(os.environ[SEED_VARIABLE]) if os.environ.get(SEED_VARIABLE) else random.SystemRandom().randrange(2**32)
"""The run's seed (one per pytest run)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under tests/faults as ``faults``, and ``integration`` (it needs a control plane)."""
    for item in items:
        if "/faults/" in str(item.path):
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """This test's random source, derived from the run's seed and the test's name."""
    print(f"fault seed {SEED} (repeat with {SEED_VARIABLE}={SEED})")
    return random.Random(f"{SEED}:{request.node.name}")


@contextmanager
def private_plane(tmp_path_factory: pytest.TempPathFactory, **options: Any) -> Iterator[LocalControlPlane]:
    """etcd + kube-apiserver of a module's own (no controller manager), with every CRD installed; ``options`` go
    to :class:`LocalControlPlane` (e.g. ``audit=True, audit_policy=...``)."""
    private = LocalControlPlane(controller_manager=False, work_dir=Path(tmp_path_factory.mktemp("plane")), **options)
    private.start()
    try:
        tatara = [doc for path in sorted(CHARTS.glob("*/crds/*.yaml")) for doc in load_yaml_docs(path)]
        install_crds(private.kubeconfig, [*tatara, *third_party_crds()])
        yield private
    finally:
        private.stop()


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalControlPlane]:
    """This module's :func:`private_plane` (a module may override the fixture with a plane of other options)."""
    with private_plane(tmp_path_factory) as private:
        yield private


@pytest.fixture
async def admin(plane: LocalControlPlane) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(plane.kubeconfig) as client:
        yield client


_counter = iter(range(1_000_000))


@pytest.fixture
async def ns(admin: KubeClient) -> str:
    name = f"fault-{next(_counter)}"
    await admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture
def binaries(plane: LocalControlPlane, ns: str, tmp_path: Path) -> Iterator[Binaries]:
    running = Binaries(plane.kubeconfig, ns, tmp_path)
    try:
        yield running
    finally:
        running.stop_all()
