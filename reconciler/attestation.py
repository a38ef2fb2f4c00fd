"""``status.attestation`` for the Running → Attested step (docs/behaviour.md#attestation).

artifactHash over the Process's Flux children, intentHash over the whole ``spec.intent``, no
controlHash, the generation chained to the previous root, composedRoot from
:func:`shared.domain.identity.compose_root` (formulas: docs/wire-format.md#attestation-root). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from reconciler.children import ChildRef, is_flux_resource
from reconciler.render import Manifest, manifest_ref
from shared.domain.api.process import FluxResourceRef, Process, ProcessAttestation
from shared.domain.identity import artifact_hash, attest, intent_hash

__all__ = ["artifact_hash_of", "attest_process"]

Attested = Manifest | ChildRef | FluxResourceRef
"""What an attestation can be computed over: rendered manifests, child refs or ``status.fluxResources`` rows."""


def artifact_hash_of(children: Iterable[Attested]) -> str:
    """The artifact hash over the Flux children in order (routing objects do not count); ``""`` when
    there are none."""
    refs: list[FluxResourceRef] = []
    for item in children:
        if isinstance(item, FluxResourceRef):
            refs.append(item)
            continue
        ref = item if isinstance(item, ChildRef) else manifest_ref(item)
        if is_flux_resource(ref):
            refs.append(
                FluxResourceRef(api_version=ref.api_version, kind=ref.kind, name=ref.name, namespace=ref.namespace)
            )
    return artifact_hash(refs)


def attest_process(process: Process, *, now: datetime,
                   children: Sequence[Attested] | None = None) -> ProcessAttestation:
    """The next ``status.attestation`` for ``process``.

    ``children`` defaults to ``status.fluxResources`` (the reference's input). Generation 0 with
    no previousRoot when status has no attestation; otherwise previous + 1 chained on the
    previous composedRoot.
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
