"""Write the reason tables of docs/behaviour.md from the reconcilers' closed sets of reasons.

Usage: ``python -m tools.gen_reasons [--check]``

One table per set — :class:`reconciler.reasons.Reason` between ``<!-- reasons:begin -->`` and
``<!-- reasons:end -->``, :class:`pool_reconciler.reasons.PoolReason` between
``<!-- pool-reasons:begin -->`` and ``<!-- pool-reasons:end -->`` — one row per member in declaration
order: its wire spelling, where it is written and its meaning. The rest of behaviour.md is
hand-written. ``--check`` writes nothing and exits 1 when a table is stale.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from pool_reconciler.reasons import PoolReason
from reconciler.reasons import Reason
from shared.domain.reasons import ReasonSet
from tools.generated import ROOT, generator_main

BEHAVIOUR = ROOT / "docs" / "behaviour.md"
TABLES: tuple[tuple[str, type[ReasonSet]], ...] = (("reasons", Reason), ("pool-reasons", PoolReason))
"""(marker name, set) of each generated table."""


def table(reasons: Iterable[ReasonSet]) -> str:
    """The Markdown table of ``reasons``: ``| reason | written as | meaning |``."""
    rows = ["| reason | written as | meaning |", "|---|---|---|"]
    for reason in reasons:
        meaning = reason.description.replace("|", "\\|")
        rows.append(f"| `{reason.value}` | {reason.on.label} | {meaning} |")
    return "\n".join(rows)


def render(text: str) -> str:
    """``text`` with every table of :data:`TABLES` replaced between its markers.

    Raises:
        ValueError: a table's markers are missing.
    """
    for name, reasons in TABLES:
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        if begin not in text or end not in text:
            raise ValueError(f"{BEHAVIOUR.name} has no {begin} … {end}")
        head, rest = text.split(begin, 1)
        text = f"{head}{begin}\n{table(reasons)}\n{end}{rest.split(end, 1)[1]}"
    return text


def files() -> dict[Path, str]:
    return {BEHAVIOUR: render(BEHAVIOUR.read_text())}


def main(argv: list[str] | None = None) -> int:
    return generator_main("python -m tools.gen_reasons", __doc__, files, argv)


if __name__ == "__main__":
    sys.exit(main())
