"""Block reservation of PIDs (docs/architecture.md#one-processtable-many-shards): the pure decisions."""

from __future__ import annotations

import pytest

from reconciler.config import SHARDED_PID_BLOCK_SIZE, parse_config, pid_block_size
from reconciler.pid import MAX_SEQUENCE, Block, bump_patch, reserve_block, take_from_block
from shared.domain.api.table import ProcessTable, ProcessTableSpec
from shared.kube.meta import ObjectMeta


@pytest.mark.parametrize(("seq", "size", "end"), [
    (1, 1, 2),
    (1, 32, 33),
    (1000, 0, 1001),  # below 1 counts as 1
    (MAX_SEQUENCE - 10, 32, MAX_SEQUENCE),  # clipped at the u32 max
    (MAX_SEQUENCE - 1, 1, MAX_SEQUENCE),
])
def test_reserve_block(seq: int, size: int, end: int) -> None:
    assert reserve_block(seq, size) == end


@pytest.mark.parametrize(("block", "uid", "taken"), [
    (None, "u", None),
    (Block("u", 5, 8), "u", (5, Block("u", 6, 8))),
    (Block("u", 7, 8), "u", (7, None)),  # the last number uses it up
    (Block("u", 8, 8), "u", None),
    (Block("u", 5, 8), "v", None),  # the table was recreated: the block is dropped
])
def test_take_from_block(block: Block | None, uid: str, taken: tuple[int, Block | None] | None) -> None:
    assert take_from_block(block, uid) == taken


def test_bump_patch_with_a_block_tests_the_same_and_replaces_with_the_end() -> None:
    table = ProcessTable(metadata=ObjectMeta(name="proc", uid="u", generation=3),
                         spec=ProcessTableSpec(next_sequence=10))
    one = bump_patch(table, 10)
    assert one == bump_patch(table, 10, 11)  # block size 1: the wire is unchanged
    block = bump_patch(table, 10, 42)
    assert block[:-1] == one[:-1]
    assert block[-1] == {"op": "replace", "path": "/spec/nextSequence", "value": 42}


@pytest.mark.parametrize(("flag", "sharded", "size"), [
    (0, False, 1),
    (0, True, SHARDED_PID_BLOCK_SIZE),
    (8, False, 8),
    (1, True, 1),
])
def test_pid_block_size(flag: int, sharded: bool, size: int) -> None:
    assert pid_block_size(flag, sharded=sharded) == size


def test_the_flag_reaches_the_config() -> None:
    assert parse_config([], {}).pid_block == 1
    assert parse_config(["--watch-label-selector", "shard=a"], {}).pid_block == SHARDED_PID_BLOCK_SIZE
    assert parse_config([], {"TATARA_PID_BLOCK_SIZE": "16"}).pid_block == 16
