"""shared.domain.manifests.batch: a Job manifest renders exactly the fields set, and a cached Job's status
says how it ended."""

from __future__ import annotations

import msgspec
import pytest

from shared.domain.manifests.batch import (
    Container,
    EnvVar,
    Job,
    JobSpec,
    JobStatus,
    ObservedJob,
    PodSpec,
    PodTemplateSpec,
)
from shared.domain.resources import JOBS
from shared.kube.meta import ObjectMeta, OwnerReference
from shared.kube.patch import apply_target


def test_a_minimal_job_sends_only_what_is_set() -> None:
    job = Job(metadata=ObjectMeta(name="j", namespace="ns"),
              spec=JobSpec(template=PodTemplateSpec(spec=PodSpec(containers=[Container(name="c", image="i")]))))
    assert job.to_json() == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}}},
    }


def test_every_field_of_a_one_shot_worker() -> None:
    job = Job(
        metadata=ObjectMeta(name="export-1", namespace="ns", labels={"app": "x"},
                            owner_references=[OwnerReference(api_version="v1", kind="ConfigMap", name="o", uid="u",
                                                             controller=True)]),
        spec=JobSpec(
            backoff_limit=0,
            active_deadline_seconds=600,
            ttl_seconds_after_finished=60,
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels={"app": "x"}),
                spec=PodSpec(
                    restart_policy="OnFailure",
                    service_account_name="exporter",
                    containers=[Container(name="w", image="i:1", command=["/bin/w"], args=["--once"],
                                          env=[EnvVar(name="A", value="1")], image_pull_policy="IfNotPresent")],
                ),
            ),
        ),
    )
    assert job.to_json() == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "export-1", "namespace": "ns", "labels": {"app": "x"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u",
                                          "controller": True}]},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {
                    "containers": [{"name": "w", "image": "i:1", "command": ["/bin/w"], "args": ["--once"],
                                    "env": [{"name": "A", "value": "1"}], "imagePullPolicy": "IfNotPresent"}],
                    "restartPolicy": "OnFailure",
                    "serviceAccountName": "exporter",
                },
            },
            "backoffLimit": 0,
            "activeDeadlineSeconds": 600,
            "ttlSecondsAfterFinished": 60,
        },
    }


def test_a_job_is_ready_for_server_side_apply() -> None:
    job = Job(metadata=ObjectMeta(name="j", namespace="ns"),
              spec=JobSpec(template=PodTemplateSpec(spec=PodSpec(containers=[Container(name="c", image="i")]))))
    namespace, name, body = apply_target(JOBS, job)
    assert (namespace, name, body["apiVersion"], body["kind"]) == ("ns", "j", "batch/v1", "Job")


OUTCOME_ROWS = [
    ("a Job without status is running", {}, None),
    ("a Job whose pods are still running is running", {"active": 1}, None),
    ("Complete=True succeeded", {"conditions": [{"type": "Complete", "status": "True"}]}, True),
    ("Failed=True failed", {"conditions": [{"type": "Failed", "status": "True"}]}, False),
    ("SuccessCriteriaMet alone is not the end yet", {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]},
     None),
    ("a condition that is not True does not count", {"conditions": [{"type": "Complete", "status": "False"}]}, None),
    ("the first finished condition decides", {"conditions": [{"type": "Failed", "status": "True"},
                                                            {"type": "Complete", "status": "True"}]}, False),
    ("a succeeded pod is success", {"succeeded": 1}, True),
    ("null counts and lists are tolerated", {"conditions": None, "succeeded": None}, None),
]


@pytest.mark.parametrize(("status", "outcome"), [r[1:] for r in OUTCOME_ROWS], ids=[r[0] for r in OUTCOME_ROWS])
def test_job_outcome(status: dict[str, object], outcome: bool | None) -> None:
    raw = msgspec.json.encode({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                               "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
                               "status": status})
    job = msgspec.json.decode(raw, type=ObservedJob)
    assert job.metadata.name == "j"
    assert job.status.outcome() is outcome


def test_a_cached_job_without_status_has_the_empty_one() -> None:
    assert msgspec.json.decode(b'{"metadata": {"name": "j"}}', type=ObservedJob).status == JobStatus()


def test_the_job_kind_is_the_resource_table_s() -> None:
    assert (Job.RESOURCE, Job.RESOURCE.api_version, Job.RESOURCE.kind) == (JOBS, "batch/v1", "Job")
