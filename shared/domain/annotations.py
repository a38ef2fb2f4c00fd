"""Every ``tatara.pleme.io/...`` annotation key the two controllers read or write.

The keys, where they go and their values: docs/wire-format.md#annotations. Each key is
defined here once; a key that is also used as a label is re-exported by
:mod:`shared.domain.labels`, never re-spelled.

Also here: the value format shared by several keys (the ``<namespace>/<name>``
qualified reference).
"""

from typing import Final

from shared.domain.group import key

# ── keys stamped by the Process reconciler on the objects it applies ─────────

MANAGED_BY: Final = key("managed-by")
"""Stamped by the Process reconciler on every object it applies (Flux objects,
Ingress, DNSEndpoint); also a label on the routing objects (Ingress, DNSEndpoint).
Value: the field-manager name, ``tatara-reconciler``."""

PROCESS: Final = key("process")
"""Stamped by the Process reconciler on every object a Process owns; read by the
reference's export worker on receipt ConfigMaps. Value: the owning Process as
``<namespace>/<name>`` (see :func:`qualified_ref`)."""

PID: Final = key("pid")
"""Stamped by the Process reconciler on owned objects once ``status.pid`` is set.
Value: the hierarchical PID path, e.g. ``seph.1.3``."""

CONTENT_HASH: Final = key("content-hash")
"""Stamped by the Process reconciler on owned objects once ``status.identity`` is set.
Value: the 26-character lower-case Crockford base32 content hash."""

GENERATION: Final = key("generation")
"""Stamped by the Process reconciler on owned objects once ``status.attestation`` is
set. Value: the attestation generation in decimal."""

ATTESTATION_ROOT: Final = key("attestation-root")
"""Stamped by the Process reconciler on owned objects once ``status.attestation`` is
set. Value: the composed attestation root, lower-case hex."""

# ── keys on the Process itself ──────────────────────────────────────────────

SIGNAL: Final = key("signal")
"""Written on a Process by an operator or tool (``kubectl annotate``); read and then
removed by the Process reconciler. Value: a signal name, long or short form
(``SIGHUP`` / ``HUP``), docs/wire-format.md#signal-spellings."""

RELEASED_FROM: Final = key("released-from")
"""Stamped on a Process by the Process reconciler when it enters ``Releasing``.
Value: ``Attested`` or ``Failed``, the phase it left; on read, anything other than
``Failed`` (or no value) counts as ``Attested``."""

# ── keys written by the Process reconciler's renderers ──────────────────────

ROUTING_FORM: Final = key("routing-form")
"""Stamped by the Process reconciler on each routing object it renders: annotation and
label on Ingress, label on DNSEndpoint. Value: ``stable`` or ``instance``."""

APP: Final = key("app")
"""Stamped by the Process reconciler as a label on each routing object (Ingress,
DNSEndpoint). Value: the ``app`` of the ``routing.hostnames`` entry it serves."""

ENCAPSULATION_MODE: Final = key("encapsulation-mode")
"""Stamped by the Process reconciler on every rendered resource of a Process whose
``encapsulates.mode`` is ``Adopt``. Value: the mode's wire spelling, ``Adopt``."""

ADOPTED_RELEASE: Final = key("adopted-release")
"""Stamped by the Process reconciler, next to :data:`ENCAPSULATION_MODE`, when the
Process adopts an existing HelmRelease. Value: that release as
``<namespace>/<releaseName>`` (see :func:`qualified_ref`)."""

# ── keys written by the pool reconciler on member Processes ─────────────────

POOL: Final = key("pool")
"""Stamped by the pool reconciler on every member Process it creates; membership is
decided by this key alone. Value: the owning EphemeralPool's ``metadata.name``."""

POOL_SLOT: Final = key("pool-slot")
"""Stamped by the pool reconciler next to :data:`POOL`. Value: the member's
zero-based slot index in plain decimal (``"0"``, ``"5"``)."""

REQUESTOR: Final = key("requestor")
"""Stamped by the allocation controller on a member Process when it binds an
EphemeralAllocation to it. Value: the allocation as ``<namespace>/<name>``."""

ALLOCATION: Final = key("allocation")
"""Stamped by the allocation controller next to :data:`REQUESTOR`. Value: the bare
EphemeralAllocation name, no namespace."""

REQUESTOR_KIND: Final = key("requestor-kind")
"""Stamped by the allocation controller next to :data:`REQUESTOR`. Value: the
allocation's ``spec.requestor.kind`` verbatim (e.g. ``github-pr``)."""

RETURN_TRIGGER: Final = key("return-trigger")
"""Stamped by the allocation controller on a bound member Process when its allocation
is released, asking the pool reconciler to take the return path; stripped (merge
patch ``null``) once handled. Value: :data:`RETURN_TRIGGER_SET`."""

RETURN_TRIGGER_SET: Final = "true"
"""The only value :data:`RETURN_TRIGGER` carries."""


def qualified_ref(namespace: str, name: str) -> str:
    """Compose the ``<namespace>/<name>`` reference used as the value of
    :data:`PROCESS`, :data:`REQUESTOR` and :data:`ADOPTED_RELEASE`.

    Raises ``ValueError`` when either part is empty or contains ``/``.
    """
    for part in (namespace, name):
        if not part or "/" in part:
            raise ValueError(f"invalid reference part: {part!r}")
    return f"{namespace}/{name}"


def split_qualified_ref(ref: str) -> tuple[str, str]:
    """Split a ``<namespace>/<name>`` reference into ``(namespace, name)``.

    Raises ``ValueError`` unless ``ref`` has exactly one ``/`` with text on both sides.
    """
    namespace, sep, name = ref.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(f"not a <namespace>/<name> reference: {ref!r}")
    return namespace, name
