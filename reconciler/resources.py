"""The API resources the Process reconciler reads and writes (process-reconciler §0.3)."""

from __future__ import annotations

from typing import Final

from shared.group import GROUP, VERSION
from shared.kube.client import Resource

__all__ = ["PROCESSES", "PROCESS_TABLES"]

PROCESSES: Final = Resource(GROUP, VERSION, "processes", "Process")
"""Namespaced ``processes.tatara.pleme.io`` (short name ``proc``)."""

PROCESS_TABLES: Final = Resource(GROUP, VERSION, "processtables", "ProcessTable", namespaced=False)
"""Cluster-scoped ``processtables.tatara.pleme.io`` (short name ``pt``); the singleton is named ``proc``."""
