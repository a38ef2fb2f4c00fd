"""A STAND-IN for the Job controller and the kubelet, which do not run locally
(docs/architecture.md#the-job-runner-stand-in).

The local control plane runs no Job controller and no kubelet, so nothing would ever run a Job. This
stand-in watches ``batch/v1`` Jobs labelled ``tatara.pleme.io/role=export`` and, for each unfinished one,
runs the Job's (first) container as a local subprocess:

- the argv is the container's ``command`` if set, else the image's entrypoint — a local command the
  caller maps each image to (:class:`JobRunnerStandIn` ``entrypoints``; an image it does not know
  leaves the Job waiting with a Warning Event ``ErrImagePull``, as a pod whose image cannot be pulled
  does) — followed by the container's ``args``;
- the environment is the stand-in's own (so the local binary finds its interpreter and packages) plus
  the container's literal ``env`` values, and ``KUBECONFIG`` naming a kubeconfig written for the run:
  the API server URL, its CA and a **TokenRequest token of the Job's ServiceAccount**
  (``POST /api/v1/namespaces/NS/serviceaccounts/SA/token``; ``default`` when the pod template names
  none), so the process runs with exactly that ServiceAccount's RBAC, as in a pod;
- a ServiceAccount that does not exist leaves the Job waiting, as the ServiceAccount admission plugin
  does to the controller's pod: a Warning Event ``FailedCreate`` (``error looking up service account
  NS/SA``), retried with the controller's API backoff (1 s doubling to 60 s) until it appears;
- the Job's ``/status`` is written as the Kubernetes 1.36 Job controller would
  (:mod:`tools.standins.job_status`): ``backoffLimit`` is honoured (a failed run is retried after the
  pod-failure backoff until failures exceed it), then ``Complete`` or ``Failed`` with the controller's
  conditions, reasons and Events;
- a command that cannot be started (missing, not executable) is a failed run with exit code 128, as a
  container that fails to start;
- stdout and stderr of every run are appended to ``<logs>/<namespace>.<name>.log``;
- runs are independent: up to ``concurrency`` at once (one worker per run; never two runs of one Job);
- a finished Job (``Complete`` or ``Failed``) is never run again, also after a stand-in restart; a Job
  still ``active`` when the stand-in starts lost its run (the stand-in stopped mid-run) and counts one
  failure, as a vanished pod does; a Job deleted mid-run has its process sent SIGTERM, and that run is
  not written anywhere: every status write carries the Job's UID, so a Job created again under the same
  name starts with a clean status, as a real Job's pods belong to its UID, not its name.

What it does not do: pods (there are none: ``kubectl get pods`` shows nothing), ``activeDeadlineSeconds``,
pod failure policies, indexed completions, parallelism above 1, ``ttlSecondsAfterFinished``.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgspec
import yaml
from prometheus_client import CollectorRegistry

from shared.domain.labels import ROLE, ROLE_EXPORT
from shared.domain.resources import JOBS
from shared.kube.client import KubeClient, Resource
from shared.kube.controller import Controller, Request, Result
from shared.kube.errors import ApiError, Invalid, NotFound
from shared.kube.events import Event, EventRecorder
from shared.kube.informer import Informer, WatchEventType
from shared.kube.meta import ObjectMeta
from shared.kube.metrics import RuntimeMetrics
from shared.kube.ratelimit import Backoff
from tools.standins.job_status import (
    POD_FAILURE_BACKOFF,
    Verdict,
    after_exit,
    is_finished,
    retry_delay,
    running,
    started,
)

__all__ = ["EXPORT_JOBS", "REPORTING_COMPONENT", "JobRunnerStandIn", "service_account_token"]

log = logging.getLogger(__name__)

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
EXPORT_JOBS = f"{ROLE}={ROLE_EXPORT}"
"""The label selector of the Jobs the stand-in runs."""
REPORTING_COMPONENT = "tatara-job-runner-standin"
"""``source.component`` of the stand-in's Events (the real controller's is ``job-controller``)."""
TOKEN_SECONDS = 3600
"""Lifetime requested for each run's ServiceAccount token (a projected token's default)."""
API_BACKOFF = Backoff(initial=1.0, factor=2.0, cap=60.0, jitter=0.0)
"""Retry of a run that could not start (missing ServiceAccount): the Job controller's queue backoff
(``DefaultJobApiBackOff`` 1 s, ``MaxJobApiBackOff`` 60 s)."""
START_ERROR = 128
"""Exit code of a run whose command cannot be started (a container that fails with StartError)."""
STOP_GRACE = 10.0
"""Seconds between SIGTERM and SIGKILL when a run is stopped (its Job deleted, or the stand-in stopping)."""


class EnvVar(msgspec.Struct, frozen=True):
    name: str
    value: str | None = None


class Container(msgspec.Struct, frozen=True):
    name: str = ""
    image: str = ""
    command: list[str] = []
    args: list[str] = []
    env: list[EnvVar] = []


class PodSpec(msgspec.Struct, frozen=True, rename="camel"):
    containers: list[Container] = []
    service_account_name: str = ""


class PodTemplate(msgspec.Struct, frozen=True):
    spec: PodSpec = PodSpec()


class JobSpec(msgspec.Struct, frozen=True, rename="camel"):
    backoff_limit: int = 6
    suspend: bool = False
    template: PodTemplate = PodTemplate()


class Job(msgspec.Struct, frozen=True):
    """The parts of a ``batch/v1`` Job the stand-in reads; ``status`` stays wire data."""

    metadata: ObjectMeta
    spec: JobSpec = JobSpec()
    status: dict[str, Any] = {}


_job_decoder = msgspec.json.Decoder(Job)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def service_account_token(client: KubeClient, namespace: str, name: str, seconds: int = TOKEN_SECONDS) -> str:
    """A TokenRequest token of ServiceAccount ``namespace/name``, valid ``seconds``.

    Raises:
        NotFound: no such ServiceAccount.
        ApiError: the request was refused.
    """
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds}}
    raw = await client.request("POST", SERVICE_ACCOUNTS.path(namespace, name, "token"), body=msgspec.json.encode(body))
    return str(msgspec.json.decode(raw)["status"]["token"])


def token_kubeconfig(server: str, ca_file: Path, user: str, token: str) -> dict[str, Any]:
    """A kubeconfig document for ``server`` (verified with ``ca_file``) authenticating with ``token``."""
    return {"apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user}}],
            "current-context": "local"}


class JobRunnerStandIn:
    """Run with ``await stand_in.run()`` inside a task group; cancel to stop (running processes are killed).

    Args:
        client: API client allowed to watch Jobs, patch ``jobs/status``, create ``serviceaccounts/token``
            and Events.
        server: the API server URL written into each run's kubeconfig.
        ca_file: the API server's CA certificate (PEM file) written into each run's kubeconfig.
        logs: folder for one log file per Job (created if missing).
        entrypoints: image → the local argv its entrypoint stands for (used when the container sets no
            ``command``).
        namespace: watch one namespace (None: all).
        concurrency: runs at once.
        retry_base: seconds before the first retry of a failed run (the controller's 10 s; tests shorten it).
    """

    def __init__(self, client: KubeClient, *, server: str, ca_file: Path, logs: Path,
                 entrypoints: Mapping[str, Sequence[str]], namespace: str | None = None, concurrency: int = 4,
                 retry_base: float = POD_FAILURE_BACKOFF, now: Callable[[], str] = _now) -> None:
        self.client = client
        self.server = server
        self.ca_file = ca_file
        self.logs = logs
        self.entrypoints = {image: list(argv) for image, argv in entrypoints.items()}
        self.namespace = namespace
        self.concurrency = concurrency
        self.retry_base = retry_base
        self._now = now
        self.events = EventRecorder(client, REPORTING_COMPONENT, REPORTING_COMPONENT)
        self.runs = 0
        """Processes started so far."""
        self._running: dict[str, tuple[str, anyio.abc.Process]] = {}
        """``namespace/name`` → (the UID of the Job the run belongs to, its process)."""
        self._start_failures: dict[str, int] = {}

    @property
    def running_jobs(self) -> list[str]:
        """``namespace/name`` of the Jobs whose process is running now."""
        return sorted(self._running)

    def log_file(self, namespace: str, name: str) -> Path:
        """Where the output of Job ``namespace/name``'s runs goes."""
        return self.logs / f"{namespace}.{name}.log"

    async def run(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        informer: Informer[Job] = Informer(self.client, JOBS, Job, namespace=self.namespace,
                                           label_selector=EXPORT_JOBS)
        informer.add_handler(self._on_event)
        controller = Controller("job-runner-standin", informer, self._reconcile, workers=self.concurrency,
                                metrics=RuntimeMetrics(CollectorRegistry()))
        log.info("Job runner STAND-IN watching Jobs labelled %s (no kubelet locally)", EXPORT_JOBS)
        async with anyio.create_task_group() as tg:
            tg.start_soon(informer.run)
            tg.start_soon(controller.run)

    def _on_event(self, event: WatchEventType, old: Job | None, new: Job) -> None:
        key = f"{new.metadata.namespace}/{new.metadata.name}"
        run = self._running.get(key)
        if run is None or (event is not WatchEventType.DELETED and new.metadata.deletion_timestamp is None):
            return
        uid, proc = run
        if new.metadata.uid != uid:
            return  # another Job of that name (the run's own was deleted before)
        log.info("STAND-IN: Job %s deleted mid-run, stopping its process", key)
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)

    # -- one reconcile: at most one run --------------------------------------------------------------

    async def _reconcile(self, request: Request) -> Result:
        namespace, name = request.namespace or "", request.name
        try:
            job = _job_decoder.decode(await self.client.get(JOBS, name, namespace))
        except NotFound:
            return Result.done()
        if job.metadata.deletion_timestamp is not None or job.spec.suspend or is_finished(job.status):
            return Result.done()
        try:
            if int(job.status.get("active") or 0) > 0:
                log.warning("STAND-IN: Job %s/%s was active when the stand-in started: its run was lost", namespace,
                            name)
                job = await self._finish_run(job, exit_code=-1)
                if is_finished(job.status):
                    return Result.done()
                return Result.after(retry_delay(int(job.status.get("failed") or 0), self.retry_base))
            return await self._run_once(job)
        except NotFound:  # deleted meanwhile
            return Result.done()

    async def _run_once(self, job: Job) -> Result:
        namespace, name = job.metadata.namespace or "", job.metadata.name or ""
        key = f"{namespace}/{name}"
        container = job.spec.template.spec.containers[0] if job.spec.template.spec.containers else Container()
        argv = list(container.command) or self.entrypoints.get(container.image)
        if argv and os.sep not in argv[0]:
            # the image's PATH here is the virtualenv's bin (where tatara-export-worker is) before the host's
            argv[0] = shutil.which(argv[0], path=f"{Path(sys.executable).parent}{os.pathsep}"
                                                 f"{os.environ.get('PATH', '')}") or argv[0]
        if not argv:
            await self.events.emit(JOBS, job, Event.warning(
                "ErrImagePull", f"STAND-IN: image {container.image!r} is not mapped to a local command"))
            return Result.done()
        account = job.spec.template.spec.service_account_name or "default"
        try:
            token = await service_account_token(self.client, namespace, account)
        except NotFound:
            failures = self._start_failures.get(key, 0)
            self._start_failures[key] = failures + 1
            await self.events.emit(JOBS, job, Event.warning(
                "FailedCreate", f'Error creating: pods "{name}-" is forbidden: error looking up service account '
                                f'{namespace}/{account}: serviceaccount "{account}" not found'))
            return Result.after(API_BACKOFF.delay(failures))
        self._start_failures.pop(key, None)
        job = await self._write(job, started(job.status, self._now()))
        code = await self._execute(job, [*argv, *container.args], container.env,
                                   token_kubeconfig(self.server, self.ca_file, f"system:serviceaccount:{namespace}:"
                                                    f"{account}", token))
        job = await self._finish_run(job, exit_code=code)  # NotFound when deleted or replaced meanwhile
        if is_finished(job.status):
            return Result.done()
        return Result.after(retry_delay(int(job.status.get("failed") or 0), self.retry_base))

    async def _execute(self, job: Job, argv: list[str], env: Sequence[EnvVar], kubeconfig: dict[str, Any]) -> int:
        """Run ``argv`` to its end with a kubeconfig of its own; its exit code (negative: killed by a signal)."""
        namespace, name = job.metadata.namespace or "", job.metadata.name or ""
        key = f"{namespace}/{name}"
        self.runs += 1
        attempt = int(job.status.get("failed") or 0) + int(job.status.get("succeeded") or 0) + 1
        with tempfile.TemporaryDirectory(prefix="tatara-job-") as work:
            config = Path(work) / "kubeconfig"
            config.touch(mode=0o600)
            config.write_text(yaml.safe_dump(kubeconfig, sort_keys=False))
            environment = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
            environment.update({e.name: e.value for e in env if e.value is not None})
            environment["KUBECONFIG"] = str(config)
            log.info("STAND-IN: running Job %s (attempt %d): %s", key, attempt, " ".join(argv))
            # a local file opens at once; the subprocess needs its real file descriptor
            with open(self.log_file(namespace, name), "ab") as out:  # noqa: ASYNC230
                out.write(f"--- STAND-IN run {attempt} of Job {key}: {' '.join(argv)}\n".encode())
                out.flush()
                try:
                    proc = await anyio.open_process(argv, stdin=subprocess.DEVNULL, stdout=out,
                                                    stderr=subprocess.STDOUT, env=environment, start_new_session=True)
                except OSError as err:  # the command does not exist or cannot run: the container fails to start
                    out.write(f"--- STAND-IN: cannot start {argv[0]}: {err}\n--- exit code {START_ERROR}\n".encode())
                    log.warning("STAND-IN: Job %s: cannot start %s: %s", key, argv[0], err)
                    return START_ERROR
                self._running[key] = (job.metadata.uid or "", proc)
                try:
                    with suppress(NotFound):
                        await self._write(job, running())
                    code = await proc.wait()
                finally:
                    self._running.pop(key, None)
                    await _reap(proc)
                out.write(f"--- exit code {code}\n".encode())
        log.info("STAND-IN: Job %s attempt %d exited with %d", key, attempt, code)
        return code

    async def _finish_run(self, job: Job, *, exit_code: int) -> Job:
        step = after_exit(job.status, job.spec.backoff_limit, exit_code, self._now())
        for patch in step.patches:
            job = await self._write(job, patch)
        if step.event is not None:
            await self.events.emit(JOBS, job, step.event)
        if step.verdict is not Verdict.RETRY:
            log.info("STAND-IN: Job %s/%s %s", job.metadata.namespace, job.metadata.name, step.verdict.value)
        return job

    async def _write(self, job: Job, patch: dict[str, Any]) -> Job:
        """Patch ``job``'s status, only while ``job`` (its UID) is the one under its name.

        Raises:
            NotFound: the Job is gone, or another Job now has its name (never written).
        """
        # The body names the UID: the Job status strategy refuses a change of it (422, metadata.uid is
        # immutable), so the patch cannot land on another Job of the same name (custom resources' status
        # subresource ignores metadata: this is no guard there).
        body = {"metadata": {"uid": job.metadata.uid}, "status": patch}
        try:
            raw = await self.client.merge_patch(JOBS, job.metadata.name or "", body, job.metadata.namespace,
                                                subresource="status")
        except Invalid as err:
            if any(c.field == "metadata.uid" for c in err.causes):
                raise NotFound(404, "NotFound", f"Job {job.metadata.name} {job.metadata.uid} was replaced") from err
            raise
        return _job_decoder.decode(raw)


async def _reap(proc: anyio.abc.Process) -> None:
    """Make sure ``proc``'s process group is gone (SIGTERM, SIGKILL after :data:`STOP_GRACE`), even when cancelled."""
    with anyio.CancelScope(shield=True):
        if proc.returncode is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with anyio.move_on_after(STOP_GRACE):
                await proc.wait()
        if proc.returncode is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        with suppress(ApiError, OSError):
            await proc.aclose()
