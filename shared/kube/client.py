"""The Kubernetes API client both binaries share.

:mod:`shared.kube.kubeconfig` supplies the server and the credentials (kubeconfig, in-cluster
service-account token re-read every minute and after a 401, exec plugins, client certs);
requests go through one pool of keep-alive connections (:mod:`shared.kube.http`), with an explicit
timeout and explicit ``Content-Type``/``Accept`` on every call, and bodies stay raw bytes that callers decode
with msgspec into our Structs (docs/runtime.md#client). Failures raise the typed errors of
:mod:`shared.kube.errors`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import msgspec
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, StatusCode

from shared.kube import tracing as _tracing
from shared.kube.errors import ApiError, Unauthorized, api_error
from shared.kube.http import READ_BUFFER, ConnectionPool, HttpError
from shared.kube.kubeconfig import (
    SERVICE_CERT_FILENAME,
    SERVICE_TOKEN_FILENAME,
    KubeConfig,
    load_incluster,
    load_kubeconfig,
)

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
"""Seconds allowed for one non-watch request (connect + response)."""

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
MAX_WATCH_EVENT_BYTES = 16 << 20
"""Largest watch event line accepted (16 MiB; etcd's default request limit is 1.5 MiB, so any
object the API server stores fits)."""

CONNECTION_LIMIT = 100
"""Connections open to the API server at once (kubernetes-asyncio's default; watches hold theirs)."""

APPLY_PATCH = "application/apply-patch+yaml"
"""Server-side apply; a JSON document is valid YAML, so the body stays JSON."""

_TRACER = trace.get_tracer("tatara.kube.client")

_VERBS = {"POST": "create", "PUT": "update", "DELETE": "delete"}


def request_attributes(method: str, path: str, query: Mapping[str, Any] | None,
                       content_type: str | None) -> tuple[str, dict[str, str]]:
    """The Kubernetes verb of a request (``get``, ``list``, ``create``, ``update``, ``patch``, ``apply``,
    ``delete``: the API server's audit verbs, ``apply`` for a server-side apply) and its span attributes:
    ``k8s.verb``, ``k8s.resource`` (``plural`` or ``plural/subresource``), ``k8s.namespace.name`` and
    ``k8s.object.name`` when the path has them, ``http.request.method``, ``url.path``.

    ``path`` is ``/api/v1/...`` or ``/apis/<group>/<version>/...``; another path (discovery: ``/api/v1``,
    ``/apis/batch/v1``, ``/version``) is its own resource, read with ``get``."""
    parts = [p for p in path.split("/") if p]
    rest = parts[2:] if parts[:1] == ["api"] else parts[3:] if parts[:1] == ["apis"] else []
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = (rest[0] if rest else path), (rest[1] if len(rest) > 1 else "")
    if len(rest) > 2:
        resource += "/" + "/".join(rest[2:])
    if method == "GET":
        verb = "get" if name or not rest else "watch" if (query or {}).get("watch") else "list"
    elif method == "PATCH":
        verb = "apply" if content_type == APPLY_PATCH else "patch"
    else:
        verb = _VERBS.get(method, method.lower())
    attributes = {"k8s.verb": verb, "k8s.resource": resource, "http.request.method": method, "url.path": path}
    if namespace:
        attributes["k8s.namespace.name"] = namespace
    if name:
        attributes["k8s.object.name"] = name
    return verb, attributes


@dataclass(frozen=True)
class Resource:
    """One API resource: group/version/plural plus its kind and scope.

    ``group`` is ``""`` for the core API (paths under ``/api/v1``).
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``<group>/<version>``, or just ``<version>`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The request path, e.g. ``/apis/g/v1/namespaces/ns/plural/name/status``.

        ``namespace`` None on a namespaced resource means "all namespaces" (list/watch only).
        """
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False)


class WatchEvent(msgspec.Struct, frozen=True):
    """One line of a watch stream: ``type`` is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.

    ``object`` is left undecoded (msgspec.Raw) so the informer decodes it into its own type.
    """

    type: str
    object: msgspec.Raw


_event_decoder = msgspec.json.Decoder(WatchEvent)


def proxy_for(host: str, configured: str | None = None) -> str | None:
    """The proxy URL for requests to ``host`` (an ``https://name:port`` URL); None: direct.

    ``configured`` (the kubeconfig's ``proxy-url``) wins; otherwise the environment decides as client-go's
    ``http.ProxyFromEnvironment`` does: ``HTTPS_PROXY``/``HTTP_PROXY`` (either case) by the URL's scheme,
    unless ``NO_PROXY`` covers the host. Credentials go in the proxy URL (``http://user:password@host:port``).
    Source: docs/runtime.md#client.
    """
    if configured:
        return configured
    import urllib.request  # once per client, and prometheus-client has loaded it already

    parts = urlsplit(host)
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.netloc):
        return None
    return proxy


