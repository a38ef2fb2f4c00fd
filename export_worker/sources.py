"""Reading an export's artifact bytes from the API server, one reader per source.

— docs/behaviour.md#the-export-worker. ``runMarker`` has no bytes; ``testReport`` reads ``data[key]`` (UTF-8)
or else ``binaryData[key]`` of a ConfigMap; ``processSnapshot`` is the Process object's JSON; ``receipts`` is a
JSON array of every receipt found in the ConfigMaps annotated for the Process (:func:`collect_receipts`, pure).
A source that cannot be read raises :class:`SourceError` with the message the receipt records.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec

from shared.domain import annotations as ann
from shared.domain import labels
from shared.domain.api.codec import to_wire
from shared.domain.api.export import (
    ArtifactVariant,
    ProcessSnapshotSource,
    ReceiptsSource,
    RunMarkerSource,
    TestReportSource,
)
from shared.domain.api.receipt import ReceiptEnvelope, ReceiptError, parse_either
from shared.domain.canonical_json import canonical_json
from shared.domain.resources import PROCESSES
from shared.domain.rust_text import debug_str
from shared.kube.api import KubeApi
from shared.kube.client import CONFIG_MAPS
from shared.kube.errors import ApiError, NotFound
from shared.kube.meta import ObjectMeta
from shared.kube.pager import list_all

__all__ = ["Artifact", "CollectedReceipts", "ConfigMap", "SourceError", "collect_receipts", "read_artifact"]


class SourceError(Exception):
    """The artifact could not be read; ``str()`` is the receipt's error, e.g.
    ``testReport: ConfigMap ns/results has no key "junit.xml"``."""


class ConfigMap(msgspec.Struct, frozen=True, rename="camel"):
    """The parts of a ConfigMap the worker reads (``binaryData`` values are base64 text on the wire)."""

    metadata: ObjectMeta = ObjectMeta()
    data: dict[str, str] = {}
    binary_data: dict[str, str] = {}


_configmap = msgspec.json.Decoder(ConfigMap)


@dataclass(frozen=True)
class Artifact:
    """The bytes of one source; ``skipped_receipts`` is set for the receipts source only."""

    data: bytes
    skipped_receipts: int | None = None
    unparsable: tuple[str, ...] = ()
    """``<configmap>/<key>`` of each skipped value (receipts source only)."""


@dataclass(frozen=True)
class CollectedReceipts:
    """Receipts that parsed, in ConfigMap order then ``data`` key order, and how many values did not."""

    envelopes: list[ReceiptEnvelope]
    skipped: int
    unparsable: tuple[str, ...] = ()
    """``<configmap>/<key>`` of each value that did not parse, in the same order."""

    def artifact(self) -> Artifact:
        """The receipts as a JSON array (each envelope in its wire form)."""
        return Artifact(canonical_json([to_wire(e) for e in self.envelopes]), self.skipped, self.unparsable)


def collect_receipts(configmaps: Iterable[ConfigMap], process_ref: str) -> CollectedReceipts:
    """Every ``data`` value, parsed as a receipt (JSON, then YAML), of the ConfigMaps annotated
    ``tatara.pleme.io/process=<process_ref>``; values that do not parse are counted in ``skipped``.

    ConfigMaps labelled ``tatara.pleme.io/role=export`` (export receipts, which this worker writes) are
    left out, so an export never ships another export's receipt (docs/divergences.md#export-receipt-metadata).
    """
    envelopes: list[ReceiptEnvelope] = []
    unparsable: list[str] = []
    for cm in configmaps:
        if cm.metadata.annotations.get(ann.PROCESS) != process_ref:
            continue
        if cm.metadata.labels.get(labels.ROLE) == labels.ROLE_EXPORT:
            continue
        for key in sorted(cm.data):
            try:
                envelopes.append(parse_either(cm.data[key]))
            except ReceiptError:
                unparsable.append(f"{cm.metadata.name}/{key}")
    return CollectedReceipts(envelopes, len(unparsable), tuple(unparsable))


def _decode_configmap(raw: msgspec.Raw) -> ConfigMap | None:
    try:
        return _configmap.decode(raw)
    except msgspec.DecodeError:
        return None


async def _test_report(client: KubeApi, source: TestReportSource, namespace: str) -> Artifact:
    ns = source.namespace or namespace
    where = f"ConfigMap {ns}/{source.configmap}"
    try:
        cm = _configmap.decode(await client.get(CONFIG_MAPS, source.configmap, ns))
    except NotFound:
        raise SourceError(f"testReport: {where} not found") from None
    except ApiError as err:
        raise SourceError(f"testReport: get {where}: {err}") from None
    if source.key in cm.data:
        return Artifact(cm.data[source.key].encode("utf-8"))
    if source.key in cm.binary_data:
        try:
            return Artifact(base64.b64decode(cm.binary_data[source.key], validate=True))
        except binascii.Error:
            raise SourceError(f"testReport: {where} binaryData[{debug_str(source.key)}] is not base64") from None
    raise SourceError(f"testReport: {where} has no key {debug_str(source.key)}")


async def read_artifact(client: KubeApi, source: ArtifactVariant, namespace: str, name: str) -> Artifact:
    """The artifact of ``source`` for the Process ``namespace/name``.

    Raises:
        SourceError: a testReport ConfigMap or key that is missing, or any API error (the message names
            the source and the object).
    """
    if isinstance(source, RunMarkerSource):
        return Artifact(b"")
    if isinstance(source, TestReportSource):
        return await _test_report(client, source, namespace)
    if isinstance(source, ProcessSnapshotSource):
        try:
            return Artifact(await client.get(PROCESSES, name, namespace))
        except ApiError as err:
            raise SourceError(f"processSnapshot: get Process {namespace}/{name}: {err}") from None
    if isinstance(source, ReceiptsSource):
        try:
            listing = await list_all(client, CONFIG_MAPS, _decode_configmap, namespace)
        except ApiError as err:
            raise SourceError(f"receipts: list ConfigMaps in {namespace}: {err}") from None
        return collect_receipts(listing.items, ann.qualified_ref(namespace, name)).artifact()
    raise TypeError(f"not an artifact source: {type(source).__name__}")  # pragma: no cover
