"""RBAC proven, not assumed: both binaries run as local processes with bearer tokens of the charts' ServiceAccounts,
the export Jobs' worker runs under the token of the chart's export-worker ServiceAccount (the Job runner stand-in),
and only the RBAC objects ``helm template`` renders grant them anything: once with ``watchNamespace`` set
(namespaced bindings) on the session's plane, once watching every namespace on a plane of the module's own (cluster-
wide bindings, Jobs still per namespace). They go through the examples: a flux intent → Attested → deleted; a routed
Process claiming its stable name (Ingress, DNSEndpoint, ProcessTable claims); the closed-loop example, whose
boundary conditions read a Job and a receipt ConfigMap, with the observability example's Kustomization and
HelmRelease conditions; the exports example shipping through the real worker; a pool fill / bind / release /
teardown, and a Reset pool's reset Job.

Then the API server's audit log of the run (tools/controlplane/audit.py) is read: a request RBAC refused, or a grant
of the rendered charts no request used, fails the test, except the grants :data:`UNEXERCISED` names with the code
path that needs them, which each chart's README documents too, and the ``list`` grants of resources an informer
streamed with a watch-list (``watch_list_fallbacks``: the LIST fallback needs them; the README says so too). Any 403
in a binary's log fails the test at once with the forbidden lines."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
import pytest
import yaml

from shared.domain.api.table import PROCESS_TABLE_NAME
from shared.domain.resources import (
    DNS_ENDPOINTS,
    EPHEMERAL_ALLOCATIONS,
    EPHEMERAL_POOLS,
    INGRESSES,
    JOBS,
    PROCESS_TABLES,
    PROCESSES,
)
from shared.kube.client import CONFIG_MAPS, NAMESPACES, KubeClient, Resource
from shared.kube.errors import Forbidden, NotFound
from tests.support.jobs import finish_job
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane
from tools.controlplane.audit import (
    Grant,
    denied,
    grants_of,
    parse_events,
    service_account_user,
    unexercised,
    watch_list_fallbacks,
)
from tools.controlplane.cluster import free_port
from tools.crds import all_crds, install_crds
from tools.processes import stop_process_groups
from tools.standins.flux import FluxStandIn
from tools.standins.jobs import JobRunnerStandIn
from tools.up_exports import export_worker_command

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
T = TypeVar("T")

SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
                                 namespaced=False)
# Applied in this order: the subject first (TokenRequest needs it), then what grants it anything.
RBAC_KINDS = {"ServiceAccount": SERVICE_ACCOUNTS, "ClusterRole": CLUSTER_ROLES,
              "ClusterRoleBinding": CLUSTER_ROLE_BINDINGS, "Role": ROLES, "RoleBinding": ROLE_BINDINGS}
MODULES = {"tatara-reconciler": "reconciler.main", "tatara-pool-reconciler": "pool_reconciler.main"}
FORBIDDEN = re.compile(r"forbidden|(?<![\w.-])403(?![\w.-])", re.IGNORECASE)


@pytest.fixture
async def admin(control_plane: LocalControlPlane) -> AsyncIterator[KubeClient]:
    async with await KubeClient.from_kubeconfig(control_plane.kubeconfig) as kc:
        yield kc


WORKER_IMAGE = "localhost/tatara-export-worker:rbac"
"""``config.exportWorkerImage``: the Job runner stand-in runs the local ``tatara-export-worker`` for it."""
WORKER_ACCOUNT = "tatara-export-worker"
"""The chart's ``config.exportWorkerServiceAccount`` default (charts/tatara-reconciler/values.yaml)."""
LB = "lb.example.test"
"""``config.dnsLbTarget``: set, so routed Processes render DNSEndpoints."""

Key = tuple[str, str, str, str]
"""``(chart or "export-worker", API group, resource or URL, verb)`` of a grant, wherever it is bound."""