class KubeClient:
    """Raw-bytes access to the API server over one shared HTTP session.

    Build with :meth:`from_kubeconfig`, :meth:`in_cluster` or :meth:`connect`; ``await
    close()`` when done (or ``async with``). Connections open on the first requests and are kept for
    the next ones; a client is used on one event loop at a time (``close()`` between two).

    Args:
        config: the server and credentials (:mod:`shared.kube.kubeconfig`).
        timeout: default seconds per request (:data:`DEFAULT_TIMEOUT`).
        user_agent: sent as ``User-Agent`` (default: the program name, as client-go does).
    """

    def __init__(self, config: KubeConfig, *, timeout: float = DEFAULT_TIMEOUT,
                 user_agent: str | None = None) -> None:
        self.config = config
        self.timeout = timeout
        self.user_agent = user_agent or (os.path.basename(sys.argv[0]) or "python")
        self.host = config.server.rstrip("/")
        self.hostname = urlsplit(self.host).netloc
        self.on_response: list[Any] = []
        """Callbacks ``(method, code, host)`` run after each response (e.g. rest_client_requests_total)."""
        self.proxy = proxy_for(self.host, config.proxy_url)
        """The proxy every request goes through (None: direct), resolved once here."""
        self._ssl = config.ssl_context() if self.host.startswith("https:") else None
        self._pool = self._new_pool()

    def _new_pool(self) -> ConnectionPool:
        return ConnectionPool(self.host, ssl_context=self._ssl, server_hostname=self.config.tls_server_name,
                              limit=CONNECTION_LIMIT, proxy=self.proxy, read_buffer=READ_BUFFER)

    # -- construction -------------------------------------------------------------------

    @classmethod
    async def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, context: str | None = None, **kwargs: Any
    ) -> KubeClient:
        """A client for ``path`` (default ``$KUBECONFIG`` or ``~/.kube/config``).

        Raises:
            shared.kube.kubeconfig.ConfigError: no usable kubeconfig or context.
        """
        return cls(load_kubeconfig(path, context), **kwargs)

    @classmethod
    def in_cluster(cls, *, token_file: str = SERVICE_TOKEN_FILENAME, ca_file: str = SERVICE_CERT_FILENAME,
                   environ: Mapping[str, str] | None = None, **kwargs: Any) -> KubeClient:
        """A client from the pod's service account: ``KUBERNETES_SERVICE_HOST``/``_PORT`` of ``environ``
        (default ``os.environ``), the CA and the projected token the kubelet mounts.

        The token file is re-read every minute and, as client-go's cached token source does, at once after
        a 401: the kubelet rotates the file before the old token expires, so a token that stopped being
        valid costs one refused request, not a minute of them (docs/runtime.md#client).

        Raises:
            shared.kube.kubeconfig.ConfigError: not in a pod (no service host, no token file).
        """
        return cls(load_incluster(token_file=token_file, ca_file=ca_file, environ=environ), **kwargs)

    @classmethod
    async def connect(cls, kubeconfig: str | os.PathLike[str] | None = None, **kwargs: Any) -> KubeClient:
        """In-cluster when running in a pod and no kubeconfig is given, else from the kubeconfig."""
        if kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ and not os.environ.get("KUBECONFIG"):
            return cls.in_cluster(**kwargs)
        return await cls.from_kubeconfig(Path(kubeconfig) if kubeconfig else None, **kwargs)

    async def close(self) -> None:
        """Close every connection (a request or watch on one fails with status 0). A request after this
        opens new ones, as the first request did."""
        pool, self._pool = self._pool, self._new_pool()
        await pool.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the one request path ------------------------------------------------------------

    async def _headers(self, content_type: str | None, accept: str) -> dict[str, str]:
        # gzip as client-go asks for it (its transport's default); the API server compresses large answers
        headers = {"Accept": accept, "User-Agent": self.user_agent, "Accept-Encoding": "gzip"}
        if content_type:
            headers["Content-Type"] = content_type
        authorization = self.config.credentials.authorization()
        if authorization:
            headers["Authorization"] = authorization
        return headers

    @staticmethod
    def _target(path: str, query: Mapping[str, Any] | None) -> str:
        url = path
        if query:
            pairs = {k: ("true" if v is True else "false" if v is False else v)
                     for k, v in query.items() if v is not None}
            if pairs:
                url += "?" + urlencode(pairs)
        return url

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        request_timeout: float | None = None,
    ) -> bytes:
        """Send one request and return the response body.

        A 401 is retried once after re-reading credentials (token rotation).

        Raises:
            ApiError: a typed subclass for the response status (404 → NotFound, ...);
                status 0 when the connection failed or timed out.
        """
        if body is not None and content_type is None:
            content_type = JSON
        if _tracing.enabled:
            return await self._traced(method, path, query, body, content_type, request_timeout)
        return await self._request(method, path, query, body, content_type, request_timeout, None)

    async def _traced(self, method: str, path: str, query: Mapping[str, Any] | None, body: bytes | None,
                      content_type: str | None, request_timeout: float | None) -> bytes:
        """:meth:`request` inside a client span (docs/runtime.md#traces): ``<verb> <resource>``, the
        Kubernetes verb, resource, namespace and name, the response status and the credential retries."""
        verb, attributes = request_attributes(method, path, query, content_type)
        with _TRACER.start_as_current_span(f"{verb} {attributes['k8s.resource']}", kind=SpanKind.CLIENT,
                                           attributes=attributes) as span:
            return await self._request(method, path, query, body, content_type, request_timeout, span)

    async def _request(self, method: str, path: str, query: Mapping[str, Any] | None, body: bytes | None,
                       content_type: str | None, request_timeout: float | None, span: Span | None) -> bytes:
        for attempt in (1, 2):
            headers = await self._headers(content_type, JSON)
            if span is not None:
                headers["traceparent"] = _tracing.format_traceparent(span.get_span_context())
                span.set_attribute("tatara.retries", attempt - 1)
            timeout = request_timeout or self.timeout
            try:
                resp = await self._pool.request(method, self._target(path, query), headers, body, deadline=timeout)
            except (TimeoutError, HttpError) as err:
                self._observe(method, 0)
                text = str(err) or f"no answer within {timeout:g} s"
                if span is not None:
                    span.set_status(StatusCode.ERROR, f"{type(err).__name__}: {text}")
                raise ApiError(0, type(err).__name__, f"{method} {path}: {text}") from err
            self._observe(method, resp.status)
            if span is not None:
                span.set_attribute("http.response.status_code", resp.status)
            if 200 <= resp.status < 300:
                return resp.body
            if span is not None:
                span.set_status(StatusCode.ERROR, f"HTTP {resp.status}")
            error = api_error(resp.status, resp.body)
            error.retry_after = _retry_after(resp.headers.get("retry-after"))
            if isinstance(error, Unauthorized):
                self._unauthorized()
                if attempt == 1:
                    continue
            raise error
        raise AssertionError("unreachable")

    def _unauthorized(self) -> None:
        self.config.credentials.expire()

    def _observe(self, method: str, code: int) -> None:
        for callback in self.on_response:
            callback(method, str(code) if code else "<error>", self.hostname)

    # -- verbs ----------------------------------------------------------------------------

    async def get(self, resource: Resource, name: str, namespace: str | None = None,
                  *, subresource: str | None = None) -> bytes:
        """GET one object; raw JSON bytes. Raises NotFound when absent."""
        return await self.request("GET", resource.path(namespace, name, subresource))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        request_timeout: float | None = None,
    ) -> bytes:
        """One LIST page; raw JSON bytes (``metadata.continue`` names the next page)."""
        query = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit,
                 "continue": continue_, "resourceVersion": resource_version}
        return await self.request("GET", resource.path(namespace), query=query, request_timeout=request_timeout)

    async def create(self, resource: Resource, body: bytes | Any, namespace: str | None = None) -> bytes:
        """POST a new object (``body`` as JSON bytes or any msgspec-encodable value). Raises Conflict if it exists."""
        return await self.request("POST", resource.path(namespace), body=_encode(body))

    async def replace(self, resource: Resource, name: str, body: bytes | Any, namespace: str | None = None,
                      *, subresource: str | None = None) -> bytes:
        """PUT the whole object; its ``metadata.resourceVersion`` is the optimistic-lock precondition."""
        return await self.request("PUT", resource.path(namespace, name, subresource), body=_encode(body))

    async def merge_patch(self, resource: Resource, name: str, patch: bytes | Any, namespace: str | None = None,
                          *, subresource: str | None = None) -> bytes:
        """JSON merge patch (RFC 7386): ``None`` values delete keys; lists are replaced whole."""
        return await self.request("PATCH", resource.path(namespace, name, subresource),
                                  body=_encode(patch), content_type=MERGE_PATCH)

    async def apply(self, resource: Resource, name: str, obj: bytes | Any, namespace: str | None = None, *,
                    field_manager: str, force: bool = True, subresource: str | None = None) -> bytes:
        """Server-side apply ``obj`` (must carry apiVersion and kind) as ``field_manager``."""
        return await self.request(
            "PATCH", resource.path(namespace, name, subresource),
            query={"fieldManager": field_manager, "force": force}, body=_encode(obj), content_type=APPLY_PATCH)

    async def delete(self, resource: Resource, name: str, namespace: str | None = None, *,
                     propagation_policy: str | None = None, uid: str | None = None,
                     resource_version: str | None = None) -> bytes:
        """DELETE, optionally with preconditions (uid / resourceVersion) and a propagation policy."""
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        if preconditions:
            options["preconditions"] = preconditions
        return await self.request("DELETE", resource.path(namespace, name), body=_encode(options))

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        timeout_seconds: int,
        inactivity_timeout: float,
        label_selector: str | None = None,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
    ) -> AsyncIterator[WatchEvent]:
        """Stream watch events from ``resource_version`` until the server ends the watch.

        Args:
            timeout_seconds: the server-side watch timeout (the server closes the stream then).
            inactivity_timeout: seconds without any byte (events or bookmarks) after which the
                stream is treated as stalled.
            send_initial_events: a watch-list (streaming list, KEP-3157): the state at
                ``resource_version`` or later (``resourceVersionMatch=NotOlderThan``; ``""``: the current
                state, a consistent read) as ADDED events first, ended by a BOOKMARK annotated
                ``k8s.io/initial-events-end: "true"``, then the watch goes on.

        Raises:
            WatchStalled: no byte arrived for ``inactivity_timeout`` seconds.
            ApiError: the watch request was refused (e.g. Gone on an expired resourceVersion).
        """
        query = {"watch": True, "resourceVersion": resource_version, "allowWatchBookmarks": allow_bookmarks,
                 "timeoutSeconds": timeout_seconds, "labelSelector": label_selector}
        if send_initial_events:
            query |= {"sendInitialEvents": True, "resourceVersionMatch": "NotOlderThan"}
        headers = await self._headers(None, JSON)
        try:
            async with self._pool.stream("GET", self._target(resource.path(namespace), query), headers,
                                         connect_timeout=self.timeout, read_timeout=inactivity_timeout) as resp:
                self._observe("WATCH", resp.status)
                if resp.status != 200:
                    if resp.status == 401:
                        self._unauthorized()
                    raise api_error(resp.status, await resp.read())
                # one event per line; the lines are cut from whatever the socket gave (readline is per line
                # and costs more than decoding a small event: the watch-list's initial state is many of them)
                pending = bytearray()
                async for chunk in resp.chunks():
                    pending += chunk
                    start = 0
                    while (end := pending.find(b"\n", start)) >= 0:
                        line = bytes(pending[start:end])
                        start = end + 1
                        if line.strip():
                            yield _watch_event(line)
                    del pending[:start]
                    if len(pending) > MAX_WATCH_EVENT_BYTES:
                        raise WatchBroken(0, "LineTooLong", f"a watch event over {MAX_WATCH_EVENT_BYTES} bytes")
                if pending.strip():
                    yield _watch_event(bytes(pending))
        except TimeoutError as err:
            raise WatchStalled(0, "WatchStalled", f"no data for {inactivity_timeout} s") from err
        except HttpError as err:
            raise WatchBroken(0, type(err).__name__, f"watch {resource.path(namespace)}: {err}") from err


