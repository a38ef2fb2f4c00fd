"""Print the path of the pinned ``kubeconform`` binary, building it from its Go module on first use.

Usage: ``python -m tools.kubeconform_bin`` (see :mod:`tools.controlplane.kubeconform`).
"""

from __future__ import annotations

import sys

from tools.controlplane.kubeconform import main

if __name__ == "__main__":
    sys.exit(main())