UNEXERCISED: dict[Key, str] = {
    ("tatara-reconciler", "tatara.pleme.io", "processes", "get"): "shared/kube/finalizer.py",
    ("tatara-reconciler", "", "events", "patch"): "shared/kube/events.py",
    ("tatara-reconciler", "", "events", "list"): "reconciler/prefetch.py",
    ("tatara-pool-reconciler", "tatara.pleme.io", "ephemeralpools", "get"): "shared/kube/finalizer.py",
    ("tatara-pool-reconciler", "", "events", "patch"): "shared/kube/events.py",
    ("export-worker", "", "events", "patch"): "shared/kube/events.py",
}
"""Grants a run may not reach, each with the code path that needs it (also in the chart's README "RBAC"): a
re-read after a 409 (or, with ``watchNamespace``, of a claim's holder in another namespace), a repeated Event, the
Warning Events of an export Job seen before it has a pod."""

UNEXERCISED_IN: dict[tuple[Key, str], str] = {
    (("tatara-reconciler", "", "events", "create"), "default"): "reconciler/table_keeper.py",
    (("tatara-reconciler", "", "events", "patch"), "default"): "reconciler/table_keeper.py",
}
"""Grants a run may not reach in one namespace only (``watchNamespace`` set): the ProcessTable's Warning Events,
which live in ``default`` like every cluster-scoped object's, written only when the table is recreated or deleted
while PIDs are held. The same verbs in the watched namespace stay checked."""

FIRST_START: dict[Key, str] = {
    ("tatara-reconciler", "tatara.pleme.io", "processtables", "create"): "reconciler/table_keeper.py",
    ("tatara-reconciler", "tatara.pleme.io", "processes", "list"): "reconciler/table_keeper.py",
}
"""Grants used only when the ProcessTable is missing (a LIST of every Process, then the create): excused when
an earlier test of the session made the table (with ``watchNamespace``, the LIST is the only cluster-wide one)."""


def render(helm: Path, chart: str, release: str, namespace: str, *sets: str) -> list[dict[str, Any]]:
    """``helm template`` of ``chart`` with ``--set`` of each of ``sets``."""
    proc = subprocess.run([str(helm), "template", release, str(ROOT / "charts" / chart), "--namespace", namespace,
                           *(a for v in sets for a in ("--set", v))],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"helm template {chart} failed:\n{proc.stderr}"
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def chart_values(chart: str, namespace: str, *, watched: bool) -> list[str]:
    """The settings of a run in ``namespace``: ``watchNamespace`` (``watched``), else that namespace listed for
    Jobs (``exportWorker.namespaces`` / ``rbac.jobNamespaces``); for the Process reconciler also the export
    worker's namespace and image and a DNS target (so DNSEndpoints are rendered)."""
    if chart == "tatara-reconciler":
        return [*([f"watchNamespace={namespace}"] if watched else []), f"exportWorker.namespaces={{{namespace}}}",
                f"config.exportWorkerImage={WORKER_IMAGE}", f"config.dnsLbTarget={LB}"]
    return [f"watchNamespace={namespace}"] if watched else [f"rbac.jobNamespaces={{{namespace}}}"]


def cluster_bindings(chart: str, fullname: str, *, watched: bool) -> list[str]:
    """The ClusterRoleBindings a run renders: with ``watchNamespace`` only the cluster-scoped one (the Process
    reconciler's ProcessTable, cross-namespace reads, discovery), else the watched namespaces' one too."""
    if chart == "tatara-reconciler":
        return [f"{fullname}-cluster"] if watched else [fullname, f"{fullname}-cluster"]
    return [] if watched else [fullname]


def container_args(docs: list[dict[str, Any]]) -> list[str]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def controller_account(docs: list[dict[str, Any]]) -> str:
    (sa,) = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"
             and d["metadata"]["labels"]["app.kubernetes.io/component"] == "controller"]
    return str(sa)


def write_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A kubeconfig with the admin's server and CA and nothing but ``token`` as credentials."""
    source = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = dict(source["clusters"][0]["cluster"])
    if "certificate-authority" in cluster:
        ca = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(ca).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "plane", "cluster": {k: cluster[k] for k in ("server", "certificate-authority-data")}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "plane", "user": "sa"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Binary:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def forbidden(self) -> list[str]:
        return [line for line in self.text().splitlines() if FORBIDDEN.search(line)]


