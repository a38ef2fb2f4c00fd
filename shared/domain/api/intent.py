"""``spec.intent``: what a Process converges to — a tagged union of six variants.

— docs/wire-format.md#intent; the union rule is docs/wire-format.md#tagged-unions.
"""

from __future__ import annotations

from typing import Any, ClassVar

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.grammar import ChartRef, ChartVersion, Duration
from shared.domain.api.tagged_union import TaggedUnion
from shared.domain.api.wire import FreeObject, Int32, WireStruct

__all__ = [
    "AplicacaoIntent",
    "ContainerIntent",
    "FluxIntent",
    "GuestIntent",
    "Intent",
    "IntentKind",
    "IntentVariant",
    "LispIntent",
    "NixIntent",
    "WorkloadKind",
]


class NixIntent(WireStruct):
    """Build a flake attribute (``intent.nix``)."""

    flake_ref: str
    """Flake reference to build from, e.g. ``github:pleme-io/k8s``."""
    attribute: str
    """Attribute of the flake to build, e.g. ``observability``."""
    system: str | None = None
    """Nix system to build for, e.g. ``x86_64-linux``; absent: the builder's own."""
    attic_cache: str | None = None
    """Name of the Attic binary cache to push the build to; absent: no push."""
    extra_args: list[str] = []
    """Extra command-line arguments for the build, in order. Default: none."""
    delegate_to_nix_build: bool = False
    """True: hand the build to a remote ``nix build`` instead of building in-cluster. Default false."""


class FluxIntent(WireStruct):
    """Render a Flux Kustomization (and optionally a HelmRelease) (``intent.flux``)."""

    git_repository: str
    """Name of the Flux GitRepository the rendered Kustomization reads from (not created by tatara)."""
    path: str
    """Path inside the repository that the Kustomization applies, e.g. ``./apps``."""
    git_repository_namespace: str | None = None
    """Absent → the renderer uses ``flux-system``."""
    target_namespace: str | None = None
    """Namespace the Kustomization applies its objects into; absent: the namespaces in the manifests."""
    decrypt_sops: bool = True
    """Decrypt SOPS-encrypted manifests with the ``sops-age`` Secret. Default true."""
    helm_chart: str | None = None
    """Name of a Helm chart in the repository; carried, not used by the renderer."""
    helm_values: dict[str, Any] | None = None
    """Map of string → free JSON; keys written sorted."""


class LispIntent(WireStruct):
    """Evaluate tatara-lisp source (``intent.lisp``)."""

    source: str
    """Raw S-expression text, ``include:<path>`` or ``configmap:<name>/<key>``."""
    reader: str = "tatara-lisp"
    """Reader that parses ``source``. Default ``tatara-lisp``."""
    version: str = "v1"
    """Version of the reader's language. Default ``v1``."""
    bindings: dict[str, Any] = {}
    """Values bound to names before ``source`` is evaluated: name → any JSON value. Default empty."""


class WorkloadKind(ClosedSet):
    """Kind of workload a ContainerIntent renders. Default ``Deployment``."""

    DEPLOYMENT = "Deployment"
    STATEFUL_SET = "StatefulSet"
    DAEMON_SET = "DaemonSet"
    JOB = "Job"
    CRON_JOB = "CronJob"

    @property
    def is_batch(self) -> bool:
        """Job and CronJob."""
        return self in (WorkloadKind.JOB, WorkloadKind.CRON_JOB)

    @property
    def api_version(self) -> str:
        """``batch/v1`` for Job and CronJob, ``apps/v1`` otherwise."""
        return "batch/v1" if self.is_batch else "apps/v1"


class ContainerIntent(WireStruct):
    """Run an image as a workload (``intent.container``)."""

    image: str
    """Container image to run, e.g. ``ghcr.io/pleme-io/api:1.2.3``."""
    replicas: Int32 | None = None
    """Number of pods to run; absent: the workload kind's default."""
    command: list[str] = []
    """Entrypoint to run instead of the image's; empty: the image's entrypoint."""
    args: list[str] = []
    """Arguments for the entrypoint; empty: the image's default arguments."""
    env: dict[str, str] = {}
    """Environment variables for the container: name → value. Default empty."""
    workload_kind: WorkloadKind = WorkloadKind.DEPLOYMENT


class AplicacaoIntent(WireStruct):
    """Install a pleme-io Aplicacao Helm chart via Flux (``intent.aplicacao``).

    ``profile`` is left out on output when ``""``; ``valuesOverlay`` is always
    written, as ``null`` when unset.
    """

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"profile"})
    _write_null: ClassVar[frozenset[str]] = frozenset({"values_overlay"})

    chart_ref: ChartRef
    """``oci://…`` or ``repo/chart``."""
    version: ChartVersion
    """A Helm semver constraint."""
    profile: str = ""
    """Chart profile, set as the top-level ``profile`` value of the release; empty (the default): none."""
    values_overlay: FreeObject | None = None
    """Helm values for the release (an object); null (the default): no values."""
    release_name: str | None = None
    """Absent → the Process ``metadata.name``."""
    target_namespace: str | None = None
    """Absent → the Process namespace."""
    install_timeout: Duration | None = None
    """Humantime duration; absent → ``25m``."""


class GuestIntent(WireStruct):
    """Boot a tatara-vm guest (``intent.guest``); ``spec`` is free JSON."""

    spec: FreeObject
    """The guest to boot, in the shape of a tatara-vm GuestSpec (any JSON object)."""
    state_dir: str | None = None
    """Directory on the host that keeps the guest's state; absent: the runtime's default."""
    allow_remote_build: bool | None = None
    """Whether the guest image may be built on a remote builder; absent: the runtime decides."""


class IntentKind(ClosedSet):
    """The intent slot names, in resolution order (not on the wire)."""

    NIX = "nix"
    FLUX = "flux"
    LISP = "lisp"
    CONTAINER = "container"
    APLICACAO = "aplicacao"
    GUEST = "guest"


IntentVariant = NixIntent | FluxIntent | LispIntent | ContainerIntent | AplicacaoIntent | GuestIntent


class Intent(TaggedUnion):
    """``spec.intent``: exactly one of six slots must be set (checked at use).

    :meth:`variant` raises :class:`~shared.domain.api.tagged_union.EmptyVariantError`
    ``intent has no variant set (one of nix/flux/lisp/container/aplicacao/guest required)``
    or :class:`~shared.domain.api.tagged_union.AmbiguousVariantError`
    ``intent has multiple variants set; exactly one required``.
    """

    _noun: ClassVar[str] = "intent"

    nix: NixIntent | None = None
    flux: FluxIntent | None = None
    lisp: LispIntent | None = None
    container: ContainerIntent | None = None
    aplicacao: AplicacaoIntent | None = None
    guest: GuestIntent | None = None

    def kind(self) -> IntentKind:
        """The single populated slot. Raises ``VariantError`` (see class doc)."""
        return IntentKind(self._resolve()[0])

    def variant(self) -> IntentVariant:
        """The payload of the single populated slot. Raises ``VariantError``."""
        payload: IntentVariant = self._resolve()[1]
        return payload
