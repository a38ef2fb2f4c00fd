"""What tatara up serves real Flux for the examples: charts, git trees, sops-age Secrets; charts retargeted."""

from __future__ import annotations

from typing import Any

import yaml

from tools.up import default_examples, load_examples
from tools.up_flux import SOPS_SECRET, plan_local_flux, retarget_charts, sops_secret


def process(name: str, intent: dict[str, Any], namespace: str = "apps") -> dict[str, Any]:
    return {"apiVersion": "tatara.pleme.io/v1alpha1", "kind": "Process",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"intent": intent}}


def test_a_flux_intent_gets_one_configmap_at_its_path_and_a_sops_secret_in_its_namespace() -> None:
    plan = plan_local_flux([process("web", {"flux": {"gitRepository": "infra", "path": "./apps/web"}})])
    tree = plan.trees[("flux-system", "infra")]
    assert sorted(tree) == ["apps/web/configmap.yaml", "apps/web/kustomization.yaml"]
    cm = yaml.safe_load(tree["apps/web/configmap.yaml"])
    assert (cm["kind"], cm["metadata"]) == ("ConfigMap", {"name": "web-web", "namespace": "apps"})
    assert yaml.safe_load(tree["apps/web/kustomization.yaml"])["resources"] == ["configmap.yaml"]
    assert plan.sops_namespaces == frozenset({"apps"})


def test_decrypt_sops_false_needs_no_secret_and_a_target_namespace_and_repo_namespace_are_honoured() -> None:
    intent = {"flux": {"gitRepository": "r", "gitRepositoryNamespace": "src", "path": ".",
                       "targetNamespace": "tgt", "decryptSops": False}}
    plan = plan_local_flux([process("p", intent)])
    cm = yaml.safe_load(plan.trees[("src", "r")]["configmap.yaml"])
    assert cm["metadata"] == {"name": "p-root", "namespace": "tgt"}
    assert plan.sops_namespaces == frozenset()


def test_oci_charts_are_collected_from_processes_and_pool_templates_and_retargeted() -> None:
    pool = {"kind": "EphemeralPool", "metadata": {"name": "warm"},
            "spec": {"template": {"aplicacao": {"chartRef": "oci://ghcr.io/org/charts/app", "version": "1.0.0"}}}}
    proc = process("p", {"aplicacao": {"chartRef": "oci://ghcr.io/org/charts/app", "version": "2.0.0"}})
    plain = process("q", {"aplicacao": {"chartRef": "bitnami/nginx", "version": "3.0.0"}})
    plan = plan_local_flux([pool, proc, plain])
    assert plan.charts == {("org/charts", "app"): frozenset({"1.0.0", "2.0.0"})}
    moved = retarget_charts(pool, "127.0.0.1:5000")
    assert moved["spec"]["template"]["aplicacao"]["chartRef"] == "oci://127.0.0.1:5000/org/charts/app"
    assert pool["spec"]["template"]["aplicacao"]["chartRef"] == "oci://ghcr.io/org/charts/app"  # not mutated
    assert retarget_charts(plain, "127.0.0.1:5000") == plain


def test_the_shipped_examples_need_two_charts_one_repository_and_a_secret() -> None:
    plan = plan_local_flux(ex.doc for ex in load_examples(default_examples()))
    # lareira-demo-app from the YAML examples; echo-server in both versions of the Lisp matrix's axis
    assert plan.charts == {("pleme-io/charts", "lareira-demo-app"): frozenset({"0.5.5"}),
                           ("pleme-io/charts", "echo-server"): frozenset({"0.5.4", "0.5.5"})}
    assert set(plan.trees) == {("flux-system", "infra")}
    assert plan.sops_namespaces == frozenset({"tatara-examples"})


def test_the_sops_secret_is_empty_and_named_as_the_rendered_kustomization_expects() -> None:
    secret = sops_secret("apps")
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == (SOPS_SECRET, "apps")
    assert SOPS_SECRET == "sops-age"
    assert "data" not in secret
