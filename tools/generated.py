"""Files generated from code and checked in (chart READMEs' values tables, values schemas, dashboards):
one ``[--check]`` command shape for every generator.

Without ``--check`` each file is written; with it nothing is written and the command exits 1 naming each
file that is missing or differs from what the generator produces (a unit test runs every ``--check``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def write_or_check(files: Mapping[Path, str], *, check: bool, command: str) -> int:
    """Write each ``{path: text}``, or with ``check`` only compare; 1 when a file is stale, else 0."""
    stale = []
    for path, text in files.items():
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in stale:
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        print(f"{shown} is stale; run `{command}`", file=sys.stderr)
    return 1 if stale else 0


def generator_main(command: str, description: str | None, generate: Callable[[], Mapping[Path, str]],
                   argv: Sequence[str] | None = None) -> int:
    """The command line of a generator: ``command [--check]`` over the files ``generate()`` returns."""
    parser = argparse.ArgumentParser(prog=command, description=description)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming each stale file")
    args = parser.parse_args(argv)
    return write_or_check(generate(), check=args.check, command=command)
