"""Manager.informer shares one informer per (resource, namespace, selector), and refuses to hand it out
decoded another way."""

from __future__ import annotations

import msgspec
import pytest

from shared.kube.client import CONFIG_MAPS, KubeClient
from shared.kube.manager import Manager
from tests.integration.kube.conftest import ConfigMap

pytestmark = pytest.mark.anyio


class OtherView(msgspec.Struct):
    data: dict[str, str] = {}


async def test_one_informer_per_key_and_no_second_decoding(kclient: KubeClient) -> None:
    manager = Manager(kclient, handle_signals=False)
    first = manager.informer(CONFIG_MAPS, ConfigMap, namespace="a")
    assert manager.informer(CONFIG_MAPS, ConfigMap, namespace="a") is first
    assert manager.informer(CONFIG_MAPS, ConfigMap, namespace="b") is not first
    with pytest.raises(ValueError, match="another decode type or options"):
        manager.informer(CONFIG_MAPS, OtherView, namespace="a")
    with pytest.raises(ValueError, match="another decode type or options"):
        manager.informer(CONFIG_MAPS, ConfigMap, namespace="a", page_size=10)