@contextmanager
def binaries(specs: list[tuple[str, list[str], Path]], logs: Path) -> Iterator[list[Binary]]:
    """Each ``(name, args, kubeconfig)`` as a subprocess (its own session); SIGTERM, then SIGKILL, at the end."""
    running: list[Binary] = []
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    try:
        for name, args, kubeconfig in specs:
            log = logs / f"{name}.log"
            with open(log, "wb") as handle:
                proc = subprocess.Popen([sys.executable, "-m", MODULES[name], *args], cwd=ROOT,
                                        stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
                                        env={**env, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1"})
            running.append(Binary(name, proc, log))
        yield running
    finally:
        stop_process_groups([b.proc for b in running], 10)


def report(running: list[Binary]) -> str:
    """Forbidden lines of each binary, or the tail of its log when there are none."""
    parts = []
    for b in running:
        bad = b.forbidden()
        state = "running" if b.proc.poll() is None else f"exited {b.proc.returncode}"
        body = "\n".join(bad) if bad else "\n".join(b.text().splitlines()[-15:])
        parts.append(f"--- {b.name} ({state}; {'FORBIDDEN lines' if bad else 'log tail'}):\n{body}")
    return "\n".join(parts)


async def until(running: list[Binary], probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """``wait_for`` that fails at once on a 403 or a dead binary, with the offending log lines."""
    async def guarded() -> T | None:
        for b in running:
            assert b.proc.poll() is None, f"{b.name} exited while waiting for {what}\n{report(running)}"
            assert not b.forbidden(), f"403 while waiting for {what}\n{report(running)}"
        return await probe()

    try:
        return await wait_for(guarded, timeout=TIMEOUT, interval=0.2, what=what)
    except TimeoutError as err:
        raise AssertionError(f"{err}\n{report(running)}") from None


async def read(kc: KubeClient, resource: Resource, name: str, ns: str | None) -> dict[str, Any] | None:
    try:
        result: dict[str, Any] = msgspec.json.decode(await kc.get(resource, name, ns))
    except NotFound:
        return None
    return result


def example(path: str, kind: str, namespace: str) -> dict[str, Any]:
    doc: dict[str, Any]
    (doc,) = [d for d in yaml.safe_load_all((ROOT / "examples" / path).read_text()) if d and d["kind"] == kind]
    doc["metadata"]["namespace"] = namespace
    doc["metadata"].pop("annotations", None)
    if kind == "EphemeralAllocation":
        doc["spec"]["poolRef"]["namespace"] = namespace
    return doc


def examples_of(path: str, kind: str, namespace: str) -> list[dict[str, Any]]:
    """Every ``kind`` document of ``examples/<path>``, moved to ``namespace`` (annotations naming a Process by
    ``<namespace>/<name>`` follow it)."""
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / path).read_text()) if d and d["kind"] == kind]
    for doc in docs:
        old = doc["metadata"].get("namespace", "default")
        doc["metadata"]["namespace"] = namespace
        annotations = doc["metadata"].get("annotations") or {}
        for key, value in annotations.items():
            if isinstance(value, str) and value.startswith(f"{old}/"):
                annotations[key] = f"{namespace}/{value.removeprefix(f'{old}/')}"
    return docs


def grant_key(grant: Grant, roles: dict[str, str]) -> Key:
    return (roles[grant.user], grant.api_group, grant.url or grant.resource, grant.verb)


async def test_every_grant_is_used_and_none_refused_through_the_examples(
    control_plane: LocalControlPlane, helm: Path, admin: KubeClient, namespace: str, tmp_path: Path
) -> None:
    """``watchNamespace`` set: namespaced bindings only (but for what is cluster-scoped by nature)."""
    await through_the_examples(control_plane, helm, admin, namespace, tmp_path, watched=True)


