"""compile_source for ``(defpoint …)`` (docs/lisp.md#defpoint): the bridge's compile cases and the
reference's compile tests, with in-tree (strict) expectations where the copies differ."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from shared.domain.api.intent import AplicacaoIntent
from shared.domain.api.lifetime import EphemeralLifetime, TeardownPolicy
from shared.domain.api.process import ProcessSpec
from tools.lisp import LispError, Named, compile_source

FLUX = ':intent (:flux (:git-repository "g" :path "."))'
MIN = ':classification (:point-type Transform :substrate Compute) :intent (:flux (:git-repository "g" :path "."))'

BASE: dict[str, Any] = {
    "identity": {},
    "classification": {
        "pointType": "Transform",
        "substrate": "Compute",
        "horizon": {"kind": "Bounded"},
        "calm": "Monotone",
        "dataClassification": "Internal",
    },
    "intent": {"flux": {"gitRepository": "g", "path": ".", "decryptSops": True}},
    "boundary": {"preconditions": [], "postconditions": []},
    "compliance": {"bindings": [], "autoRemediate": False},
    "dependsOn": [],
    "signals": {
        "sigtermGraceSeconds": 480,
        "sigkillForce": True,
        "sighupStrategy": "Reconverge",
        "startSuspended": False,
    },
    "suspended": False,
}


def spec(**changes: Any) -> ProcessSpec:
    """BASE with top-level keys replaced, decoded into the model."""
    doc = copy.deepcopy(BASE)
    doc.update(changes)
    return msgspec.convert(doc, ProcessSpec)


def compiled(src: str) -> list[tuple[str, ProcessSpec]]:
    return [(d.name, d.spec) for d in compile_source(src)]


GATE_COMPUTE = {**BASE["classification"], "pointType": "Gate", "substrate": "Compute"}

OK_CASES: list[tuple[str, str, list[tuple[str, ProcessSpec]]]] = [
    ("C1 the minimal form fills every default", f"(defpoint x {MIN})", [("x", spec())]),
    (
        "C2 a string NAME is taken verbatim",
        f'(defpoint "quoted name" {MIN}) (defpoint y {MIN})',
        [("quoted name", spec()), ("y", spec())],
    ),
    (
        "C3 every other top-level form is skipped",
        '(something-else y :a 1) foo 42 "s" ("defpoint" z) ((defpoint) w) '
        '(defephemeral e :aplicacao (:chart-ref "x" :version "1")) ' + f"(defpoint x {MIN})",
        [("x", spec())],
    ),
    (
        "C4 names need not be unique",
        f"(defpoint x {MIN}) (defpoint x {MIN} :suspended #t)",
        [("x", spec()), ("x", spec(suspended=True))],
    ),
    ("C12 #t fills a bool field", f"(defpoint x {MIN} :suspended #t)", [("x", spec(suspended=True))]),
    (
        "C15 symbols become strings inside nested structs",
        f'(defpoint x {MIN} :depends-on ((:name "a") (:name b :must-reach Running :namespace ns)))',
        [
            (
                "x",
                spec(
                    dependsOn=[
                        {"name": "a", "mustReach": "Attested"},
                        {"name": "b", "namespace": "ns", "mustReach": "Running"},
                    ]
                ),
            )
        ],
    ),
    (
        "C17 a symbol value is a string",
        f"(defpoint x {MIN} :identity (:parent seph.1))",
        [("x", spec(identity={"parent": "seph.1"}))],
    ),
    (
        "C19 an empty list is an all-default struct",
        f"(defpoint x {MIN} :boundary () :depends-on () :compliance () :identity ())",
        [("x", spec())],
    ),
    (
        "C22 a quote is stripped",
        "(defpoint x :classification '(:point-type Gate :substrate Compute) "
        ':intent (:nix (:flake-ref "f" :attribute "a" :extra-args ("--x" "--y") :delegate-to-nix-build #t)))',
        [
            (
                "x",
                spec(
                    classification=GATE_COMPUTE,
                    intent={
                        "nix": {
                            "flakeRef": "f",
                            "attribute": "a",
                            "extraArgs": ["--x", "--y"],
                            "delegateToNixBuild": True,
                        }
                    },
                ),
            )
        ],
    ),
    (
        "C23 a nested key may be written in camelCase",
        "(defpoint x :classification (:pointType Gate :substrate Compute) " + FLUX + ")",
        [("x", spec(classification=GATE_COMPUTE))],
    ),
    (
        "C24 a struct may be written positionally",
        "(defpoint x :classification (Gate Compute) " + FLUX + ")",
        [("x", spec(classification=GATE_COMPUTE))],
    ),
    (
        "C25 a permanent lifetime from an empty list",
        f"(defpoint x {MIN} :lifetime (:permanent ()))",
        [("x", spec(lifetime={"permanent": {}}))],
    ),
    (
        "C25 nested defaults apply inside an ephemeral lifetime",
        f'(defpoint x {MIN} :lifetime (:ephemeral (:ttl "2h")))',
        [("x", spec(lifetime={"ephemeral": {"ttl": "2h", "teardownPolicy": "Always", "maxConcurrent": 1}}))],
    ),
    (
        "C26 free-form map keys are camelCased too",
        "(defpoint x :classification (:point-type Gate :substrate Compute) "
        ':intent (:container (:image "i" :env (:log-level "debug" :HOME "/h"))))',
        [
            (
                "x",
                spec(
                    classification=GATE_COMPUTE,
                    intent={"container": {"image": "i", "env": {"logLevel": "debug", "HOME": "/h"}}},
                ),
            )
        ],
    ),
    (
        "C28 no intent check happens at compile time",
        "(defpoint x :classification (:point-type Gate :substrate Compute) :intent ())",
        [("x", spec(classification=GATE_COMPUTE, intent={}))],
    ),
    (
        "C29 a macro expands before selection",
        "(defmacro gc () (:point-type Gate :substrate Compute)) (defpoint x :classification (gc) " + FLUX + ")",
        [("x", spec(classification=GATE_COMPUTE))],
    ),
    (
        "a quasiquoted macro can emit whole forms",
        f"(defmacro mk (n) `(defpoint ,n {MIN})) (mk alpha) (mk beta)",
        [("alpha", spec()), ("beta", spec())],
    ),
    (
        "a &rest macro splices its extra arguments",
        f"(defmacro pt (n &rest kw) `(defpoint ,n {MIN} ,@kw)) (pt a :suspended #t)",
        [("a", spec(suspended=True))],
    ),
    ("empty input compiles to nothing", "", []),
    ("comments only compile to nothing", "; nothing here\n", []),
]


@pytest.mark.parametrize(("src", "expected"), [c[1:] for c in OK_CASES], ids=[c[0] for c in OK_CASES])
def test_compiles_to_the_expected_specs(src: str, expected: list[tuple[str, ProcessSpec]]) -> None:
    assert compiled(src) == expected


ERROR_CASES = [
    ("C5 a form without NAME", "(defpoint)", "compile error in defpoint: expected (defpoint NAME …)"),
    (
        "C6 a NAME that is not a symbol or string",
        f"(defpoint 42 {MIN})",
        "compile error in defpoint: positional NAME must be a symbol or string (got int)",
    ),
    ("C7 a missing classification", "(defpoint x)", "compile error in :classification: required but not provided"),
    (
        "C8 a dangling keyword",
        f"(defpoint x {MIN} :suspended)",
        "odd keyword arguments: dangling element `:suspended`",
    ),
    (
        "C9 a non-keyword in a key slot",
        f"(defpoint x 1 2 {MIN})",
        "compile error in kwargs[0]: expected keyword, got int",
    ),
    (
        "C10 an unknown enum spelling",
        "(defpoint x :classification (:point-type Gat :substrate Compute) " + FLUX + ")",
        "compile error in :classification: deserialize: ",
    ),
    (
        "C11 a missing nested field",
        "(defpoint x :classification (:substrate Compute) " + FLUX + ")",
        "compile error in :classification: deserialize: ",
    ),
    (
        "C12 a bare true is a symbol",
        f"(defpoint x {MIN} :suspended true)",
        "compile error in :suspended: expected bool, got symbol",
    ),
    (
        "C13 a list field needs a list of items",
        f'(defpoint x {MIN} :depends-on (:name "a"))',
        "compile error in :depends-on[0]: deserialize: ",
    ),
    (
        "C14 a list field given a string",
        f'(defpoint x {MIN} :depends-on "a")',
        "compile error in :depends-on: expected list, got string",
    ),
    (
        "C16 a negative u32",
        f"(defpoint x {MIN} :signals (:sigterm-grace-seconds -1))",
        "compile error in :signals: deserialize: ",
    ),
    (
        "C16 a float into a u32",
        f"(defpoint x {MIN} :signals (:sigterm-grace-seconds 4.5))",
        "compile error in :signals: deserialize: ",
    ),
    (
        "C16 a string into a u32",
        f'(defpoint x {MIN} :signals (:sigterm-grace-seconds "30"))',
        "compile error in :signals: deserialize: ",
    ),
    (
        "C18 nil is a symbol, not an empty struct",
        f"(defpoint x {MIN} :identity nil)",
        "compile error in :identity: deserialize: ",
    ),
    (
        "C20 a repeated keyword",
        f"(defpoint x {MIN} :bogus 1 :suspended #f :suspended #t)",
        "compile error in :suspended: duplicate keyword",
    ),
    (
        "C20 an unknown keyword lists the allowed ones",
        f"(defpoint x {MIN} :bogus 1)",
        "compile error in :bogus: unknown keyword (allowed: :identity, :classification, :intent, :boundary, "
        ":compliance, :depends-on, :signals, :lifetime, :routing, :encapsulates, :suspended)",
    ),
    (
        "C21 a camelCase top-level keyword is unknown",
        f'(defpoint x {MIN} :dependsOn ((:name "a")))',
        "compile error in :dependsOn: unknown keyword (did you mean :depends-on?; allowed: :identity,",
    ),
    (
        "C23 a snake_case nested key is ignored, so the field is missing",
        "(defpoint x :classification (:point_type Gate :substrate Compute) " + FLUX + ")",
        "compile error in :classification: deserialize: ",
    ),
    (
        "C25 an odd list is not a struct",
        f"(defpoint x {MIN} :lifetime (:permanent))",
        "compile error in :lifetime: deserialize: ",
    ),
    (
        "C27 a list field given one plist",
        f"(defpoint x {MIN} :boundary (:postconditions (:kind PromQL)))",
        "compile error in :boundary: deserialize: ",
    ),
    (
        "C30 a malformed macro",
        f"(defmacro bad) (defpoint x {MIN})",
        "compile error in defmacro: (defmacro name (params) body) required",
    ),
    (
        "C31 a reader error anywhere returns nothing",
        f'(defpoint x {MIN}) (defpoint "unterminated)',
        "unterminated string literal at position 130",
    ),
    (
        "E13 a duplicate nested key",
        f'(defpoint x {MIN} :identity (:parent "a" :parent "b"))',
        "compile error in :parent: duplicate keyword",
    ),
]


@pytest.mark.parametrize(("src", "prefix"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_compile_error_message(src: str, prefix: str) -> None:
    with pytest.raises(LispError) as err:
        compile_source(src)
    assert err.value.message.startswith(prefix), err.value.message
    assert err.value.line is not None


@pytest.mark.parametrize(
    ("src", "needle"),
    [
        ("(defpoint x :classification (:point-type Gat :substrate Compute) :intent ())", "Gat"),
        ("(defpoint x :classification (:substrate Compute) :intent ())", "pointType"),
        (f"(defpoint x {MIN} :signals (:sigterm-grace-seconds -1))", ">= 0"),
    ],
    ids=["C10 names the bad spelling", "C11 names the missing field", "C16 names the bound"],
)
def test_deserialize_errors_name_the_problem(src: str, needle: str) -> None:
    with pytest.raises(LispError, match=needle):
        compile_source(src)


def test_errors_point_at_the_offending_datum() -> None:
    src = f"(defpoint x {MIN}\n  :suspended true)"
    with pytest.raises(LispError) as err:
        compile_source(src)
    assert (err.value.line, err.value.column) == (2, 14)
    assert err.value.position == src.index("true")


def test_c31_reader_error_position_is_the_byte_offset_of_the_quote() -> None:
    src = f'(defpoint x {MIN}) (defpoint "unterminated)'
    with pytest.raises(LispError) as err:
        compile_source(src)
    assert err.value.position == src.rindex('"unterminated') == 130


# ── the reference's compile tests, as behaviour ──────────────────────────────

OBSERVABILITY = """
    (defpoint observability-stack
      :identity       (:parent "seph.1")
      :classification (:point-type Gate
                       :substrate Observability
                       :horizon (:kind Bounded)
                       :calm Monotone
                       :data-classification Internal)
      :intent         (:nix (:flake-ref "github:pleme-io/k8s"
                             :attribute "observability"
                             :attic-cache "main"))
      :boundary       (:postconditions
                         ((:kind KustomizationHealthy
                           :params (:name "observability-stack"
                                    :namespace "flux-system"))
                          (:kind PromQL
                           :params (:query "up == 1")))
                       :timeout "15m")
      :compliance     (:baseline "fedramp-moderate"
                       :bindings ((:framework "nist-800-53"
                                   :control-id "SC-7"
                                   :phase AtBoundary)))
      :depends-on     ((:name "secret-injection" :must-reach Attested))
      :signals        (:sigterm-grace-seconds 480
                       :sighup-strategy Reconverge))
