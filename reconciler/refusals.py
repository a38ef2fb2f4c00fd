"""Child writes the API server refuses, surfaced on the Process (docs/behaviour.md#write-failures).

A server-side apply or delete of a child answered 400, 403, 404 or 422, or a child kind the API server
does not serve (its CRD is missing), will not succeed by retrying alone: the executor raises
:class:`WriteRefused`, and :func:`refusal_decision` turns it into what the user sees — ``Stalled=True``
with reason ``WriteRefused`` (or ``KindNotServed``) and a message naming the object and the server's
answer, plus a Warning Event of the same reason (the recorder aggregates repeats). The phase stays;
the reconcile still fails, so the work queue backs off exponentially, and the next write that
succeeds takes the stall off (:func:`is_refusal`).
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.children import ChildRef
from reconciler.conditions import conditions_for
from reconciler.decision import Decision, Observed
from reconciler.reasons import REFUSAL_REASONS, Reason
from reconciler.status_patch import StatusPatch
from reconciler.transitions import observed_generation
from shared.domain.api.process import ProcessCondition
from shared.kube.errors import ApiError
from shared.kube.events import Event

__all__ = ["KIND_NOT_SERVED", "REFUSAL_REASONS", "WRITE_REFUSED", "WriteRefused", "is_refusal", "refusal_decision"]

WRITE_REFUSED = Reason.WRITE_REFUSED
"""Condition / Event reason: the API server answered 400, 403, 404 or 422 to a child write."""

KIND_NOT_SERVED = Reason.KIND_NOT_SERVED
"""Condition / Event reason: discovery lists no such kind (its CRD is not installed)."""



class WriteRefused(ApiError):
    """A child write that retrying alone will not fix.

    Attributes:
        verb: ``apply`` or ``delete``.
        ref: the refused child.
        detail: the API server's message (or discovery's, for a kind not served).
        why: :data:`WRITE_REFUSED` or :data:`KIND_NOT_SERVED`.
    """

    def __init__(self, verb: str, ref: ChildRef, detail: str, *, status: int, why: str) -> None:
        self.verb, self.ref, self.detail, self.why = verb, ref, detail, why
        super().__init__(status, why, self.sentence)

    @property
    def sentence(self) -> str:
        """``<verb> <Kind> <ns>/<name> refused: <detail>`` — the condition and Event message."""
        ref = self.ref
        return f"{self.verb} {ref.kind} {ref.namespace}/{ref.name} refused: {self.detail}"


def is_refusal(conditions: Sequence[ProcessCondition]) -> bool:
    """True when the stored conditions hold a stall written by :func:`refusal_decision`."""
    return any(c.type_ == "Stalled" and c.status == "True" and c.reason in REFUSAL_REASONS for c in conditions)


def refusal_decision(observed: Observed, refused: WriteRefused) -> Decision:
    """Stay in the phase with ``Stalled=True`` (reason ``refused.why``, message ``refused.sentence``),
    ``message`` and ``observedGeneration``, and one Warning Event; no requeue (the failed reconcile is
    retried with the work queue's backoff)."""
    process = observed.process
    previous = process.status.conditions if process.status is not None else []
    conditions = conditions_for(process.phase, process.metadata.generation, observed.now, refused.why,
                                refused.sentence, stalled=True, previous=previous)
    return Decision(
        status=StatusPatch(message=refused.sentence, conditions=conditions,
                           observed_generation=observed_generation(process)),
        events=(Event.warning(refused.why, refused.sentence),),
    )
