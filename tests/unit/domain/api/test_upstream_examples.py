"""The reference's example Processes decode into our models and re-encode to the same
document, with only the always-written defaults added (docs/wire-format.md#emission-rules)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.domain.api.codec import convert, decode, encode, to_wire
from shared.domain.api.process import Process

EXAMPLES = Path(__file__).resolve().parents[3] / "fixtures" / "upstream-tatara" / "examples"

SIGNAL_DEFAULTS = {
    "sigtermGraceSeconds": 480,
    "sigkillForce": True,
    "sighupStrategy": "Reconverge",
    "startSuspended": False,
}

# Keys the YAML leaves out that the reference always writes, with its default (docs/wire-format.md#processspec).
ADDED_DEFAULTS: dict[str, list[tuple[tuple[str, ...], Any]]] = {
    "observability-stack.yaml": [
        (("spec", "intent", "nix", "extraArgs"), []),  # NixIntent
        (("spec", "intent", "nix", "delegateToNixBuild"), False),
        (("spec", "compliance", "autoRemediate"), False),
        (("spec", "signals", "startSuspended"), False),
        (("spec", "suspended"), False),
    ],
    "closed-loop-ephemeral.yaml": [
        (("spec", "identity"), {}),
        (("spec", "boundary", "preconditions"), []),
        (("spec", "compliance"), {"bindings": [], "autoRemediate": False}),
        (("spec", "dependsOn"), []),
        (("spec", "signals"), SIGNAL_DEFAULTS),
        (("spec", "suspended"), False),
    ],
}


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return doc


def test_every_example_has_an_expected_defaults_row() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(ADDED_DEFAULTS)


@pytest.mark.parametrize("name", sorted(ADDED_DEFAULTS), ids=lambda n: f"{n} re-encodes to itself plus defaults")
def test_example_round_trips_to_the_same_document(name: str) -> None:
    original = load(name)
    expected = copy.deepcopy(original)
    for path, value in ADDED_DEFAULTS[name]:
        node = expected
        for key in path[:-1]:
            node = node[key]
        assert path[-1] not in node, f"{'.'.join(path)} is already in the example"
        node[path[-1]] = value

    process = convert(original, Process)
    assert to_wire(process) == expected


@pytest.mark.parametrize("name", sorted(ADDED_DEFAULTS), ids=lambda n: f"{n} is stable under re-encoding")
def test_example_decodes_back_to_an_equal_model(name: str) -> None:
    process = convert(load(name), Process)
    assert decode(encode(process), Process) == process
    assert encode(decode(encode(process), Process)) == encode(process)
