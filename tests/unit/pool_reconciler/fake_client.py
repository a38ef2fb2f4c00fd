"""The pool reconciler tests' API server: the in-memory one of tests/support/fake_api.py, holding the objects a
test stores, with the writes read back in order as ``(verb, <plural>/<name>[/<subresource>])``."""

from __future__ import annotations

from typing import Any

from shared.domain.api.codec import to_wire
from shared.domain.resources import EPHEMERAL_ALLOCATIONS, EPHEMERAL_POOLS, JOBS, PROCESSES
from shared.kube.client import EVENTS
from shared.kube.errors import ApiError
from tests.support.fake_api import FakeApi

KINDS = (PROCESSES, EPHEMERAL_POOLS, EPHEMERAL_ALLOCATIONS, JOBS, EVENTS)
RESOURCES = {r.plural: r for r in KINDS}
BY_KIND = {r.kind: r for r in KINDS}
READS = ("get", "list", "watch")


class FakeClient(FakeApi):
    """``objects``: ``<plural>/<name>`` → the stored document (its namespace and resourceVersion its own);
    ``stored``: Processes, pools or allocations stored as they are; ``fail``: ``(verb, path)`` → the error
    that call raises (see :attr:`FakeApi.fail`)."""

    def __init__(self, objects: dict[str, Any] | None = None, *, stored: tuple[Any, ...] = (),
                 fail: dict[tuple[str, str], ApiError] | None = None) -> None:
        super().__init__()
        for key, doc in (objects or {}).items():
            self.seed(RESOURCES[key.split("/")[0]], doc)
        for obj in stored:
            self.seed(BY_KIND[type(obj).__name__], to_wire(obj))
        self.fail.update(fail or {})

    @property
    def writes(self) -> list[tuple[str, str]]:
        """(verb, path) of every call that is not a read, in order."""
        return [(c.verb, c.path) for c in self.calls if c.verb not in READS]
