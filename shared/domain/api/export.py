"""Exports: what an ephemeral Process ships out before it ends.

— docs/wire-format.md#exports; each runs as an export Job in Releasing (docs/behaviour.md#releasing).
"""

from __future__ import annotations

from typing import ClassVar, Final

from shared.domain.api.closed_set import ClosedSet
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.tagged_union import TaggedUnion
from shared.domain.api.wire import WireStruct

__all__ = [
    "DEFAULT_NATS_URL",
    "DEFAULT_VECTOR_INGEST",
    "ArtifactKind",
    "ArtifactSource",
    "ChannelKind",
    "ExportSpec",
    "ExportTrigger",
    "HttpEventChannel",
    "NatsSubjectChannel",
    "ProcessSnapshotSource",
    "ReceiptsSource",
    "ReportFormat",
    "ReportPayloadShape",
    "RunMarkerSource",
    "StdoutChannel",
    "TestReportSource",
    "VectorChannel",
]

DEFAULT_VECTOR_INGEST: Final = "http://vector.observability.svc.cluster.local:8080"
"""HTTP endpoint used when ``httpEvent.endpoint`` is unset."""

DEFAULT_NATS_URL: Final = "nats://nats.observability.svc.cluster.local:4222"
"""NATS URL used when ``natsSubject.url`` is unset."""


class ExportTrigger(ClosedSet):
    """At which gate an export fires. Default ``OnAttested``."""

    ON_ATTESTED = "OnAttested"
    ON_FAILED = "OnFailed"
    ALWAYS = "Always"

    def fires_on(self, phase: ProcessPhase) -> bool:
        """Attested → OnAttested/Always; Failed → OnFailed/Always; other phases → False."""
        if phase is ProcessPhase.ATTESTED:
            return self in (ExportTrigger.ON_ATTESTED, ExportTrigger.ALWAYS)
        if phase is ProcessPhase.FAILED:
            return self in (ExportTrigger.ON_FAILED, ExportTrigger.ALWAYS)
        return False


class ReportPayloadShape(ClosedSet):
    """How a test report is embedded in the export event (not on the wire)."""

    ND_JSON_LINES = "NdJsonLines"
    OPAQUE_BYTES = "OpaqueBytes"

    @property
    def payload_field(self) -> str:
        """``ndjson`` or ``raw_b64``."""
        return "ndjson" if self is ReportPayloadShape.ND_JSON_LINES else "raw_b64"


class ReportFormat(ClosedSet):
    """Format of a test report. Default ``Raw``."""

    JUNIT = "Junit"
    TAP_V13 = "TapV13"
    ND_JSON = "NdJson"
    RAW = "Raw"

    def payload_shape(self) -> ReportPayloadShape:
        """NdJson → NdJsonLines; every other format → OpaqueBytes."""
        if self is ReportFormat.ND_JSON:
            return ReportPayloadShape.ND_JSON_LINES
        return ReportPayloadShape.OPAQUE_BYTES


class ReceiptsSource(WireStruct):
    """Export the receipts annotated for this Process (always ``{}``)."""


class TestReportSource(WireStruct):
    """Export ``data[key]`` of a ConfigMap."""

    __test__: ClassVar[bool] = False  # not a pytest class

    configmap: str
    """Name of the ConfigMap that holds the report."""
    key: str
    """Key of the report in the ConfigMap's ``data`` (or ``binaryData``)."""
    format: ReportFormat = ReportFormat.RAW
    namespace: str | None = None
    """Namespace of the ConfigMap; absent: the Process's namespace."""


class ProcessSnapshotSource(WireStruct):
    """Export the whole Process object as JSON."""

    include_attestation_chain: bool = False
    """Also ship the chain of earlier attestations. Default false."""


class RunMarkerSource(WireStruct):
    """Export an empty marker event carrying ``labels``."""

    labels: dict[str, str] = {}
    """Labels added to the run marker event: name → value. Default empty."""


class ArtifactKind(ClosedSet):
    """The ArtifactSource slot names."""

    RECEIPTS = "receipts"
    TEST_REPORT = "testReport"
    PROCESS_SNAPSHOT = "processSnapshot"
    RUN_MARKER = "runMarker"


ArtifactVariant = ReceiptsSource | TestReportSource | ProcessSnapshotSource | RunMarkerSource


class ArtifactSource(TaggedUnion):
    """What an export ships: exactly one of four slots."""

    _noun: ClassVar[str] = "artifact source"

    receipts: ReceiptsSource | None = None
    test_report: TestReportSource | None = None
    process_snapshot: ProcessSnapshotSource | None = None
    run_marker: RunMarkerSource | None = None

    def kind(self) -> ArtifactKind:
        """The single populated slot. Raises ``VariantError``."""
        return ArtifactKind(self._resolve()[0])

    def variant(self) -> ArtifactVariant:
        """The single populated payload. Raises ``VariantError``."""
        payload: ArtifactVariant = self._resolve()[1]
        return payload


class HttpEventChannel(WireStruct):
    """POST the event to a Vector HTTP source."""

    endpoint: str | None = None
    """URL the event is POSTed to; absent: ``http://vector.observability.svc.cluster.local:8080``."""
    signal_type: str
    """Signal type of the event, sent as the ``X-Tatara-Signal-Type`` header."""

    @property
    def resolved_endpoint(self) -> str:
        """``endpoint`` or :data:`DEFAULT_VECTOR_INGEST`."""
        return self.endpoint if self.endpoint is not None else DEFAULT_VECTOR_INGEST


class NatsSubjectChannel(WireStruct):
    """Publish the event to NATS JetStream; ``subject`` may contain ``{{run_id}}``."""

    subject: str
    """NATS subject to publish to; ``{{run_id}}`` is replaced by the run id."""
    stream: str
    """JetStream stream that holds the subject."""
    url: str | None = None
    """NATS server URL; absent: ``nats://nats.observability.svc.cluster.local:4222``."""

    @property
    def resolved_url(self) -> str:
        """``url`` or :data:`DEFAULT_NATS_URL`."""
        return self.url if self.url is not None else DEFAULT_NATS_URL


class StdoutChannel(WireStruct):
    """Print the event on the worker's stdout."""

    pretty: bool = False
    """Print the event as indented JSON instead of one line. Default false."""


class ChannelKind(ClosedSet):
    """The VectorChannel slot names."""

    HTTP_EVENT = "httpEvent"
    NATS_SUBJECT = "natsSubject"
    STDOUT = "stdout"


ChannelVariant = HttpEventChannel | NatsSubjectChannel | StdoutChannel


class VectorChannel(TaggedUnion):
    """Where an export goes: exactly one of three slots."""

    _noun: ClassVar[str] = "vector channel"

    http_event: HttpEventChannel | None = None
    nats_subject: NatsSubjectChannel | None = None
    stdout: StdoutChannel | None = None

    def kind(self) -> ChannelKind:
        """The single populated slot. Raises ``VariantError``."""
        return ChannelKind(self._resolve()[0])

    def variant(self) -> ChannelVariant:
        """The single populated payload. Raises ``VariantError``."""
        payload: ChannelVariant = self._resolve()[1]
        return payload


class ExportSpec(WireStruct):
    """One element of ``lifetime.ephemeral.exports``."""

    source: ArtifactSource
    channel: VectorChannel
    when: ExportTrigger = ExportTrigger.ON_ATTESTED
    experiment_id_override: str | None = None
    """Run id of the event; absent or empty: ``<namespace>/<name>`` of the Process."""