"""


def test_full_process_spec_round_trip() -> None:
    (d,) = compile_source(OBSERVABILITY)
    assert d.name == "observability-stack"
    s = d.spec
    assert s.identity.parent == "seph.1"
    assert (s.classification.point_type, s.classification.substrate) == ("Gate", "Observability")
    assert s.intent.nix is not None
    assert (s.intent.nix.flake_ref, s.intent.nix.attribute) == ("github:pleme-io/k8s", "observability")
    assert s.intent.nix.attic_cache == "main"
    assert [c.kind for c in s.boundary.postconditions] == ["KustomizationHealthy", "PromQL"]
    assert s.boundary.postconditions[1].params == {"query": "up == 1"}
    assert s.boundary.timeout == "15m"
    assert s.compliance.baseline == "fedramp-moderate"
    assert [b.phase for b in s.compliance.bindings] == ["AtBoundary"]
    assert [(dep.name, dep.must_reach) for dep in s.depends_on] == [("secret-injection", "Attested")]
    assert s.signals.sigterm_grace_seconds == 480
    assert s.signals.sighup_strategy == "Reconverge"


def test_missing_classification_fails() -> None:
    with pytest.raises(LispError, match=r"^compile error in :classification: required but not provided"):
        compile_source('(defpoint x :intent (:nix (:flake-ref "f" :attribute "a")))')


def test_defaults_make_the_rest_optional() -> None:
    (d,) = compile_source("(defpoint x :classification (:point-type Transform :substrate Compute) " + FLUX + ")")
    assert d.spec.depends_on == []
    assert d.spec.boundary.postconditions == []
    assert d.spec.compliance.bindings == []
    assert d.spec.suspended is False
    assert d.spec.lifetime.permanent is None
    assert d.spec.lifetime.ephemeral is None


def test_aplicacao_intent_with_ephemeral_lifetime_compiles_to_those_variants() -> None:
    (d,) = compile_source(
        """
        (defpoint closed-loop-attest
          :classification (:point-type Gate :substrate Compute)
          :intent (:aplicacao
                    (:chart-ref "oci://ghcr.io/pleme-io/charts/lareira-demo-app"
                     :version "0.5.5"
                     :profile "all-in-one"
                     :values-overlay (:cluster (:name "ephemeral-test-01"))
                     :target-namespace "demo-test"))
          :boundary (:postconditions
                      ((:kind HelmReleaseReleased
                        :params (:name "demo-app-consolidated" :namespace "demo-test"))
                       (:kind ClosedLoopAuth
                        :params (:issuer (:service "demo-app-issuer" :port 8080)
                                 :consumer (:service "demo-app-gateway" :port 8000)
                                 :probeImage "ghcr.io/pleme-io/closed-loop-probe:0.1.0"))))
          :lifetime (:ephemeral (:ttl "1h" :teardown-policy OnAttested :max-concurrent 1)))
        """
    )
    assert d.spec.problems() == []
    aplicacao = d.spec.intent.aplicacao
    assert isinstance(aplicacao, AplicacaoIntent)
    assert (aplicacao.profile, aplicacao.version, aplicacao.target_namespace) == (
        "all-in-one",
        "0.5.5",
        "demo-test",
    )
    assert aplicacao.values_overlay == {"cluster": {"name": "ephemeral-test-01"}}
    ephemeral = d.spec.lifetime.ephemeral
    assert isinstance(ephemeral, EphemeralLifetime)
    assert (ephemeral.ttl, ephemeral.teardown_policy, ephemeral.max_concurrent) == (
        "1h",
        TeardownPolicy.ON_ATTESTED,
        1,
    )
    assert [c.kind for c in d.spec.boundary.postconditions] == ["HelmReleaseReleased", "ClosedLoopAuth"]


def test_result_items_are_named_specs() -> None:
    (d,) = compile_source(f"(defpoint x {MIN})")
    assert isinstance(d, Named)
    assert isinstance(d.spec, ProcessSpec)


def test_absurd_nesting_is_a_lisp_error_not_a_crash() -> None:
    depth = 20_000
    with pytest.raises(LispError, match="nesting too deep"):
        compile_source(f"(defpoint x {MIN} :identity " + "(" * depth + ")" * depth + ")")
