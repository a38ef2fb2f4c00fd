"""API endpoints (group/version/plural/kind/scope) of the four tatara kinds, for the client.

The CRD definitions themselves (schemas, columns) are in :mod:`tools.crd`; these are
the request targets both binaries use.
"""

from __future__ import annotations

from typing import Final

from shared.domain.group import GROUP, VERSION
from shared.kube.client import Resource

PROCESSES: Final = Resource(GROUP, VERSION, "processes", "Process")
PROCESS_TABLES: Final = Resource(GROUP, VERSION, "processtables", "ProcessTable", namespaced=False)
EPHEMERAL_POOLS: Final = Resource(GROUP, VERSION, "ephemeralpools", "EphemeralPool")
EPHEMERAL_ALLOCATIONS: Final = Resource(GROUP, VERSION, "ephemeralallocations", "EphemeralAllocation")
