"""A token that stops being valid while the reconciler's pod runs is replaced without a 401 loop: the client
re-reads the token file after the first refusal, as client-go does (docs/runtime.md#client).

The kubelet rotates a projected token long before it expires (80 % of an hour here), too slowly for a test,
so the rotation is played through a Secret volume the kubelet keeps up to date: the chart's reconciler is
scaled to 0 and one pod of the same template runs with its credentials from a Secret instead of the projected
volume. The Secret first holds a token bound to one Secret, then a second token; deleting the first holder
revokes the first token. The pod must then go on reconciling, and its ``rest_client_requests_total`` shows a
bounded number of 401s that does not grow."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
from typing import Any

import anyio
import msgspec
import pytest

from shared.domain.resources import PROCESSES
from shared.kube.client import KubeClient, Resource
from shared.kube.errors import NotFound
from tests.e2e.node.conftest import NodeEnv
from tests.e2e.node.support import HEALTH_PORTS, PODS, flux_standin, pod_metrics, total
from tests.integration.kube.test_client_token import bound_token
from tests.integration.reconciler.test_lifecycle import flux_process
from tests.support.kube import wait_for
from tools.node_stack import RECONCILER, RELEASE_NAMESPACE

pytestmark = pytest.mark.anyio

SECRETS = Resource("", "v1", "secrets", "Secret")
POD = "token-rotation"
CREDENTIALS = "token-rotation-credentials"
MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def credentials(token: str, ca: bytes) -> dict[str, Any]:
    data = {"token": token.encode(), "ca.crt": ca, "namespace": RELEASE_NAMESPACE.encode()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": CREDENTIALS},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def rotation_pod(deployment: dict[str, Any]) -> dict[str, Any]:
    """A pod of the reconciler Deployment's template whose credentials come from the Secret :data:`CREDENTIALS`
    (labels of its own, so the ReplicaSet does not adopt it)."""
    spec = copy.deepcopy(deployment["spec"]["template"]["spec"])
    spec["automountServiceAccountToken"] = False
    spec["volumes"] = [*spec.get("volumes", []), {"name": "credentials", "secret": {"secretName": CREDENTIALS}}]
    (container,) = spec["containers"]
    container["volumeMounts"] = [*container.get("volumeMounts", []),
                                 {"name": "credentials", "mountPath": MOUNT, "readOnly": True}]
    spec.pop("topologySpreadConstraints", None)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": POD, "labels": {"test": POD}}, "spec": spec}


async def attested(kc: KubeClient, ns: str, name: str) -> bool:
    try:
        obj = msgspec.json.decode(await kc.get(PROCESSES, name, ns))
    except NotFound:
        return False
    return bool((obj.get("status") or {}).get("phase") == "Attested")


async def unauthorized(kc: KubeClient) -> float:
    samples = await pod_metrics(kc, POD, HEALTH_PORTS[RECONCILER])
    return total(samples, "rest_client_requests_total", code="401")


async def test_a_revoked_token_is_replaced_without_a_401_loop(node_env: NodeEnv, kc: KubeClient, node_ns: str) -> None:
    kubectl = node_env.kubectl
    deployment = json.loads(kubectl("get", "deployment", RECONCILER, "-n", RELEASE_NAMESPACE, "-o", "json"))
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    await anyio.to_thread.run_sync(lambda: kubectl("scale", f"deployment/{RECONCILER}", "-n", RELEASE_NAMESPACE,
                                                   "--replicas=0"))
    try:
        first = await bound_token(kc, RELEASE_NAMESPACE, account, "token-rotation-first")
        second = await bound_token(kc, RELEASE_NAMESPACE, account, "token-rotation-second")
        await kc.create(SECRETS, credentials(first, node_env.plane.ca_file.read_bytes()), RELEASE_NAMESPACE)
        await kc.create(PODS, rotation_pod(deployment), RELEASE_NAMESPACE)
        await anyio.to_thread.run_sync(lambda: kubectl("wait", f"pod/{POD}", "-n", RELEASE_NAMESPACE,
                                                       "--for=condition=Ready", "--timeout=120s"))
        async with flux_standin(kc, node_ns):
            await kc.create(PROCESSES, flux_process("before"), node_ns)
            await wait_for(lambda: attested(kc, node_ns, "before"), timeout=120, what="a Process Attested")
            assert await unauthorized(kc) == 0

            # the rotation: the file gets the second token (the kubelet syncs the Secret volume) ...
            await kc.replace(SECRETS, CREDENTIALS, {
                **credentials(second, node_env.plane.ca_file.read_bytes()),
                "metadata": {"name": CREDENTIALS}}, RELEASE_NAMESPACE)

            def file_holds_second() -> bool:
                return kubectl("exec", POD, "-n", RELEASE_NAMESPACE, "--", "cat", f"{MOUNT}/token") == second

            async def synced() -> bool:
                return await anyio.to_thread.run_sync(file_holds_second)

            await wait_for(synced, timeout=120, interval=1, what="the kubelet to write the second token")
            # ... then the first stops being valid
            await kc.delete(SECRETS, "token-rotation-first", RELEASE_NAMESPACE)
            await kc.create(PROCESSES, flux_process("after"), node_ns)
            await wait_for(lambda: attested(kc, node_ns, "after"), timeout=120,
                           what="a Process Attested after the revocation")
            refused = await unauthorized(kc)
            await kc.create(PROCESSES, flux_process("later"), node_ns)
            await wait_for(lambda: attested(kc, node_ns, "later"), timeout=120, what="a later Process Attested")
            assert await unauthorized(kc) == refused, "the client kept sending the revoked token"
            # each request refused re-reads the file, so only those already sent with the revoked token are
            # refused: the leader's watches (one per informer: Processes, the ProcessTable and 9 child kinds),
            # its Lease renewal and one reconcile at most
            assert refused <= 13, refused
    finally:
        for resource, name in ((PODS, POD), (SECRETS, CREDENTIALS), (SECRETS, "token-rotation-first"),
                               (SECRETS, "token-rotation-second")):
            with contextlib.suppress(NotFound):
                await kc.delete(resource, name, RELEASE_NAMESPACE)
        await anyio.to_thread.run_sync(lambda: kubectl("scale", f"deployment/{RECONCILER}", "-n", RELEASE_NAMESPACE,
                                                       "--replicas=2"))
        await anyio.to_thread.run_sync(lambda: kubectl("rollout", "status", f"deployment/{RECONCILER}", "-n",
                                                       RELEASE_NAMESPACE, "--timeout=180s"))