@pytest.fixture(scope="module")
def own_plane() -> Iterator[LocalControlPlane]:
    """A control plane of this module's own, with an audit log: controllers watching every namespace must find
    no other test's objects there."""
    with LocalControlPlane(audit=True) as plane:
        yield plane


async def test_every_grant_is_used_and_none_refused_watching_every_namespace(
    own_plane: LocalControlPlane, helm: Path, tmp_path: Path
) -> None:
    """No ``watchNamespace``: the watched namespaces' grants cluster-wide, Jobs and ConfigMaps still by a
    RoleBinding in the listed namespace only."""
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    async with await KubeClient.from_kubeconfig(own_plane.kubeconfig) as admin:
        await admin.create(NAMESPACES, {"metadata": {"name": namespace}}, None)
        await through_the_examples(own_plane, helm, admin, namespace, tmp_path, watched=False)


async def through_the_examples(control_plane: LocalControlPlane, helm: Path, admin: KubeClient, namespace: str,
                               tmp_path: Path, *, watched: bool) -> None:
    """Install the charts' RBAC rendered for ``namespace`` (:func:`chart_values`), run everything as the charts'
    ServiceAccounts through :func:`lifecycles`, then judge the audit log (module docstring)."""
    assert control_plane.audit, "the control plane keeps an audit log (tests/conftest.py)"
    await install_crds(admin, all_crds())
    # A ProcessTable left by an earlier test is not created again (and the reconciler needs no create then).
    table_existed = await read(admin, PROCESS_TABLES, PROCESS_TABLE_NAME, None) is not None
    release = f"rbac-{uuid.uuid4().hex[:6]}"
    created: list[tuple[Resource, str, str | None]] = []
    specs: list[tuple[str, list[str], Path]] = []
    rendered: list[dict[str, Any]] = []
    roles = {service_account_user(namespace, WORKER_ACCOUNT): "export-worker"}
    try:
        for chart in MODULES:
            docs = render(helm, chart, release, namespace, *chart_values(chart, namespace, watched=watched))
            rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
            bound = sorted(d["metadata"]["name"] for d in rbac if d["kind"] == "ClusterRoleBinding")
            assert bound == cluster_bindings(chart, f"{release}-{chart}", watched=watched)
            rendered += rbac
            for kind, resource in RBAC_KINDS.items():
                for doc in (d for d in rbac if d["kind"] == kind):
                    ns = doc["metadata"]["namespace"] if resource.namespaced else None
                    # the release's namespace, or "default" for the ProcessTable's Events (watchNamespace set)
                    assert ns in (None, namespace, "default"), doc["metadata"]
                    await admin.create(resource, doc, ns)
                    created.append((resource, doc["metadata"]["name"], ns))
            sa = controller_account(docs)
            roles[service_account_user(namespace, sa)] = chart
            minted = msgspec.json.decode(await admin.request(
                "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token",
                body=json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                 "spec": {"expirationSeconds": 3600}}).encode()))
            kubeconfig = write_kubeconfig(control_plane.kubeconfig, minted["status"]["token"],
                                          tmp_path / f"kubeconfig-{chart}")
            # The kubeconfig authenticates as the ServiceAccount, not as an admin: Secrets are not granted.
            async with await KubeClient.from_kubeconfig(kubeconfig) as as_sa:
                with pytest.raises(Forbidden, match=f"system:serviceaccount:{namespace}:{sa}"):
                    await as_sa.list(SECRETS, namespace)
            args = [a for a in container_args(docs) if not a.startswith("--health-addr=")]
            assert "--leader-elect=true" in args, args
            assert f"--leader-election-namespace={namespace}" in args, args
            assert f"--watch-namespace={namespace if watched else ''}" in args, args
            specs.append((chart, [*args, f"--health-addr=127.0.0.1:{free_port()}"], kubeconfig))

        runner = JobRunnerStandIn(admin, server=control_plane.server, ca_file=control_plane.ca_file,
                                  logs=tmp_path / "jobs", entrypoints={WORKER_IMAGE: export_worker_command()},
                                  namespace=namespace, retry_base=0.2)
        with binaries(specs, tmp_path) as running:
            async with anyio.create_task_group() as tg:
                tg.start_soon(FluxStandIn(admin, namespace=namespace).run)
                tg.start_soon(runner.run)
                await lifecycles(admin, namespace, running)
                tg.cancel_scope.cancel()
            assert all(b.proc.poll() is None for b in running), report(running)
        for b in running:
            assert not b.forbidden(), f"{b.name} was refused a request:\n" + "\n".join(b.forbidden())
            assert '"msg"' in b.text(), f"{b.name} wrote no JSON log:\n{b.text()[-2000:]}"
    finally:
        for resource, name, ns in reversed(created):
            if not resource.namespaced:
                with suppress(NotFound):
                    await admin.delete(resource, name, ns)

    events = [e for e in parse_events(control_plane.audit_log.read_text().splitlines()) if e.user in roles]
    refused = [(e.user, e.verb, e.resource, e.namespace) for e in denied(events, roles)]
    # Exactly the Secrets probe above, one per controller: the log shows refusals, and there was no other.
    probes = [(user, "list", "secrets", namespace) for user, who in roles.items() if who in MODULES]
    assert sorted(refused) == sorted(probes), "refused:\n" + "\n".join(map(str, refused))
    grants = [g for g in grants_of(rendered) if g.user in roles]
    assert {g.user for g in grants} == set(roles), "each ServiceAccount is granted something"
    expected_idle = {**UNEXERCISED, **(FIRST_START if table_existed else {})}
    keys = {grant_key(g, roles) for g in grants}
    assert sorted(set(expected_idle) - keys) == [], "UNEXERCISED names grants the charts no longer give"
    unused = unexercised(grants, events)
    # ``list`` on a resource an informer streamed with a watch-list (allowed by the same scope's ``watch`` grant):
    # needed only for the LIST fallback on an API server without watch-lists (docs/runtime.md#informer). Every
    # other ``list`` (PID counts, the table keeper's count, ``tatara ps``) must still have been sent.
    fallback_only = watch_list_fallbacks(unused, events)
    assert fallback_only, "the informers streamed their state with watch-lists"
    idle = [g for g in unused if grant_key(g, roles) not in expected_idle
            and (grant_key(g, roles), g.namespace) not in UNEXERCISED_IN and g not in fallback_only]
    assert not idle, "granted, never used:\n" + "\n".join(f"{roles[g.user]}: {g.describe()}" for g in idle)


