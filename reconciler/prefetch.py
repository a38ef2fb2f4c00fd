"""The I/O the pure boundary evaluation needs, fetched before ``decide`` (docs/behaviour.md#boundary-conditions).

:mod:`reconciler.boundary` reads only the :class:`~reconciler.decision.Observed` snapshot. Two
things in it do not come from the caches:

- PromQL results (``observed.prometheus``): each query of the phase's conditions is sent to
  ``GET <prometheus_url>/api/v1/query?query=…`` with an explicit timeout. A scalar, or the first
  sample of a vector, becomes a float; an error, a timeout or an empty vector becomes ``None``
  (boundary: "failed or returned no sample"). With no URL configured the map stays empty
  (boundary: "no Prometheus URL configured").
- Objects a condition names that are not owned children (a Job, a receipt ConfigMap, a
  Kustomization in another namespace): one GET each through the API client; 404 (or a kind the
  server does not serve) → left out, which boundary reads as absent.

Only the conditions the current phase evaluates are fetched: preconditions in Execing,
postconditions in Running and Attested (the heartbeat re-check). A Process without boundary
conditions costs no request here.

In Releasing, the receipt ConfigMaps of exports whose Job is missing or failed are fetched the same
way (:meth:`Prefetcher.release_inputs`, docs/behaviour.md#releasing), and for each export Job the Job
controller handled but that has no pod, its Warning Events: one LIST with the field selector
``involvedObject.kind=Job,involvedObject.name=<job>,type=Warning`` (:meth:`Prefetcher.job_warnings`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Final
from urllib.parse import urlencode, urlsplit

import anyio
import msgspec

from reconciler.boundary import promql_queries, referenced_refs
from reconciler.children import ChildRef, ChildState, child_state
from reconciler.exports import latest_warning, receipt_refs, without_pod
from shared.domain.api.boundary import Condition
from shared.domain.api.phase import ProcessPhase
from shared.domain.api.process import Process
from shared.domain.manifests.batch import JobWaiting, ObservedJob
from shared.kube.api import KubeApi
from shared.kube.client import EVENTS
from shared.kube.discovery import RESTMapper, UnknownKind
from shared.kube.errors import ApiError, NotFound
from shared.kube.http import ConnectionPool, HttpError, basic_authorization

__all__ = ["DEFAULT_PROMETHEUS_TIMEOUT", "Prefetcher", "conditions_for_phase", "parse_prometheus_response"]

log = logging.getLogger(__name__)

DEFAULT_PROMETHEUS_TIMEOUT: Final = 5.0
"""Seconds per Prometheus query (connect + read)."""

PROMETHEUS_CONNECTIONS: Final = 10
"""Connections open to Prometheus at once; more queries wait for one (each takes milliseconds)."""


def conditions_for_phase(process: Process) -> Sequence[Condition]:
    """The boundary conditions the phase machine evaluates in ``process``'s current phase."""
    phase = process.phase
    if phase is ProcessPhase.EXECING:
        return process.spec.boundary.preconditions
    if phase in (ProcessPhase.RUNNING, ProcessPhase.ATTESTED):
        return process.spec.boundary.postconditions
    return ()


class _Sample(msgspec.Struct):
    value: tuple[float | str, str] | None = None


class _Data(msgspec.Struct, rename="camel"):
    result_type: str = ""
    result: object = None


class _EventList(msgspec.Struct):
    items: list[dict[str, object]] = []


class _Response(msgspec.Struct):
    status: str = ""
    data: _Data = msgspec.field(default_factory=_Data)


def _number(text: object) -> float | None:
    try:
        value = float(str(text))
    except ValueError:
        return None
    return value


def parse_prometheus_response(raw: bytes) -> float | None:
    """The query's value from a Prometheus ``/api/v1/query`` body, or None.

    ``scalar`` (and ``string``) → its value; ``vector`` → the first sample's value (None when
    empty); anything else, ``status != "success"`` or an undecodable body → None. ``NaN`` is
    kept (boundary treats it as not truthy).
    """
    try:
        response = msgspec.json.decode(raw, type=_Response)
    except msgspec.DecodeError:
        return None
    if response.status != "success":
        return None
    data = response.data
    try:
        if data.result_type in ("scalar", "string"):
            _, text = msgspec.convert(data.result, tuple[float | str, str])
            return _number(text)
        if data.result_type == "vector":
            samples = msgspec.convert(data.result, list[_Sample])
            for sample in samples:
                if sample.value is not None:
                    return _number(sample.value[1])
            return None
    except msgspec.ValidationError:
        return None
    return None


