"""A Process's shard label goes on every object it renders, so a Flux shard of the same name reconciles
them (Flux's sharding convention, docs/architecture.md#sharding); an unsharded Process renders none."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from reconciler.render import owned_metadata
from shared.domain.api.process import Process
from shared.domain.sharding import SHARD_KEY
from tests.unit.reconciler.test_render import CFG, FLUX, OCI_APP, ROUTING, UID, make, rendered


def labelled(process: Process, labels: dict[str, str]) -> Process:
    return msgspec.structs.replace(process, metadata=msgspec.structs.replace(process.metadata, labels=labels))


@pytest.mark.parametrize("spec", [{"intent": FLUX, "routing": ROUTING}, {"intent": OCI_APP}],
                         ids=["kustomization and routing", "oci helm release"])
@pytest.mark.parametrize(("labels", "expected"), [
    ({SHARD_KEY: "shard1", "team": "a"}, {SHARD_KEY: "shard1"}),
    ({"team": "a"}, {}),
], ids=["on shard1", "unsharded"])
def test_every_child_carries_the_process_shard_and_no_other_process_label(
        spec: dict[str, Any], labels: dict[str, str], expected: dict[str, str]) -> None:
    docs = rendered(labelled(make(spec, name="demo-prod"), labels), owner_uid=UID, routing=CFG)
    assert docs, "something is rendered"
    for doc in docs:
        carried = doc["metadata"].get("labels", {})
        assert {k: v for k, v in carried.items() if k in (SHARD_KEY, "team")} == expected, doc["kind"]


def test_an_export_job_is_on_the_process_shard_too() -> None:
    meta = owned_metadata(labelled(make({"intent": FLUX}), {SHARD_KEY: "s2"}), UID, "job", labels={"role": "x"})
    assert meta.labels == {"role": "x", SHARD_KEY: "s2"}
