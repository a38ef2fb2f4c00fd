"""Identity hashes: content hash, PIDs, ephemeral ids, attestation roots, slot names.

Byte-exact with the reference; the algorithms and test vectors are in docs/wire-format.md#hashes.
Every hash is BLAKE3-256.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from blake3 import blake3

from shared.domain.api.codec import to_wire
from shared.domain.api.intent import Intent
from shared.domain.api.process import FluxResourceRef, Identity, ProcessAttestation, ProcessSpec
from shared.domain.canonical_json import canonical_json
from shared.domain.rust_text import debug_str

__all__ = [
    "CROCKFORD_ALPHABET",
    "DOMAIN_TAG",
    "EPHEMERAL_ID_HASH_LEN",
    "InvalidEphemeralIdError",
    "allocate_pid",
    "artifact_hash",
    "attest",
    "base32_lower",
    "compose_root",
    "content_hash",
    "depth",
    "derive_identity",
    "env_id_of",
    "ephemeral_id",
    "format_process_address",
    "intent_canonical_bytes",
    "intent_hash",
    "member_process_name",
    "parent_of",
    "parse_ephemeral_id",
    "pid_segments",
    "slot_slug",
    "spec_canonical_bytes",
    "verify_root",
]

CROCKFORD_ALPHABET: Final = "0123456789abcdefghjkmnpqrstvwxyz"
"""Crockford's base32 alphabet in lower case: no i, l, o, u (docs/wire-format.md#content-hash)."""

DOMAIN_TAG: Final = b"tatara-process/v1alpha1\n"
"""Prefix of every composed root (docs/wire-format.md#attestation-root)."""

EPHEMERAL_ID_HASH_LEN: Final = 8
"""Length of an ephemeral id in hex characters (docs/wire-format.md#ephemeral-id)."""

_MEMBER_PREFIX_MAX_BYTES: Final = 237
"""Pool name cut so ``<prefix>-<slug8>`` stays within 246 bytes (docs/wire-format.md#member-names)."""


def _blake3_hex(data: bytes) -> str:
    return str(blake3(data).hexdigest())


# ── content hash and identity ─────────────────────────────────────────────────


