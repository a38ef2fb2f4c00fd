"""The ``tatara-receipt/v1`` envelope that Jobs write into receipt ConfigMaps.

— docs/wire-format.md#receipts. Keys are snake_case and unknown keys are
rejected (the one strict type).
"""

from __future__ import annotations

import hmac
from datetime import datetime
from typing import Any, Final

import msgspec
import yaml

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.codec import convert_leap_aware, wire_decoder
from shared.domain.api.leap_seconds import LEAP_SECOND
from shared.domain.api.process import ProcessAttestation
from shared.domain.api.wire import Timestamp, WireStruct
from shared.domain.identity import compose_root
from shared.domain.rust_text import debug_str

__all__ = [
    "RECEIPT_VERSION",
    "ReceiptEnvelope",
    "ReceiptError",
    "ReceiptKind",
    "parse_either",
    "parse_json",
    "parse_yaml",
]

RECEIPT_VERSION: Final = "tatara-receipt/v1"


class ReceiptKind(ClosedSet):
    """The known values of the open ``kind`` string."""

    CLOSED_LOOP_AUTH = "closed-loop-auth"
    DB_MIGRATION = "db-migration"
    TEST_SUITE = "test-suite"
    NIX_BUILD = "nix-build"


class ReceiptError(ValueError):
    """A receipt that does not parse or verify; texts as docs/wire-format.md#receipts lists them, e.g.
    ``missing required field: intent_hash``."""


class ReceiptEnvelope(WireStruct, rename=None, forbid_unknown_fields=True):
    """A receipt: BLAKE3 pillars and their composed root."""

    version: str
    kind: str
    composed_root: str
    intent_hash: str
    artifact_hash: str
    control_hash: str
    """May be ``""`` (absent)."""
    generated_at: Timestamp
    process_ref: str | None = None
    """``<namespace>/<name>``."""
    evidence: Any = None
    """Free JSON; left out when null."""

    @classmethod
    def build(
        cls, *, kind: str, intent: str, artifact: str, control: str, previous: str | None, generated_at: datetime
    ) -> ReceiptEnvelope:
        """A receipt over the pillars, its root composed with ``previous`` (what a Job writes)."""
        return cls(
            version=RECEIPT_VERSION,
            kind=kind,
            composed_root=compose_root(artifact, control, intent, previous),
            intent_hash=intent,
            artifact_hash=artifact,
            control_hash=control,
            generated_at=generated_at,
        )

    def to_attestation(self, previous: str | None = None, generation: int = 0) -> ProcessAttestation:
        """The ``status.attestation`` this receipt stands for: its pillars and root, an empty
        control hash as absent, chained on ``previous``."""
        return ProcessAttestation(
            artifact_hash=self.artifact_hash,
            control_hash=self.control_hash or None,
            intent_hash=self.intent_hash,
            composed_root=self.composed_root,
            generation=generation,
            previous_root=previous,
            attested_at=self.generated_at,
        )

    def known_kind(self) -> ReceiptKind | None:
        """The ReceiptKind spelled exactly ``kind``, or None."""
        try:
            return ReceiptKind.parse(self.kind)
        except ValueError:
            return None

    def verify_shape(self) -> None:
        """Check version, kind, then the three required hashes; raise :class:`ReceiptError`."""
        if self.version != RECEIPT_VERSION:
            raise ReceiptError(f"version != {RECEIPT_VERSION} (got {debug_str(self.version)})")
        if not self.kind:
            raise ReceiptError("kind is empty")
        for key in ("composed_root", "intent_hash", "artifact_hash"):
            if not getattr(self, key):
                raise ReceiptError(f"missing required field: {key}")

    def verify_root(self, expected_previous: str | None = None) -> bool:
        """Recompute the root over the pillars and ``expected_previous`` (constant time)."""
        want = compose_root(self.artifact_hash, self.control_hash, self.intent_hash, expected_previous)
        return hmac.compare_digest(want.encode(), self.composed_root.encode())

    def expect_root(self, expected: str | None) -> str:
        """``composed_root``; raise ``composed_root mismatch (got …, want …)`` when
        ``expected`` is given and differs."""
        if expected is not None and expected != self.composed_root:
            raise ReceiptError(f"composed_root mismatch (got {self.composed_root}, want {expected})")
        return self.composed_root


def parse_json(data: bytes | str) -> ReceiptEnvelope:
    """Strict JSON parse (numbers in ``evidence`` read as the reference reads them,
    docs/wire-format.md#numbers) then :meth:`ReceiptEnvelope.verify_shape`; ``invalid JSON: …`` on
    failure."""
    try:
        envelope = wire_decoder(ReceiptEnvelope).decode(data)
    except msgspec.DecodeError as err:
        raise ReceiptError(f"invalid JSON: {err}") from None
    envelope.verify_shape()
    return envelope


_TEXT_FIELDS: Final = frozenset({"version", "kind", "composed_root", "intent_hash", "artifact_hash", "control_hash",
                                 "process_ref"})


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a leap-second timestamp (``…:60Z``), which a Python datetime cannot
    hold, stays its text: serde_yaml hands it to chrono as text too (docs/wire-format.md#timestamps)."""


def _timestamp(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    if LEAP_SECOND.fullmatch(node.value):
        return node.value
    return loader.construct_yaml_timestamp(node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def _yaml_document(data: bytes | str) -> Any:
    """The YAML document as serde_yaml hands it to the envelope: a scalar under a text field is
    taken as written (``control_hash:`` is ``""``, ``kind: 1`` is ``"1"``), everything else is
    resolved as YAML 1.1 types."""
    node = yaml.compose(data, Loader=_Loader)
    loader = _Loader("")
    if not isinstance(node, yaml.MappingNode):
        return None if node is None else loader.construct_object(node, deep=True)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in _TEXT_FIELDS and isinstance(value_node, yaml.ScalarNode):
            out[key] = value_node.value
        else:
            out[key] = loader.construct_object(value_node, deep=True)
    return out


def parse_yaml(data: bytes | str) -> ReceiptEnvelope:
    """As :func:`parse_json` for YAML; ``invalid YAML: …`` on failure."""
    try:
        envelope = convert_leap_aware(_yaml_document(data), ReceiptEnvelope)
    except (yaml.YAMLError, msgspec.ValidationError, ValueError, RecursionError) as err:
        # ValueError: a scalar YAML resolves but cannot build (``2026-13-45``); RecursionError: deep nesting
        raise ReceiptError(f"invalid YAML: {err}") from None
    envelope.verify_shape()
    return envelope


def parse_either(data: bytes | str) -> ReceiptEnvelope:
    """JSON first; on any JSON failure (shape included) YAML, whose error is returned."""
    try:
        return parse_json(data)
    except ReceiptError:
        return parse_yaml(data)
