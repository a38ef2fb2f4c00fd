"""Label keys (and fixed label values) the tatara controllers set or select on.

Keys that double as annotations are defined in :mod:`shared.domain.annotations` and only
named here; label-only keys are defined here. Where each goes: docs/wire-format.md#labels.
"""

from typing import Final

from shared.domain import annotations
from shared.domain.group import key

MANAGED_BY: Final = annotations.MANAGED_BY
"""Label on the Ingress, DNSEndpoint and export Job objects the Process reconciler renders."""

PROCESS: Final = annotations.PROCESS
"""Label on export Jobs (and their pod template), Ingress and DNSEndpoint naming the
owning Process. The reference writes ``<namespace>/<name>`` here, which is not a legal
label value; tatara writes ``<namespace>.<name>`` (docs/divergences.md#render-process-label)."""

ROUTING_FORM: Final = annotations.ROUTING_FORM
"""Label on routing objects: ``stable`` or ``instance``."""

APP: Final = annotations.APP
"""Label on routing objects: the hostname entry's ``app``."""

ROLE: Final = key("role")
"""Label of export Jobs and their pod template; the reconciler's Job informer selects on it. Value:
:data:`ROLE_EXPORT`."""

ROLE_EXPORT: Final = "export"
"""The :data:`ROLE` value of export-worker Jobs."""

EXPORT_INDEX: Final = key("export-index")
"""Label of an export Job and its pod template. Value: the export's index in the full
``lifetime.ephemeral.exports`` list, decimal."""

RECEIPT: Final = key("receipt")
"""Set by the closed-loop probe on receipt ConfigMaps; no tatara component reads it.
The reference's value ``tatara-receipt/v1`` is not a legal label value (it contains
``/``); the writer chooses a legal spelling."""

POINT_TYPE: Final = key("point-type")
"""Written by users on Processes (upstream examples); no controller reads it. Value:
the classification ``pointType``."""

SUBSTRATE: Final = key("substrate")
"""Written by users on Processes (upstream examples); no controller reads it. Value:
the classification ``substrate``."""