def base32_lower(data: bytes) -> str:
    """Unpadded MSB-first base32 with :data:`CROCKFORD_ALPHABET` (docs/wire-format.md#content-hash).

    16 bytes give 26 characters; trailing bits are zero-filled into a last character.
    """
    out: list[str] = []
    acc = 0
    bits = 0
    for byte in data:
        acc = (acc << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append(CROCKFORD_ALPHABET[(acc >> bits) & 31])
        acc &= (1 << bits) - 1
    if bits:
        out.append(CROCKFORD_ALPHABET[(acc << (5 - bits)) & 31])
    return "".join(out)


def spec_canonical_bytes(spec: ProcessSpec, *, sort_keys: bool = False) -> bytes:
    """Compact JSON of ``spec`` as the reference serializes it (docs/wire-format.md#canonical-json).

    Declaration order for the content hash; ``sort_keys=True`` for the ephemeral id.
    """
    return canonical_json(to_wire(spec), sort_keys=sort_keys)


def content_hash(spec: ProcessSpec) -> str:
    """26-character lower-case Crockford base32 of the first 16 bytes of
    BLAKE3(declaration-order JSON of ``spec``) — docs/wire-format.md#content-hash."""
    return base32_lower(blake3(spec_canonical_bytes(spec)).digest()[:16])


def derive_identity(spec: ProcessSpec) -> Identity:
    """``status.identity`` for ``spec`` (docs/wire-format.md#identity-name).

    ``spec.identity.nameOverride``, trimmed, is the name when non-empty; otherwise the
    content hash is. The hash is always computed (and includes the override).
    """
    digest = content_hash(spec)
    override = (spec.identity.name_override or "").strip()
    if override:
        return Identity(name=override, content_hash=digest, name_override=True)
    return Identity(name=digest, content_hash=digest, name_override=False)


def format_process_address(identity: Identity, pid_path: str) -> str:
    """``<identity.name>.<pid_path>``, the process address; no controller uses it (docs/wire-format.md#pid-format)."""
    return f"{identity.name}.{pid_path}"


# ── PID paths ─────────────────────────────────────────────────────────────────


def allocate_pid(identity_name: str, parent: str | None, sequence: int) -> str:
    """The PID for sequence number ``sequence`` (docs/wire-format.md#pid-format).

    ``<parent>.<seq>`` when ``parent`` is set and non-empty, else ``<identity_name>.<seq>``.
    E.g. ``allocate_pid("seph", None, 1) == "seph.1"``,
    ``allocate_pid("x", "seph.1", 7) == "seph.1.7"``.
    """
    return f"{parent or identity_name}.{sequence}"


def pid_segments(pid: str) -> list[str]:
    """The dot-separated segments of a PID path; ``[]`` for ``""``."""
    return pid.split(".") if pid else []


def depth(pid: str) -> int:
    """Number of segments: ``seph.1.7.3`` → 4, ``""`` → 0."""
    return len(pid_segments(pid))


def parent_of(pid: str) -> str | None:
    """Everything before the last ``.``: ``seph.1`` → ``seph``; ``seph`` → None."""
    head, dot, _ = pid.rpartition(".")
    return head if dot else None


# ── ephemeral id ─────────────────────────────────────────────────────────────


class InvalidEphemeralIdError(ValueError):
    """Not an 8-character lower-case hex id."""


def env_id_of(value: Any) -> str:
    """First 8 hex characters of BLAKE3 over the sorted-key canonical JSON of plain data."""
    return _blake3_hex(canonical_json(value, sort_keys=True))[:EPHEMERAL_ID_HASH_LEN]


def ephemeral_id(spec: ProcessSpec) -> str:
    """The per-instance DNS id of a Process: 8 hex of BLAKE3(sorted-key JSON of spec)
    — docs/wire-format.md#ephemeral-id."""
    return _blake3_hex(spec_canonical_bytes(spec, sort_keys=True))[:EPHEMERAL_ID_HASH_LEN]


def parse_ephemeral_id(text: str) -> str:
    """Validate an ephemeral env id and return it (docs/wire-format.md#ephemeral-id).

    Raises :class:`InvalidEphemeralIdError`:
    ``ephemeral env id must be 8 chars, got <len>`` or
    ``ephemeral env id must be lowercase hex [0-9a-f], got "<s>"`` (``<s>`` escaped as Rust's
    ``{:?}``, :func:`shared.domain.rust_text.debug_str`).
    """
    length = len(text.encode("utf-8"))
    if length != EPHEMERAL_ID_HASH_LEN:
        raise InvalidEphemeralIdError(f"ephemeral env id must be 8 chars, got {length}")
    if any(c not in "0123456789abcdef" for c in text):
        raise InvalidEphemeralIdError(f"ephemeral env id must be lowercase hex [0-9a-f], got {debug_str(text)}")
    return text


# ── attestation ───────────────────────────────────────────────────────────────


def compose_root(artifact: str, control: str | None, intent: str, previous: str | None) -> str:
    """64-hex BLAKE3 of ``DOMAIN_TAG ‖ artifact \\n control \\n intent \\n previous``.

    Absent (or empty) control / previous hash as ``""``; the hash strings are hashed
    as UTF-8 text — docs/wire-format.md#attestation-root.
    """
    data = b"".join(
        (
            DOMAIN_TAG,
            artifact.encode(),
            b"\n",
            (control or "").encode(),
            b"\n",
            intent.encode(),
            b"\n",
            (previous or "").encode(),
        )
    )
    return _blake3_hex(data)


def verify_root(attestation: ProcessAttestation) -> bool:
    """Recompute ``composedRoot`` and compare in constant time."""
    want = compose_root(
        attestation.artifact_hash,
        attestation.control_hash,
        attestation.intent_hash,
        attestation.previous_root,
    )
    return hmac.compare_digest(want.encode(), attestation.composed_root.encode())


def intent_hash(intent: Intent) -> str:
    """64-hex BLAKE3 of the whole ``spec.intent`` object's declaration-order JSON,
    outer variant key included (``{"nix":{…}}``) — docs/wire-format.md#attestation-root."""
    return _blake3_hex(canonical_json(to_wire(intent)))


def intent_canonical_bytes(intent: Intent) -> bytes:
    """Compact JSON of the populated variant's inner object;
    empty bytes when the intent has no single variant."""
    populated = intent.populated()
    if len(populated) != 1:
        return b""
    return canonical_json(to_wire(populated[0][1]))


def artifact_hash(refs: Iterable[FluxResourceRef]) -> str:
    """64-hex BLAKE3 over ``apiVersion/kind/namespace/name\\n`` per ref, in order;
    ``""`` when there are none — docs/wire-format.md#attestation-root."""
    lines = [f"{r.api_version}/{r.kind}/{r.namespace}/{r.name}\n" for r in refs]
    if not lines:
        return ""
    return _blake3_hex("".join(lines).encode())


def attest(
    *,
    artifact: str,
    control: str | None,
    intent: str,
    previous: ProcessAttestation | None,
    now: datetime,
) -> ProcessAttestation:
    """The next ``status.attestation`` (chaining: docs/wire-format.md#attestation-root).

    Generation 0 with no previousRoot when ``previous`` is None; otherwise
    ``previous.generation + 1`` chained on ``previous.composedRoot``. An empty
    ``control`` counts as absent.
    """
    control = control or None
    previous_root = previous.composed_root if previous is not None else None
    return ProcessAttestation(
        artifact_hash=artifact,
        control_hash=control,
        intent_hash=intent,
        composed_root=compose_root(artifact, control, intent, previous_root),
        generation=previous.generation + 1 if previous is not None else 0,
        previous_root=previous_root,
        attested_at=now,
    )


# ── pool member names ────────────────────────────────────────────────────────


def slot_slug(pool_uid: str, slot: int) -> str:
    """8 hex of BLAKE3(uid ‖ 0x0A ‖ slot as 4 big-endian bytes) — docs/wire-format.md#member-names."""
    return _blake3_hex(pool_uid.encode() + b"\n" + slot.to_bytes(4, "big"))[:8]


def member_process_name(pool_name: str, pool_uid: str | None, slot: int) -> str:
    """``<pool name cut to 237 bytes>-<slot_slug(uid, slot)>`` — docs/wire-format.md#member-names.

    The uid is the pool's ``metadata.uid`` as it is, ``""`` included; only an absent uid (None)
    falls back to the pool name. A cut inside a multi-byte character drops that character
    (docs/divergences.md#member-name-cut).
    """
    prefix = pool_name.encode()[:_MEMBER_PREFIX_MAX_BYTES].decode("utf-8", "ignore")
    return f"{prefix}-{slot_slug(pool_uid if pool_uid is not None else pool_name, slot)}"
