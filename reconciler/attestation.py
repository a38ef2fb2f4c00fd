"""``status.attestation`` for the Running → Attested step — spec/process-reconciler.md §2.3.5, §9;
process-crd.md §11.

artifactHash over the Process's flux refs (§9.2), intentHash over the whole ``spec.intent``
(§9.3), no controlHash (§9.4), generation chained to the previous root, composedRoot from
:func:`shared.domain.identity.compose_root`. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from reconciler.decision import ChildRef
from reconciler.render import child_ref, is_flux_resource
from shared.domain.api.codec import to_wire
from shared.domain.api.process import FluxResourceRef, Process, ProcessAttestation
from shared.domain.identity import artifact_hash, attest, intent_hash

__all__ = ["artifact_hash_of", "attest_process", "attestation_patch"]


def artifact_hash_of(children: Iterable[dict[str, Any] | ChildRef | FluxResourceRef]) -> str:
    """§9.2 over the Flux children in order (routing objects do not count, §2.3.3 step 4).

    Accepts rendered documents, :class:`ChildRef` or ``status.fluxResources`` rows; ``""``
    when there are none.
    """
    refs: list[FluxResourceRef] = []
    for item in children:
        if isinstance(item, FluxResourceRef):
            refs.append(item)
            continue
        ref = item if isinstance(item, ChildRef) else child_ref(item)
        if is_flux_resource(ref):
            refs.append(
                FluxResourceRef(api_version=ref.api_version, kind=ref.kind, name=ref.name, namespace=ref.namespace)
            )
    return artifact_hash(refs)


def attest_process(
    process: Process,
    *,
    now: datetime,
    children: Sequence[dict[str, Any] | ChildRef | FluxResourceRef] | None = None,
) -> ProcessAttestation:
    """The next ``status.attestation`` for ``process`` (§2.3.5).

    ``children`` defaults to ``status.fluxResources`` (the reference's input). Generation 0 with
    no previousRoot when status has no attestation; otherwise previous + 1 chained on the
    previous composedRoot (§9.4).
    """
    status = process.status
    if children is None:
        children = list(status.flux_resources) if status is not None else []
    return attest(
        artifact=artifact_hash_of(children),
        control=None,
        intent=intent_hash(process.spec.intent),
        previous=status.attestation if status is not None else None,
        now=now,
    )


def attestation_patch(attestation: ProcessAttestation) -> dict[str, Any]:
    """The wire object for the status merge patch (§9.4): absent ``controlHash`` /
    ``previousRoot`` are left out, not nulled."""
    wire: dict[str, Any] = to_wire(attestation)
    return wire
