"""Tagged unions: exactly one slot (at most one for Lifetime), with the reference's error texts.

— docs/wire-format.md#tagged-unions.
"""

from __future__ import annotations

import re

import pytest

from shared.domain.api.encapsulates import BareWorkload, EncapsulationKind, ExistingKustomization
from shared.domain.api.export import (
    ArtifactSource,
    HttpEventChannel,
    ReceiptsSource,
    RunMarkerSource,
    StdoutChannel,
    VectorChannel,
)
from shared.domain.api.intent import AplicacaoIntent, Intent, IntentKind, NixIntent
from shared.domain.api.lifetime import EphemeralLifetime, Lifetime, LifetimeKind, PermanentLifetime
from shared.domain.api.tagged_union import AmbiguousVariantError, EmptyVariantError, TaggedUnion

NIX = NixIntent(flake_ref="github:pleme-io/k8s", attribute="obs")
APLICACAO = AplicacaoIntent(chart_ref="oci://x/y", version="1.0.0")

EMPTY_CASES: list[tuple[TaggedUnion, str]] = [
    (Intent(), "intent has no variant set (one of nix/flux/lisp/container/aplicacao/guest required)"),
    (
        EncapsulationKind(),
        "encapsulation kind has no variant set "
        "(one of existingHelmRelease/existingKustomization/bareWorkload required)",
    ),
    (
        ArtifactSource(),
        "artifact source has no variant set (one of receipts/testReport/processSnapshot/runMarker required)",
    ),
    (VectorChannel(), "vector channel has no variant set (one of httpEvent/natsSubject/stdout required)"),
]

AMBIGUOUS_CASES: list[tuple[TaggedUnion, str]] = [
    (Intent(nix=NIX, aplicacao=APLICACAO), "intent has multiple variants set; exactly one required"),
    (
        EncapsulationKind(
            existing_kustomization=ExistingKustomization(namespace="a", name="b"),
            bare_workload=BareWorkload(namespace="a", selector={}),
        ),
        "encapsulation kind has multiple variants set; exactly one required",
    ),
    (
        ArtifactSource(receipts=ReceiptsSource(), run_marker=RunMarkerSource()),
        "artifact source has multiple variants set; exactly one required",
    ),
    (
        VectorChannel(stdout=StdoutChannel(), http_event=HttpEventChannel(signal_type="ci")),
        "vector channel has multiple variants set; exactly one required",
    ),
]


@pytest.mark.parametrize(
    ("union", "message"), EMPTY_CASES, ids=[f"an empty {type(u).__name__} names every slot" for u, _ in EMPTY_CASES]
)
def test_no_variant_set_is_an_error_listing_the_slots(union: TaggedUnion, message: str) -> None:
    with pytest.raises(EmptyVariantError, match=f"^{re.escape(message)}$"):
        union.variant()  # type: ignore[attr-defined]
    assert union.check() == message


@pytest.mark.parametrize(
    ("union", "message"),
    AMBIGUOUS_CASES,
    ids=[f"two slots of {type(u).__name__} are refused" for u, _ in AMBIGUOUS_CASES],
)
def test_several_variants_set_is_an_error(union: TaggedUnion, message: str) -> None:
    with pytest.raises(AmbiguousVariantError, match=f"^{message}$"):
        union.variant()  # type: ignore[attr-defined]


def test_a_single_variant_resolves_to_its_payload_and_kind() -> None:
    intent = Intent(aplicacao=APLICACAO)
    assert intent.kind() is IntentKind.APLICACAO
    assert intent.variant() is APLICACAO
    assert intent.check() is None


def test_unions_decode_with_any_number_of_slots_and_fail_only_at_use() -> None:
    from shared.domain.api.codec import decode

    intent = decode(b'{"nix":{"flakeRef":"f","attribute":"a"},"flux":{"gitRepository":"g","path":"p"}}', Intent)
    assert intent.check() == "intent has multiple variants set; exactly one required"


LIFETIME_CASES = [
    (Lifetime(), LifetimeKind.PERMANENT, None, True),
    (Lifetime(permanent=PermanentLifetime()), LifetimeKind.PERMANENT, None, False),
    (Lifetime(ephemeral=EphemeralLifetime()), LifetimeKind.EPHEMERAL, EphemeralLifetime(), False),
]


@pytest.mark.parametrize(
    ("lifetime", "kind", "resolved", "is_default"),
    LIFETIME_CASES,
    ids=[
        "an empty lifetime is permanent, not an error",
        "an explicit permanent lifetime is permanent",
        "an ephemeral-only lifetime resolves to its payload",
    ],
)
def test_lifetime_resolution(
    lifetime: Lifetime, kind: LifetimeKind, resolved: EphemeralLifetime | None, is_default: bool
) -> None:
    assert lifetime.kind() is kind
    assert lifetime.resolved_ephemeral() == resolved
    assert lifetime.is_default is is_default


def test_a_lifetime_with_both_slots_is_ambiguous_but_still_counts_as_ephemeral() -> None:
    both = Lifetime(permanent=PermanentLifetime(), ephemeral=EphemeralLifetime())
    with pytest.raises(AmbiguousVariantError, match=r"^lifetime has multiple variants set; at most one required$"):
        both.kind()
    assert both.resolved_ephemeral() is None
    assert both.is_ephemeral is True
