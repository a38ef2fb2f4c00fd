"""Write the tatara CRDs, generated from the msgspec models, into the charts' ``crds/`` folders.

- ``charts/tatara-reconciler/crds/{processes,processtables}.yaml``
- ``charts/tatara-pool-reconciler/crds/{ephemeralpools,ephemeralallocations}.yaml``

Usage: ``python -m tools.gen_crds [--check] [--root DIR]``

``--check`` writes nothing; it exits 1 and names each file that is missing or differs from
what the models generate (with a short unified diff), 0 when all match.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.crd import generated_files

ROOT = Path(__file__).resolve().parents[1]


def drift(root: Path) -> dict[str, str]:
    """``{relative path: unified diff}`` of every CRD file under ``root`` that differs from
    the generated text (a missing file diffs against empty)."""
    out: dict[str, str] = {}
    for rel, text in generated_files().items():
        path = root / rel
        current = path.read_text() if path.is_file() else ""
        if current != text:
            out[rel] = "".join(
                difflib.unified_diff(
                    current.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=f"{rel} (checked in)",
                    tofile=f"{rel} (generated)",
                    n=2,
                )
            )
    return out


def write(root: Path) -> list[str]:
    """Write every generated CRD file under ``root``; return the paths that changed."""
    changed = []
    for rel, text in generated_files().items():
        path = root / rel
        if path.is_file() and path.read_text() == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        changed.append(rel)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gen_crds", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a checked-in CRD differs; write nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help="project root (default: this checkout)")
    args = parser.parse_args(argv)
    if args.check:
        diffs = drift(args.root)
        for rel, diff in diffs.items():
            print(f"CRD drift: {rel}", file=sys.stderr)
            print(diff[:4000], file=sys.stderr)
        if diffs:
            print("run `python -m tools.gen_crds` and commit the result", file=sys.stderr)
            return 1
        return 0
    for rel in write(args.root):
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