class Prefetcher:
    """Fetches PromQL results and referenced objects for one Process's boundary conditions.

    Args:
        client: the API client (referenced objects).
        mapper: resolves a reference's apiVersion/kind to its resource.
        prometheus_url: base URL of the Prometheus HTTP API; empty disables PromQL fetches.
        timeout: seconds per Prometheus query.

    Owns a small connection pool to Prometheus (:mod:`shared.kube.http`; credentials in the URL become
    ``Authorization: Basic``), opened on first use; :meth:`run` (a manager runnable) or :meth:`close` closes it.
    """

    def __init__(self, client: KubeApi, mapper: RESTMapper, prometheus_url: str = "",
                 *, timeout: float = DEFAULT_PROMETHEUS_TIMEOUT) -> None:
        self.client = client
        self.mapper = mapper
        self.prometheus_url = prometheus_url.rstrip("/")
        self.timeout = timeout
        self._pool: ConnectionPool | None = None
        self._headers = {"Accept": "application/json"}
        self._path = urlsplit(self.prometheus_url).path
        if authorization := basic_authorization(self.prometheus_url):
            self._headers["Authorization"] = authorization

    async def run(self) -> None:
        """Wait until cancelled, then close the connections (a manager runnable)."""
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await self.close()

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def boundary_inputs(self, process: Process, owned: Collection[ChildRef]
                              ) -> tuple[dict[str, float | None], dict[ChildRef, ChildState]]:
        """``(prometheus, referenced)`` for the conditions of ``process``'s current phase.

        ``owned`` are refs already in the snapshot from the caches; they are not fetched again.
        """
        conditions = conditions_for_phase(process)
        if not conditions:
            return {}, {}
        refs = [r for r in referenced_refs(conditions, process) if r not in owned]
        queries = promql_queries(conditions)
        prometheus: dict[str, float | None] = {}
        referenced: dict[ChildRef, ChildState] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._fill_prometheus, queries, prometheus)
            tg.start_soon(self._fill_objects, refs, referenced)
        return prometheus, referenced

    async def release_inputs(self, process: Process, jobs: Mapping[int, ObservedJob]) -> dict[ChildRef, ChildState]:
        """The receipt ConfigMaps :func:`reconciler.exports.receipt_refs` names (none outside Releasing);
        an absent one is left out."""
        refs = receipt_refs(process, jobs)
        out: dict[ChildRef, ChildState] = {}
        if refs:
            await self._fill_objects(refs, out)
        return out

    async def job_warnings(self, process: Process, jobs: Mapping[int, ObservedJob]) -> dict[int, JobWaiting]:
        """The latest Warning Event of each export Job :func:`reconciler.exports.without_pod` names, by export
        index (none outside Releasing); a Job without one, or whose LIST failed (logged), is left out."""
        waiting = without_pod(process, jobs)
        out: dict[int, JobWaiting] = {}

        async def one(index: int, job: ObservedJob) -> None:
            ns, name = job.metadata.namespace or "default", job.metadata.name or ""
            try:
                raw = await self.client.list(EVENTS, ns, field_selector=(
                    f"involvedObject.kind=Job,involvedObject.name={name},type=Warning"))
                items = msgspec.json.decode(raw, type=_EventList).items
            except (ApiError, msgspec.ValidationError) as err:
                log.warning("Events of export Job %s/%s: %s", ns, name, err)
                return
            found = latest_warning(items, job.metadata.uid or "")
            if found is not None:
                out[index] = found

        if waiting:
            async with anyio.create_task_group() as tg:
                for index, job in waiting.items():
                    tg.start_soon(one, index, job)
        return out

    # -- PromQL -------------------------------------------------------------------------

    async def _fill_prometheus(self, queries: Sequence[str], out: dict[str, float | None]) -> None:
        out.update(await self.query_all(queries))

    async def query_all(self, queries: Sequence[str]) -> dict[str, float | None]:
        """Each query's value; ``{}`` when no Prometheus URL is configured."""
        if not self.prometheus_url or not queries:
            return {}
        out: dict[str, float | None] = {}

        async def one(query: str) -> None:
            out[query] = await self.query(query)

        async with anyio.create_task_group() as tg:
            for query in queries:
                tg.start_soon(one, query)
        return out

    async def query(self, query: str) -> float | None:
        """One instant query; None on any failure (logged at debug)."""
        target = f"{self._path}/api/v1/query?{urlencode({'query': query})}"
        try:
            if self._pool is None:
                self._pool = ConnectionPool(self.prometheus_url, limit=PROMETHEUS_CONNECTIONS)
            resp = await self._pool.request("GET", target, self._headers, deadline=self.timeout)
        except (TimeoutError, HttpError, ValueError) as err:  # ValueError: an unusable URL
            log.debug("prometheus query %r failed: %s", query, err or "timed out")
            return None
        if resp.status != 200:
            log.debug("prometheus query %r: HTTP %d", query, resp.status)
            return None
        return parse_prometheus_response(resp.body)

    # -- referenced objects -------------------------------------------------------------

    async def _fill_objects(self, refs: Sequence[ChildRef], out: dict[ChildRef, ChildState]) -> None:
        async def one(ref: ChildRef) -> None:
            state = await self.fetch(ref)
            if state is not None:
                out[ref] = state

        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(one, ref)

    async def fetch(self, ref: ChildRef) -> ChildState | None:
        """``ref``'s state from a GET; None when absent (404, kind not served) or the GET failed."""
        try:
            resource = await self.mapper.resource_for(ref.api_version, ref.kind)
            raw = await self.client.get(resource, ref.name, ref.namespace if resource.namespaced else None)
        except (NotFound, UnknownKind):
            return None
        except ApiError as err:
            log.warning("boundary reference %s %s/%s: %s", ref.kind, ref.namespace, ref.name, err)
            return None
        try:
            doc = msgspec.json.decode(raw, type=dict[str, object])
        except msgspec.ValidationError:
            return None  # not a JSON object
        return child_state(doc)
