"""The PromQL expressions of the charts' Grafana dashboards and the metric names they read.

Expressions are parsed with ``promql_parser`` (the Python binding of the GreptimeTeam ``promql-parser``
crate); Grafana's ``$__*`` interval variables are replaced by a literal duration first, label values with
``$var`` are ordinary strings to the parser. Variable queries ``label_values(<selector>, label)`` are
Grafana syntax, not PromQL: their selector is parsed on its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser

ROOT = Path(__file__).resolve().parents[2]
_INTERVALS = re.compile(r"\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$", re.S)
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def dashboard_files() -> list[Path]:
    return sorted(ROOT.glob("charts/*/dashboards/*.json"))


def expressions(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(where, PromQL)`` of every panel target and every query variable of ``dashboard``."""
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            yield f"panel {panel.get('title')!r} {target.get('refId')}", target["expr"]
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"]
        text = query["query"] if isinstance(query, dict) else query
        match = _LABEL_VALUES.match(text)
        yield f"variable ${variable['name']}", match.group(1) if match else text


def exemplar_expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(panel title, PromQL)`` of every target that asks Grafana for exemplars (``"exemplar": true``):
    the expressions Grafana sends to Prometheus's ``/api/v1/query_exemplars``."""
    return [(panel["title"], target["expr"]) for panel in dashboard.get("panels", [])
            for target in panel.get("targets", []) if target.get("exemplar")]


def metric_names(expr: str) -> set[str]:
    """Names of every metric a PromQL expression selects. Raises ValueError when it does not parse, or when a
    selector has no literal metric name."""
    ast = promql_parser.parse(_INTERVALS.sub("5m", expr))
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            name = node.name
            if not name:
                raise ValueError(f"selector without a literal metric name in {expr!r}")
            names.add(name)

    promql_parser.walk(ast, pre_visit=visit)
    return names


def exported_types(exposition: str) -> dict[str, str]:
    """``{name: type}`` of every family in a text exposition (``# TYPE`` lines, so a family without samples
    yet counts), plus every sample name seen (type ``sample``)."""
    types: dict[str, str] = {}
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            types[name] = kind.strip()
        elif line and not line.startswith("#"):
            types.setdefault(re.split(r"[{ ]", line, maxsplit=1)[0], "sample")
    return types


def exported(name: str, types: dict[str, str]) -> bool:
    """Whether a query's metric name is exported: as a family or sample, or as the ``_bucket``/``_sum``/
    ``_count`` series of an exported histogram."""
    if name in types:
        return True
    return any(name.endswith(suffix) and types.get(name.removesuffix(suffix)) == "histogram"
               for suffix in HISTOGRAM_SUFFIXES)


def load(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text())
    return result
