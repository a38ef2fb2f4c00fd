"""The one ``[--check]`` shape of the checked-in generators (tools/generated.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.generated import generator_main, write_or_check


def test_write_creates_missing_folders_and_files(tmp_path: Path) -> None:
    target = tmp_path / "charts" / "c" / "dashboards" / "d.json"
    assert write_or_check({target: "{}\n"}, check=False, command="gen") == 0
    assert target.read_text() == "{}\n"


def test_check_writes_nothing_and_names_each_missing_or_changed_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    current, changed, missing = tmp_path / "current", tmp_path / "changed", tmp_path / "missing"
    current.write_text("same\n")
    changed.write_text("old\n")
    files = {current: "same\n", changed: "new\n", missing: "new\n"}
    assert write_or_check(files, check=True, command="python -m tools.gen") == 1
    assert changed.read_text() == "old\n"
    assert not missing.exists()
    assert capsys.readouterr().err.splitlines() == [
        f"{changed} is stale; run `python -m tools.gen`",
        f"{missing} is stale; run `python -m tools.gen`",
    ]


def test_check_of_current_files_exits_zero_silently(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").write_text("a")
    assert generator_main("gen", None, lambda: {tmp_path / "a": "a"}, ["--check"]) == 0
    assert capsys.readouterr().err == ""
