"""What ``tatara up`` serves real Flux on its own local plane so the examples really apply
(docs/architecture.md#real-flux): every ``oci://`` chart the examples name is pushed to the local registry (a
Deployment of the ``echo`` image when the local node runs, so Helm waits on real pods; without a node a
workload-free chart, ConfigMaps only) and the examples are rewritten to pull it from there; every GitRepository a flux
intent names is a repository on the local git server holding one ConfigMap per path, with a GitRepository object
pointing at it; and each namespace of a flux intent that decrypts with SOPS (``decryptSops``, true by default)
gets the ``sops-age`` Secret the rendered Kustomization names, empty: the examples hold nothing encrypted
(docs/behaviour.md#sops-decryption).

Pure planning (:func:`plan_local_flux`, :func:`retarget_charts`) and one executor (:func:`serve_examples`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
import yaml

from shared.domain.group import GROUP
from shared.domain.resources import GIT_REPOSITORIES
from shared.kube.client import CONFIG_MAPS, KubeClient, Resource
from tools.flux_stack import FLUX_NAMESPACE, FluxStack

SECRETS: Final = Resource("", "v1", "secrets", "Secret")
SOPS_SECRET: Final = "sops-age"
"""The Secret a rendered Kustomization's ``decryption.secretRef`` names (docs/behaviour.md#rendering)."""
FIELD_MANAGER: Final = "tatara-up"
CHART_TEMPLATE: Final = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-release
  namespace: {{ .Release.Namespace }}
data:
  chart: {{ .Chart.Name }}-{{ .Chart.Version }}
  profile: {{ .Values.profile | default "none" | quote }}
"""
"""The one template of every local chart without a node: a ConfigMap naming its release (a workload-free chart,
since without a kubelet no pod would ever be Ready and Helm waits for its resources)."""
WORKLOAD_TEMPLATE: Final = """{{- $port := 8080 }}
{{- with .Values.service }}{{ with .port }}{{ $port = . }}{{ end }}{{ end }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
  labels:
    app.kubernetes.io/name: {{ .Chart.Name }}
    app.kubernetes.io/instance: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicaCount | default 1 }}
  selector:
    matchLabels:
      app.kubernetes.io/instance: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: {{ .Chart.Name }}
        app.kubernetes.io/instance: {{ .Release.Name }}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 5
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: echo
          image: {{ .Values.image | default "%(image)s" }}
          imagePullPolicy: IfNotPresent
          env:
            - name: PORT
              value: {{ $port | quote }}
            - name: ECHO_MESSAGE
              value: "{{ .Chart.Name }} {{ .Chart.Version }}"
            - name: POD_NAMESPACE
              valueFrom:
                fieldRef:
                  fieldPath: metadata.namespace
          ports:
            - name: http
              containerPort: {{ $port }}
          readinessProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: 2
          resources:
            requests:
              cpu: 5m
              memory: 16Mi
            limits:
              memory: 64Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop:
                - ALL
"""
"""The second template of every local chart when a node runs: a Deployment of the ``echo`` image
(``tools/images/echo``) with ``replicaCount`` replicas on ``service.port``, Ready by its probe, so Helm (and
the Process's boundary conditions) wait on real pods. ``%(image)s`` is filled in with the image reference."""
APPLIED_BY: Final = ("kustomize.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/name")
"""The labels kustomize- and helm-controller put on every object they apply."""


@dataclass(frozen=True)
class LocalFlux:
    """What to serve: charts as {(repository, name): versions}, git trees as {(namespace, repo): {path: text}},
    and the namespaces that need :data:`SOPS_SECRET`."""

    charts: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    trees: Mapping[tuple[str, str], Mapping[str, str]] = field(default_factory=dict)
    sops_namespaces: frozenset[str] = frozenset()


def _aplicacaos(node: object) -> Iterator[dict[str, Any]]:
    """Every ``aplicacao`` intent object anywhere in ``node`` (a Process's, a pool template's)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "aplicacao" and isinstance(value, dict):
                yield value
            else:
                yield from _aplicacaos(value)
    elif isinstance(node, list):
        for item in node:
            yield from _aplicacaos(item)


def _oci_path(chart_ref: str) -> str | None:
    """``charts/x`` of ``oci://host[:port]/charts/x``; None for a non-OCI reference."""
    if not chart_ref.startswith("oci://"):
        return None
    _, _, path = chart_ref.removeprefix("oci://").partition("/")
    return path or None


def retarget_charts(doc: dict[str, Any], registry: str) -> dict[str, Any]:
    """``doc`` with every ``oci://<host>/<path>`` chart reference of its ``aplicacao`` intents moved to
    ``oci://<registry>/<path>``; a new document, ``doc`` is left alone."""
    def walk(node: object) -> object:
        if isinstance(node, dict):
            out = {k: walk(v) for k, v in node.items()}
            app = out.get("aplicacao")
            if isinstance(app, dict) and (path := _oci_path(str(app.get("chartRef", "")))):
                out["aplicacao"] = {**app, "chartRef": f"oci://{registry}/{path}"}
            return out
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    result = walk(doc)
    assert isinstance(result, dict)
    return result


def _configmap(name: str, namespace: str, path: str) -> str:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
           "data": {"path": path, "source": "tatara up local git server"}}
    return yaml.safe_dump(doc, sort_keys=False)


