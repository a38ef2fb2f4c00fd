"""Hypothesis strategies that build valid ProcessSpecs covering every spec field."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from shared.domain.api.boundary import Boundary, Condition, ConditionKind
from shared.domain.api.classification import (
    CalmClassification,
    Classification,
    ConvergencePointType,
    DataClassification,
    Horizon,
    HorizonKind,
    OptimizationDirection,
    SubstrateType,
)
from shared.domain.api.compliance import ComplianceBinding, ComplianceSpec, VerificationPhase
from shared.domain.api.encapsulates import (
    BareWorkload,
    EncapsulatesSpec,
    EncapsulationKind,
    EncapsulationMode,
    ExistingHelmRelease,
)
from shared.domain.api.export import (
    ArtifactSource,
    ExportSpec,
    ExportTrigger,
    HttpEventChannel,
    RunMarkerSource,
    VectorChannel,
)
from shared.domain.api.intent import (
    AplicacaoIntent,
    ContainerIntent,
    FluxIntent,
    GuestIntent,
    Intent,
    LispIntent,
    NixIntent,
    WorkloadKind,
)
from shared.domain.api.lifetime import EphemeralLifetime, Lifetime, PermanentLifetime, TeardownPolicy
from shared.domain.api.phase import MustReachPhase
from shared.domain.api.process import DependsOn, IdentitySpec, ProcessSpec
from shared.domain.api.routing import RoutingBackend, RoutingHostname, RoutingSpec
from shared.domain.api.signal import SighupStrategy, SignalPolicy
from shared.domain.canonical_json import format_float
from shared.domain.json_number import parse_f64

text = st.text(max_size=12)
opt_text = st.none() | text
u32 = st.integers(0, 2**32 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
string_map = st.dictionaries(text, text, max_size=3)

fixed_point_float = st.floats(allow_nan=False, allow_infinity=False).filter(
    lambda x: parse_f64(format_float(x)) == x
)
"""A float that reads back as itself after it is written. serde_json's parse of its own output is
not the identity (``909.4290778244612`` is written ``909.4290778244613`` and read back as the
first; the float_literal vectors), so a round trip can hold only for these; decoding everything
else as serde_json does is tested against the reference's vectors (docs/wire-format.md#numbers)."""

json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | fixed_point_float
    | text
)
json_value = st.recursive(
    json_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3), max_leaves=8
)
json_object: st.SearchStrategy[dict[str, Any]] = st.dictionaries(text, json_value, max_size=3)

classification = st.builds(
    Classification,
    point_type=st.sampled_from(ConvergencePointType),
    substrate=st.sampled_from(SubstrateType),
    horizon=st.builds(
        Horizon,
        kind=st.sampled_from(HorizonKind),
        metric=opt_text,
        direction=st.none() | st.sampled_from(OptimizationDirection),
        healthy_rate_threshold=st.none() | fixed_point_float,
    ),
    calm=st.sampled_from(CalmClassification),
    data_classification=st.sampled_from(DataClassification),
)

intent = st.one_of(
    st.builds(
        NixIntent,
        flake_ref=text,
        attribute=text,
        system=opt_text,
        attic_cache=opt_text,
        extra_args=st.lists(text, max_size=2),
        delegate_to_nix_build=st.booleans(),
    ).map(lambda v: Intent(nix=v)),
    st.builds(
        FluxIntent,
        git_repository=text,
        path=text,
        git_repository_namespace=opt_text,
        target_namespace=opt_text,
        decrypt_sops=st.booleans(),
        helm_chart=opt_text,
        helm_values=st.none() | json_object,
    ).map(lambda v: Intent(flux=v)),
    st.builds(LispIntent, source=text, reader=text, version=text, bindings=json_object).map(lambda v: Intent(lisp=v)),
    st.builds(
        ContainerIntent,
        image=text,
        replicas=st.none() | i32,
        command=st.lists(text, max_size=2),
        args=st.lists(text, max_size=2),
        env=string_map,
        workload_kind=st.sampled_from(WorkloadKind),
    ).map(lambda v: Intent(container=v)),
    st.builds(
        AplicacaoIntent,
        chart_ref=text,
        version=text,
        profile=text,
        values_overlay=st.none() | json_object,
        release_name=opt_text,
        target_namespace=opt_text,
        install_timeout=opt_text,
    ).map(lambda v: Intent(aplicacao=v)),
    st.builds(GuestIntent, spec=json_object, state_dir=opt_text, allow_remote_build=st.none() | st.booleans()).map(
        lambda v: Intent(guest=v)
    ),
)