def _watch_event(line: bytes) -> WatchEvent:
    try:
        return _event_decoder.decode(line)
    except msgspec.DecodeError as err:
        raise WatchBroken(0, "WatchBroken", f"undecodable watch event: {err}") from err


class WatchStalled(ApiError):
    """A watch delivered no byte (not even a bookmark) within the inactivity deadline."""


class WatchBroken(ApiError):
    """The watch stream failed mid-way (connection, an event too large, or undecodable); relist."""


def _retry_after(header: str | None) -> float | None:
    """``Retry-After`` in seconds (the API server sends an integer on 429 and some 5xx), else None."""
    try:
        return float(header) if header else None
    except ValueError:
        return None


def _encode(value: bytes | Any) -> bytes:
    return value if isinstance(value, bytes) else msgspec.json.encode(value)


def decode(raw: bytes, into: type[T]) -> T:
    """Decode API JSON ``raw`` into ``into`` (a msgspec Struct, dict, ...) with msgspec.

    Raises:
        msgspec.ValidationError: the JSON does not match ``into`` (the message names the field path).
    """
    return msgspec.json.decode(raw, type=into)


__all__ = [
    "APPLY_PATCH", "CONFIG_MAPS", "CUSTOM_RESOURCE_DEFINITIONS", "EVENTS", "JSON", "LEASES",
    "MERGE_PATCH", "NAMESPACES", "ApiError", "KubeClient", "Resource", "WatchBroken", "WatchEvent", "WatchStalled",
    "decode", "proxy_for",
]