def test_the_unexercised_grants_are_documented_with_their_code_paths() -> None:
    """Each grant :data:`UNEXERCISED` excuses is in its chart's README "RBAC" section, in a list item naming the
    code path that needs it."""
    excused = {**UNEXERCISED, **FIRST_START, **{key: path for (key, _), path in UNEXERCISED_IN.items()}}
    for (who, _, resource, verb), path in excused.items():
        chart = "tatara-reconciler" if who == "export-worker" else who
        readme = (ROOT / "charts" / chart / "README.md").read_text()
        section = readme[readme.index("## RBAC"):]
        items = [" ".join(item.split()) for item in re.split(r"\n(?=- )", section[:section.index("\n## ")])]
        assert any(item.startswith("- ") and resource in item.lower() and f"`{verb}`" in item and path in item
                   for item in items), (who, resource, verb, path)


def is_true(obj: dict[str, Any] | None, condition: str) -> bool:
    return any(c.get("type") == condition and c.get("status") == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


async def lifecycles(kc: KubeClient, ns: str, running: list[Binary]) -> None:
    # Both hold their Lease (in the release namespace, as the charts configure) before anything is created.
    for name in MODULES:
        async def leased(name: str = name) -> bool:
            lease = await read(kc, Resource("coordination.k8s.io", "v1", "leases", "Lease"), name, ns)
            return bool(lease and (lease.get("spec") or {}).get("holderIdentity"))

        await until(running, leased, f"{name} to hold its Lease")

    async def gone(resource: Resource, name: str) -> None:
        async def absent() -> bool:
            return await read(kc, resource, name, ns) is None

        await until(running, absent, f"{resource.kind} {name} deleted")

    # Process: flux intent → Attested; deleted, its finalizer released by the reconciler.
    process = example("flux-intent.yaml", "Process", ns)
    await kc.create(PROCESSES, process, ns)

    async def attested(name: str = "podinfo") -> bool:
        obj = await read(kc, PROCESSES, name, ns)
        return bool(obj and (obj.get("status") or {}).get("phase") == "Attested")

    await until(running, attested, "Process podinfo Attested")
    assert (await read(kc, PROCESSES, "podinfo", ns) or {})["metadata"].get("finalizers")
    await kc.delete(PROCESSES, "podinfo", ns)
    await gone(PROCESSES, "podinfo")

    # Routed: an Ingress and a DNSEndpoint, and the stable name claimed in the ProcessTable; deleted with it.
    routed = example("flux-intent.yaml", "Process", ns)
    routed["metadata"]["name"] = "routed"
    routed["spec"]["routing"] = {"hostnames": [{"app": f"rbac-{ns}", "instance": "routed"}],
                                 "backend": {"service": "svc", "port": 80}, "stableNameClaim": True}
    await kc.create(PROCESSES, routed, ns)

    async def claimed() -> bool:
        obj = await read(kc, PROCESSES, "routed", ns)
        if not is_true(obj, "StableName"):
            return False
        ingresses = msgspec.json.decode(await kc.list(INGRESSES, ns))["items"]
        endpoints = msgspec.json.decode(await kc.list(DNS_ENDPOINTS, ns))["items"]
        return len(ingresses) == len(endpoints) == 2  # the instance's and the stable name's

    await until(running, claimed, "Process routed holding its stable name, with two Ingresses and DNSEndpoints")
    await kc.delete(PROCESSES, "routed", ns)
    await gone(PROCESSES, "routed")

    # The closed-loop example (aplicacao: OCIRepository + HelmRelease); its ClosedLoopAuth condition reads a
    # probe Job and its receipt ConfigMap, and the observability example's conditions read a Kustomization and a
    # HelmRelease it does not own. None exists, so it stays Running; each read is made all the same.
    (checker,) = examples_of("upstream/closed-loop-ephemeral.yaml", "Process", ns)
    checker["metadata"].pop("annotations", None)
    checker["spec"]["intent"]["aplicacao"]["targetNamespace"] = ns
    (observability,) = examples_of("upstream/observability-stack.yaml", "Process", ns)
    flux_conditions = [c for c in observability["spec"]["boundary"]["postconditions"]
                       if c["kind"] in ("KustomizationHealthy", "HelmReleaseReleased")]
    assert len(flux_conditions) == 2
    post = checker["spec"]["boundary"]["postconditions"] = [*checker["spec"]["boundary"]["postconditions"],
                                                             *flux_conditions]
    for condition in post:
        if "namespace" in (condition.get("params") or {}):
            condition["params"]["namespace"] = ns
    await kc.create(PROCESSES, checker, ns)

    async def checked() -> bool:
        obj = await read(kc, PROCESSES, "closed-loop-attest", ns) or {}
        rows = ((obj.get("status") or {}).get("boundary") or {}).get("postconditions") or []
        return len(rows) == len(post) and all(r.get("lastCheck") for r in rows)

    await until(running, checked, "closed-loop-attest's postconditions checked")
    await kc.delete(PROCESSES, "closed-loop-attest", ns)
    await gone(PROCESSES, "closed-loop-attest")

    # The exports example: in Releasing an export Job per export, each run by the real export worker under the
    # chart's export-worker ServiceAccount (the Job runner stand-in), each writing its receipt; then it is gone.
    for cm in examples_of("ephemeral-exports.yaml", "ConfigMap", ns):
        await kc.create(CONFIG_MAPS, cm, ns)
    (exporter,) = examples_of("ephemeral-exports.yaml", "Process", ns)
    exporter["metadata"].pop("annotations", None)
    exports = exporter["spec"]["lifetime"]["ephemeral"]["exports"]
    for export in exports:
        export["channel"] = {"stdout": {"pretty": False}}
    exports.append({"source": {"processSnapshot": {"includeAttestationChain": False}},
                    "channel": {"stdout": {"pretty": False}}})
    await kc.create(PROCESSES, exporter, ns)
    await gone(PROCESSES, "release-train")
    for index in range(len(exports)):
        receipt = await read(kc, CONFIG_MAPS, f"release-train-export-{index}-receipt", ns)
        assert receipt is not None, index
        assert "Shipped" in receipt["data"]["receipt.yaml"], (index, receipt)

    # Pool: fills, an allocation binds, is released; then the pool is torn down with its members.
    await kc.create(EPHEMERAL_POOLS, example("pool.yaml", "EphemeralPool", ns), ns)

    def steady(pool: str, size: int) -> Callable[[], Awaitable[bool]]:
        async def probe() -> bool:
            status = (await read(kc, EPHEMERAL_POOLS, pool, ns) or {}).get("status") or {}
            return (status.get("phase") == "Steady" and status.get("readyCount") == size
                    and status.get("allocatedCount") == 0)
        return probe

    def bound(name: str) -> Callable[[], Awaitable[dict[str, Any] | None]]:
        async def probe() -> dict[str, Any] | None:
            obj = await read(kc, EPHEMERAL_ALLOCATIONS, name, ns)
            return obj if obj and (obj.get("status") or {}).get("phase") == "Bound" else None
        return probe

    async def members_gone() -> bool:
        return not msgspec.json.decode(await kc.list(PROCESSES, ns))["items"]

    await until(running, steady("warm", 2), "pool warm Steady with 2 ready members")
    await kc.create(EPHEMERAL_ALLOCATIONS, example("pool.yaml", "EphemeralAllocation", ns), ns)
    alloc = await until(running, bound("ci-run-1"), "allocation ci-run-1 Bound")
    assert alloc["status"]["assignedProcess"]["name"]
    await kc.delete(EPHEMERAL_ALLOCATIONS, "ci-run-1", ns)
    await gone(EPHEMERAL_ALLOCATIONS, "ci-run-1")
    await until(running, steady("warm", 2), "pool warm Steady again with both members free")
    await kc.delete(EPHEMERAL_POOLS, "warm", ns)
    await gone(EPHEMERAL_POOLS, "warm")
    await until(running, members_gone, "pool warm's member Processes deleted")

    # A Reset pool: the returned member's reset Job (finished here as the Job controller would), then free.
    pool = example("pool.yaml", "EphemeralPool", ns)
    pool["metadata"]["name"] = "resetting"
    pool["spec"].update(desiredSize=1, returnPolicy="Reset")
    await kc.create(EPHEMERAL_POOLS, pool, ns)
    await until(running, steady("resetting", 1), "pool resetting Steady with 1 ready member")
    allocation = example("pool.yaml", "EphemeralAllocation", ns)
    allocation["metadata"]["name"] = "ci-run-2"
    allocation["spec"]["poolRef"]["name"] = "resetting"
    await kc.create(EPHEMERAL_ALLOCATIONS, allocation, ns)
    await until(running, bound("ci-run-2"), "allocation ci-run-2 Bound")
    await kc.delete(EPHEMERAL_ALLOCATIONS, "ci-run-2", ns)

    async def reset_job() -> str | None:
        jobs = msgspec.json.decode(await kc.list(JOBS, ns))["items"]
        names = [j["metadata"]["name"] for j in jobs if j["metadata"]["name"].startswith("reset-")]
        return names[0] if names else None

    job = await until(running, reset_job, "the reset Job of pool resetting's member")
    await finish_job(kc, ns, job, succeeded=True)
    await until(running, steady("resetting", 1), "pool resetting Steady again, its member reset and free")
    await kc.delete(EPHEMERAL_POOLS, "resetting", ns)
    await gone(EPHEMERAL_POOLS, "resetting")
    await until(running, members_gone, "pool resetting's member Process deleted")