def plan_local_flux(docs: Iterable[dict[str, Any]]) -> LocalFlux:
    """What the example documents need served (see the module docstring).

    Each flux intent's path holds ``kustomization.yaml`` (listing only ``configmap.yaml``, so a parent path
    does not also apply its sub-paths' files) and ``configmap.yaml``: a ConfigMap ``<Process>-<last path
    segment>`` in the intent's ``targetNamespace`` or the Process's namespace.
    """
    charts: dict[tuple[str, str], set[str]] = {}
    trees: dict[tuple[str, str], dict[str, str]] = {}
    sops: set[str] = set()
    for doc in docs:
        for app in _aplicacaos(doc.get("spec")):
            path = _oci_path(str(app.get("chartRef", "")))
            if path and app.get("version"):
                repository, _, name = path.rpartition("/")
                charts.setdefault((repository, name), set()).add(str(app["version"]))
        flux = ((doc.get("spec") or {}).get("intent") or {}).get("flux")
        if doc.get("kind") != "Process" or not isinstance(flux, dict):
            continue
        meta = doc["metadata"]
        namespace = meta.get("namespace") or "default"
        target = flux.get("targetNamespace") or namespace
        path = posixpath.normpath(str(flux["path"]).removeprefix("./"))
        tree = trees.setdefault((flux.get("gitRepositoryNamespace") or FLUX_NAMESPACE, flux["gitRepository"]), {})
        prefix = "" if path == "." else f"{path}/"
        leaf = posixpath.basename(path) if path != "." else "root"
        tree[f"{prefix}configmap.yaml"] = _configmap(f"{meta['name']}-{leaf}", target, f"./{path}")
        tree[f"{prefix}kustomization.yaml"] = yaml.safe_dump(
            {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
             "resources": ["configmap.yaml"]}, sort_keys=False)
        if flux.get("decryptSops", True):
            sops.add(namespace)
    return LocalFlux({k: frozenset(v) for k, v in charts.items()}, trees, frozenset(sops))


def git_repository(namespace: str, name: str, url: str) -> dict[str, Any]:
    """A GitRepository on ``url``'s ``main`` branch, polled every minute."""
    return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"interval": "1m", "url": url, "ref": {"branch": "main"}}}


def sops_secret(namespace: str) -> dict[str, Any]:
    """The empty ``sops-age`` Secret: decryption configured, no key (nothing local is encrypted)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": SOPS_SECRET, "namespace": namespace, "annotations": {
                f"examples.{GROUP}/note": "created by tatara up: the rendered Kustomization decrypts with SOPS "
                                        "by default; put age keys here as <name>.agekey"}}}


def chart_templates(workload_image: str | None) -> dict[str, str]:
    """The templates of every local chart: :data:`CHART_TEMPLATE`, and :data:`WORKLOAD_TEMPLATE` deploying
    ``workload_image`` when one is given (a node runs)."""
    templates = {"release.yaml": CHART_TEMPLATE}
    if workload_image:
        templates["deployment.yaml"] = WORKLOAD_TEMPLATE % {"image": workload_image}
    return templates


async def serve_examples(client: KubeClient, stack: FluxStack, plan: LocalFlux,
                         ensure_namespace: Callable[[KubeClient, str], Awaitable[None]],
                         workload_image: str | None = None) -> list[str]:
    """Push the charts (:func:`chart_templates`), commit the git trees, apply the GitRepositories and Secrets;
    return one line per thing done (for ``tatara up`` to print). ``ensure_namespace(client, name)`` creates a
    namespace if missing.

    Raises:
        tools.flux_stack.FluxStackError: a push failed.
        tools.git_http.GitServerError: a commit failed.
    """
    lines = []
    for (repository, name), versions in sorted(plan.charts.items()):
        for version in sorted(versions):
            stack.push_chart(repository, name, version, chart_templates(workload_image))
            what = f"a Deployment of {workload_image} + a ConfigMap" if workload_image else "ConfigMaps only"
            lines.append(f"chart {stack.oci_url(f'{repository}/{name}')}:{version} pushed ({what})")
    for (namespace, repo), files in sorted(plan.trees.items()):
        sha = stack.git.commit(repo, files)
        await ensure_namespace(client, namespace)
        await client.apply(GIT_REPOSITORIES, repo, git_repository(namespace, repo, stack.git.url(repo)), namespace,
                           field_manager=FIELD_MANAGER)
        lines.append(f"GitRepository {namespace}/{repo} → {stack.git.url(repo)} (main {sha[:12]}, "
                     f"{len(files) // 2} path(s))")
    for namespace in sorted(plan.sops_namespaces):
        await ensure_namespace(client, namespace)
        await client.apply(SECRETS, SOPS_SECRET, sops_secret(namespace), namespace, field_manager=FIELD_MANAGER)
        lines.append(f"Secret {namespace}/{SOPS_SECRET} (empty: for the default SOPS decryption)")
    return lines


async def flux_applied(client: KubeClient, namespaces: Sequence[str]) -> list[str]:
    """``<namespace>/<name>`` of every ConfigMap real Flux applied in ``namespaces`` (labelled with one of
    :data:`APPLIED_BY`), sorted: what ``tatara up`` shows a user Flux really did."""
    found: set[str] = set()
    for namespace in namespaces:
        for label in APPLIED_BY:
            page = msgspec.json.decode(await client.list(CONFIG_MAPS, namespace, label_selector=label))
            found |= {f"{namespace}/{item['metadata']['name']}" for item in page.get("items") or []}
    return sorted(found)
