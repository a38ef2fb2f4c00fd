"""Print the path of the pinned ``helm`` binary, building it from its Go module on first use.

Usage: ``python -m tools.helm_bin`` (see :mod:`tools.controlplane.helm`).
"""

from __future__ import annotations

import sys

from tools.controlplane.helm import main

if __name__ == "__main__":
    sys.exit(main())
