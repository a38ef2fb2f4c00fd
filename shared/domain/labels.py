"""Label keys (and fixed label values) the tatara controllers set or select on.

Keys that double as annotations are defined in :mod:`shared.domain.annotations` and only
named here; label-only keys are defined here. Sources: process-crd.md §13,
lifetime-pool-allocation.md §13.
"""

from typing import Final

from shared.domain import annotations
from shared.domain.group import key

MANAGED_BY: Final = annotations.MANAGED_BY
"""Label on export Jobs, Ingress and DNSEndpoint the Process reconciler creates."""

PROCESS: Final = annotations.PROCESS
"""Label on export Jobs (and their pod template), Ingress and DNSEndpoint naming the
owning Process. The reference writes ``<namespace>/<name>`` here, which is not a legal
label value; the value format is the reconciler's to choose (DESIGN §2, decision 3)."""

ROUTING_FORM: Final = annotations.ROUTING_FORM
"""Label on routing edges: ``stable`` or ``instance``."""

APP: Final = annotations.APP
"""Label on routing edges: the hostname entry's ``app``."""

ROLE: Final = key("role")
"""Set by the Process reconciler on export Jobs and their pod template; part of the
export-Job selector. Value: :data:`ROLE_EXPORT`."""

ROLE_EXPORT: Final = "export"
"""The :data:`ROLE` value of export-worker Jobs."""

EXPORT_INDEX: Final = key("export-index")
"""Set by the Process reconciler on an export Job, its pod template and its receipt
ConfigMap. Value: the export's index in ``lifetime.ephemeral.exports``, decimal."""

RECEIPT: Final = key("receipt")
"""Set by the closed-loop probe on receipt ConfigMaps; the reconciler selects on it.
The reference's value ``tatara-receipt/v1`` is not a legal label value (it contains
``/``); the writer chooses a legal spelling."""

POINT_TYPE: Final = key("point-type")
"""Written by users on Processes (upstream examples); no controller reads it. Value:
the classification ``pointType``."""

SUBSTRATE: Final = key("substrate")
"""Written by users on Processes (upstream examples); no controller reads it. Value:
the classification ``substrate``."""