condition = st.builds(Condition, kind=st.sampled_from(ConditionKind), params=st.none() | json_object)

export = st.builds(
    ExportSpec,
    source=st.builds(RunMarkerSource, labels=string_map).map(lambda v: ArtifactSource(run_marker=v)),
    channel=st.builds(HttpEventChannel, endpoint=opt_text, signal_type=text).map(lambda v: VectorChannel(http_event=v)),
    when=st.sampled_from(ExportTrigger),
    experiment_id_override=opt_text,
)

lifetime = st.one_of(
    st.just(Lifetime()),
    st.just(Lifetime(permanent=PermanentLifetime())),
    st.builds(
        EphemeralLifetime,
        ttl=text,
        teardown_policy=st.sampled_from(TeardownPolicy),
        max_concurrent=u32,
        exports=st.lists(export, max_size=2),
    ).map(lambda v: Lifetime(ephemeral=v)),
)

routing = st.builds(
    RoutingSpec,
    hostnames=st.lists(st.builds(RoutingHostname, app=text, instance=opt_text, cluster=opt_text), max_size=2),
    backend=st.builds(
        RoutingBackend,
        service=text,
        port=st.integers(0, 65535),
        tls_issuer=opt_text,
        ingress_annotations=string_map,
    ),
    stable_name_claim=st.booleans(),
    priority=i32,
)

encapsulates = st.builds(
    EncapsulatesSpec,
    kind=st.one_of(
        st.builds(ExistingHelmRelease, namespace=text, name=text, release_name=text).map(
            lambda v: EncapsulationKind(existing_helm_release=v)
        ),
        st.builds(BareWorkload, namespace=text, selector=string_map).map(lambda v: EncapsulationKind(bare_workload=v)),
    ),
    mode=st.sampled_from(EncapsulationMode),
)

FIELD_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {
    "identity": st.builds(IdentitySpec, parent=opt_text, name_override=opt_text),
    "classification": classification,
    "intent": intent,
    "boundary": st.builds(
        Boundary,
        preconditions=st.lists(condition, max_size=2),
        postconditions=st.lists(condition, max_size=2),
        timeout=opt_text,
    ),
    "compliance": st.builds(
        ComplianceSpec,
        baseline=opt_text,
        bindings=st.lists(
            st.builds(
                ComplianceBinding,
                framework=text,
                control_id=text,
                phase=st.sampled_from(VerificationPhase),
                description=opt_text,
            ),
            max_size=2,
        ),
        auto_remediate=st.booleans(),
    ),
    "depends_on": st.lists(
        st.builds(DependsOn, name=text, namespace=opt_text, must_reach=st.sampled_from(MustReachPhase)), max_size=2
    ),
    "signals": st.builds(
        SignalPolicy,
        sigterm_grace_seconds=u32,
        sigkill_force=st.booleans(),
        sighup_strategy=st.sampled_from(SighupStrategy),
        start_suspended=st.booleans(),
    ),
    "lifetime": lifetime,
    "routing": st.none() | routing,
    "encapsulates": st.none() | encapsulates,
    "suspended": st.booleans(),
}

process_spec: st.SearchStrategy[ProcessSpec] = st.builds(ProcessSpec, **FIELD_STRATEGIES)
