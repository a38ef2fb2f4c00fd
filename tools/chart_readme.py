"""Write the "Values" table of each controller chart's README.md from its values.yaml.

Usage: ``python -m tools.chart_readme [--check]``

Every leaf of values.yaml (a scalar, a list or an empty map) gets one row: its dotted key, its
type, its default and the ``# --`` comment above it (or above its nearest commented parent). The
table sits between ``<!-- values:begin -->`` and ``<!-- values:end -->``; the rest of the README is
hand-written. ``--check`` writes nothing and exits 1 when a README's table is stale.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tools.generated import generator_main

ROOT = Path(__file__).resolve().parents[1]
CHARTS = ("tatara-reconciler", "tatara-pool-reconciler")
BEGIN, END = "<!-- values:begin -->", "<!-- values:end -->"
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_]+):")


def comments(values_text: str) -> dict[str, str]:
    """``{dotted key: text}`` of every ``# -- text`` comment directly above a key."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    for line in values_text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped.removeprefix("# --").strip()]
            continue
        if stripped.startswith("#") and pending:
            pending.append(stripped.lstrip("#").strip())
            continue
        match = _KEY.match(line)
        if match is None:
            pending = [] if not stripped.startswith("-") else pending
            continue
        indent = len(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group(2)))
        if pending:
            out[".".join(k for _, k in stack)] = " ".join(pending)
        pending = []
    return out


def leaves(values: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted key, default)`` of every leaf, in file order."""
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, values


def _type(value: Any) -> str:
    return {bool: "bool", int: "int", float: "number", str: "string", list: "list", dict: "map"}.get(
        type(value), "any")


def _describe(key: str, notes: dict[str, str]) -> str:
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        text = notes.get(".".join(parts[:n]))
        if text:
            return text if n == len(parts) else f"({'.'.join(parts[:n])}) {text}"
    return ""


def table(values_text: str) -> str:
    notes = comments(values_text)
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for key, default in leaves(yaml.safe_load(values_text)):
        shown = json.dumps(default).replace("|", "\\|")
        description = _describe(key, notes).replace("|", "\\|")
        rows.append(f"| `{key}` | {_type(default)} | `{shown}` | {description} |")
    return "\n".join(rows)


def render(readme: str, values_text: str) -> str:
    """``readme`` with its values table replaced (appended under ``## Values`` when absent)."""
    block = f"{BEGIN}\n{table(values_text)}\n{END}"
    if BEGIN in readme and END in readme:
        head, rest = readme.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    return readme.rstrip("\n") + f"\n\n## Values\n\n{block}\n"


def readmes() -> dict[Path, str]:
    """``{README path: its text with a current values table}`` of every chart."""
    out = {}
    for chart in CHARTS:
        readme_path = ROOT / "charts" / chart / "README.md"
        readme = readme_path.read_text() if readme_path.is_file() else f"# {chart}\n"
        out[readme_path] = render(readme, (ROOT / "charts" / chart / "values.yaml").read_text())
    return out


def main(argv: list[str] | None = None) -> int:
    return generator_main("python -m tools.chart_readme", __doc__, readmes, argv)


if __name__ == "__main__":
    sys.exit(main())
