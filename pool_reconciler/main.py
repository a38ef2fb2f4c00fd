"""Entry point of the `tatara-pool-reconciler` binary (the EphemeralPool + EphemeralAllocation controllers)."""

from __future__ import annotations

import argparse
import sys

from shared import __version__


def main(argv: list[str] | None = None) -> int:
    """Parse arguments; for now print the version and exit 0."""
    parser = argparse.ArgumentParser(prog="tatara-pool-reconciler", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tatara-pool-reconciler {__version__}")
    parser.parse_args(argv)
    print(f"tatara-pool-reconciler {__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
