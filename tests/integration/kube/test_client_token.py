"""An in-cluster client whose projected token stops being valid reads the rotated token file at once: one refused
request, then the next token (docs/runtime.md#client), as client-go's cached token source does after a 401.

The kubelet's rotation is played by hand on the session's real API server: two ServiceAccount tokens bound to
two Secrets, the file rewritten from the first to the second, the first revoked by deleting its Secret. Which
token a request carried is read back from the API server itself (a SelfSubjectReview names the credential's
JWT ID). The node tier runs the same client in a pod (tests/e2e/node/test_token.py)."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest

from shared.kube.client import KubeClient, Resource
from shared.kube.errors import Unauthorized
from tests.support.kube import wait_for
from tools.controlplane import LocalControlPlane

pytestmark = pytest.mark.anyio

SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
REVIEW = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()


def jwt_id(token: str) -> str:
    """The ``jti`` claim of a JWT (its payload, base64url without padding)."""
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["jti"])


async def bound_token(admin: KubeClient, namespace: str, account: str, secret: str) -> str:
    """A token of ``account`` bound to the Secret ``secret`` (valid until that Secret is deleted)."""
    holder = msgspec.json.decode(await admin.create(SECRETS, {"apiVersion": "v1", "kind": "Secret",
                                                              "metadata": {"name": secret}}, namespace))
    minted = msgspec.json.decode(await admin.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", body=json.dumps({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600, "boundObjectRef": {
                "apiVersion": "v1", "kind": "Secret", "name": secret, "uid": holder["metadata"]["uid"]}}}).encode()))
    return str(minted["status"]["token"])


async def credential_of(client: KubeClient) -> str:
    """The credential ID the API server saw on this client's request (``JTI=<jti>``)."""
    review = msgspec.json.decode(await client.request(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=REVIEW))
    extra = review["status"]["userInfo"].get("extra") or {}
    (credential,) = extra["authentication.kubernetes.io/credential-id"]
    return str(credential)


async def test_a_revoked_token_costs_one_401_then_the_rotated_file_is_read(
        control_plane: LocalControlPlane, tmp_path: Path) -> None:
    namespace = f"tok-{uuid.uuid4().hex[:8]}"
    async with await KubeClient.from_kubeconfig(control_plane.kubeconfig) as admin:
        await admin.create(Resource("", "v1", "namespaces", "Namespace"),
                           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        await admin.create(SERVICE_ACCOUNTS, {"apiVersion": "v1", "kind": "ServiceAccount",
                                              "metadata": {"name": "rotated"}}, namespace)
        first = await bound_token(admin, namespace, "rotated", "first-holder")
        second = await bound_token(admin, namespace, "rotated", "second-holder")
        token_file = tmp_path / "token"
        token_file.write_text(first)
        environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(control_plane.api_port)}
        codes: list[str] = []
        async with KubeClient.in_cluster(token_file=str(token_file), ca_file=str(control_plane.ca_file),
                                         environ=environ) as client:
            client.on_response.append(lambda _method, code, _host: codes.append(code))
            assert await credential_of(client) == f"JTI={jwt_id(first)}"

            # the kubelet's rotation: the file holds the next token, then the first one stops being valid
            token_file.write_text(second)
            await admin.delete(SECRETS, "first-holder", namespace)

            revoked_file = tmp_path / "revoked"
            revoked_file.write_text(first)
            async with KubeClient.in_cluster(token_file=str(revoked_file), ca_file=str(control_plane.ca_file),
                                             environ=environ) as revoked:
                async def first_refused() -> bool:
                    try:
                        await revoked.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                              body=REVIEW)
                    except Unauthorized:
                        return True
                    return False

                await wait_for(first_refused, timeout=30, what="the API server to refuse the revoked token")
            codes.clear()
            assert await credential_of(client) == f"JTI={jwt_id(second)}"
            assert codes == ["401", "201"], codes
            # and it stays on the new token: no further refusal
            assert await credential_of(client) == f"JTI={jwt_id(second)}"
            assert codes == ["401", "201", "201"], codes
        await admin.delete(Resource("", "v1", "namespaces", "Namespace"), namespace)
