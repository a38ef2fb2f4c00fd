"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

One :class:`LeaderElector` per binary campaigns for a Lease; :meth:`LeaderElector.run` calls the controller's
``lead`` coroutine only while this instance holds the Lease, and cancels it when leadership is lost.

How time is measured (client-go ``tools/leaderelection/leaderelection.go``; docs/runtime.md#leader-election and
#bug-leader-flapping):

- A standby never compares wall clocks. It remembers the Lease record and the moment, on its own monotonic
  clock, it first saw that record; the holder is presumed alive until ``leaseDurationSeconds`` have passed since
  then without a change. ``renewTime``/``acquireTime`` are written for humans and other tools only.
- The leader renews every retry period. If no renewal has succeeded within the renew deadline, counted from the
  moment its last successful write was *sent*, it stops leading: workers are cancelled at that instant, which is
  before any standby can take over (a standby waits the full lease duration from when it *received* the record
  that write produced, and lease duration > renew deadline; the difference is the clock-skew tolerance).
- Each attempt (a GET and a PUT, or the leader's single-PUT fast path) is bounded by max(renew deadline / 2, 1 s)
  and never outlives the renew deadline, so one hung request cannot use up the whole budget
  (docs/runtime.md#bug-leader-flapping).

The decision itself is the pure function :func:`decide`; :func:`next_spec` and :func:`released_spec` compute the
record to write. Both are table-tested without a server.
"""

from __future__ import annotations

import enum
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import anyio.lowlevel
import msgspec

from shared.kube.api import KubeApi
from shared.kube.client import LEASES
from shared.kube.errors import ApiError, Conflict, NotFound
from shared.kube.meta import ObjectMeta
from shared.kube.metrics import RuntimeMetrics, runtime_metrics

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "LeaderElector",
    "LeadershipLost",
    "Lease",
    "LeaseAction",
    "LeaseOptions",
    "LeaseSighting",
    "LeaseSpec",
    "LeaseTiming",
    "decide",
    "default_identity",
    "format_micro_time",
    "next_spec",
    "released_spec",
]

log = logging.getLogger(__name__)

DEFAULT_LEASE_DURATION = 15.0
"""Seconds a standby waits, after last seeing the record change, before taking over (controller-runtime)."""
DEFAULT_RENEW_DEADLINE = 10.0
"""Seconds the leader keeps renewing, from its last successful renewal, before it stops leading (controller-runtime)."""
DEFAULT_RETRY_PERIOD = 2.0
"""Seconds between acquire / renew attempts (controller-runtime)."""

_RETRY_JITTER = 0.2
"""Standby attempts wait retry_period × (1 + U[0, this)) so standbys do not poll in lockstep."""


# --- wire types ---------------------------------------------------------------------------------------------


class LeaseSpec(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """``spec`` of a coordination.k8s.io/v1 Lease (the "leader election record").

    Times are MicroTime strings (RFC 3339 with microseconds, UTC, e.g. ``2026-01-02T03:04:05.000006Z``);
    ``lease_duration_seconds`` is whole seconds. ``strategy``/``preferred_holder`` (coordinated leader election)
    are carried through unchanged so a PUT does not drop them.
    """

    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int | None = None
    strategy: str | None = None
    preferred_holder: str | None = None


class Lease(msgspec.Struct, frozen=True, rename="camel", omit_defaults=True):
    """A coordination.k8s.io/v1 Lease; ``metadata.resourceVersion`` guards every update."""

    metadata: ObjectMeta
    spec: LeaseSpec = LeaseSpec()
    api_version: str = "coordination.k8s.io/v1"
    kind: str = "Lease"


_lease_decoder = msgspec.json.Decoder(Lease)


def format_micro_time(instant: datetime) -> str:
    """``instant`` as a Kubernetes MicroTime: RFC 3339 in UTC with exactly six fractional digits and ``Z``.

    Raises ValueError for a naive datetime (its zone would be a guess).
    """
    if instant.tzinfo is None:
        raise ValueError("MicroTime needs an aware datetime")
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- timing -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseTiming:
    """The three durations of leader election, seconds.

    Raises ValueError unless lease_duration > renew_deadline > 1.2 × retry_period > 0, client-go's
    ``NewLeaderElector`` check.
    """

    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD

    def __post_init__(self) -> None:
        if self.retry_period <= 0:
            raise ValueError(f"retry_period must be > 0, got {self.retry_period}")
        if not self.lease_duration > self.renew_deadline:
            raise ValueError(
                f"lease_duration ({self.lease_duration}) must be greater than renew_deadline ({self.renew_deadline})")
        if not self.renew_deadline > 1.2 * self.retry_period:
            raise ValueError(
                f"renew_deadline ({self.renew_deadline}) must be greater than 1.2 × retry_period ({self.retry_period})")

    @property
    def attempt_timeout(self) -> float:
        """Seconds one acquire/renew attempt may take: max(renew_deadline / 2, 1) — controller-runtime's
        per-request timeout, well under the renew deadline so a retry still fits
        (docs/runtime.md#bug-leader-flapping)."""
        return max(self.renew_deadline / 2, 1.0)

    @property
    def lease_duration_seconds(self) -> int:
        """The whole seconds written to ``leaseDurationSeconds``: rounded up, so others never wait less."""
        return math.ceil(self.lease_duration)


@dataclass(frozen=True)
class LeaseOptions:
    """Which Lease a binary campaigns for, and with what timing (its ``--leader-election-*`` flags)."""

    name: str
    namespace: str
    timing: LeaseTiming = LeaseTiming()
    labels: tuple[tuple[str, str], ...] = ()
    """Labels the Lease carries (a dynamic-sharding member's ring: docs/architecture.md#dynamic-sharding)."""


# --- the pure decision --------------------------------------------------------------------------------------


class LeaseAction(enum.Enum):
    """What one attempt should do, given what we observed."""

    CREATE = "create"
    """No Lease exists: create it holding it ourselves."""
    ACQUIRE = "acquire"
    """The Lease is free (no holder) or its holder's term expired: take it over (transitions + 1)."""
    RENEW = "renew"
    """We hold it: write a fresh renewTime."""
    WAIT = "wait"
    """Someone else holds it and their term has not expired on our clock: stand by."""
    LOST = "lost"
    """We were leading and must stop: the renew deadline passed, or someone else now holds the Lease."""


@dataclass(frozen=True)
class LeaseSighting:
    """A Lease record and the monotonic time (seconds) at which we first saw it in this exact form."""

    spec: LeaseSpec
    at: float


def decide(
    observed: LeaseSighting | None,
    *,
    identity: str,
    now: float,
    last_renewed: float | None,
    renew_deadline: float,
) -> LeaseAction:
    """Decide the next step of leader election.

    Args:
        observed: the latest Lease record and when it was first seen (monotonic seconds); None if there is no Lease.
        identity: our holder identity.
        now: the current monotonic time, seconds.
        last_renewed: while leading, the monotonic time our last successful write was sent; None when not leading.
        renew_deadline: seconds a leader may go without a successful renewal.

    The holder's term is ``observed.at + leaseDurationSeconds`` on our clock, never compared with ``renewTime``
    (client-go ``isLeaseValid``; docs/runtime.md#leader-election).
    """
    leading = last_renewed is not None
    if last_renewed is not None and now >= last_renewed + renew_deadline:
        return LeaseAction.LOST
    if observed is None:
        return LeaseAction.CREATE
    holder = observed.spec.holder_identity or ""
    if holder == identity:
        return LeaseAction.RENEW
    if holder and leading:
        return LeaseAction.LOST
    if holder and now < observed.at + (observed.spec.lease_duration_seconds or 0):
        return LeaseAction.WAIT
    return LeaseAction.ACQUIRE


def next_spec(decision: LeaseAction, previous: LeaseSpec | None, *, identity: str, now: datetime,
              lease_duration_seconds: int) -> LeaseSpec:
    """The record to write for CREATE, ACQUIRE or RENEW (client-go ``tryAcquireOrRenew``).

    CREATE starts at 0 transitions; ACQUIRE sets acquireTime and increments leaseTransitions; RENEW keeps
    acquireTime and leaseTransitions. ``now`` is the wall-clock instant written as renewTime (MicroTime).

    Raises ValueError for WAIT or LOST (nothing to write).
    """
    stamp = format_micro_time(now)
    base = previous or LeaseSpec()
    if decision is LeaseAction.CREATE:
        return LeaseSpec(holder_identity=identity, lease_duration_seconds=lease_duration_seconds,
                         acquire_time=stamp, renew_time=stamp, lease_transitions=0)
    if decision is LeaseAction.ACQUIRE:
        return msgspec.structs.replace(
            base, holder_identity=identity, lease_duration_seconds=lease_duration_seconds, acquire_time=stamp,
            renew_time=stamp, lease_transitions=(base.lease_transitions or 0) + 1)
    if decision is LeaseAction.RENEW:
        return msgspec.structs.replace(
            base, holder_identity=identity, lease_duration_seconds=lease_duration_seconds,
            acquire_time=base.acquire_time or stamp, renew_time=stamp, lease_transitions=base.lease_transitions or 0)
    raise ValueError(f"{decision} writes no record")


def released_spec(previous: LeaseSpec, *, now: datetime) -> LeaseSpec:
    """The record a leader writes on clean shutdown: no holder, leaseDurationSeconds 1, transitions kept.

    With no holder, a standby's :func:`decide` returns ACQUIRE at once (client-go ``release``, used by
    controller-runtime's ``LeaderElectionReleaseOnCancel``).
    """
    stamp = format_micro_time(now)
    return msgspec.structs.replace(previous, holder_identity=None, lease_duration_seconds=1, acquire_time=stamp,
                                   renew_time=stamp, lease_transitions=previous.lease_transitions or 0)


# --- the elector --------------------------------------------------------------------------------------------


class LeadershipLost(Exception):
    """Raised by :meth:`LeaderElector.run` after the work was cancelled because leadership was lost.

    controller-runtime exits the process at this point; a caller may also campaign again.
    """


def default_identity() -> str:
    """``<hostname>_<random hex>``: unique per process even when pods share a hostname (controller-runtime)."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:12]}"


class LeaderElector:
    """Campaigns for Lease ``namespace/name`` and runs work only while holding it.

    Args:
        client: the API client.
        name: Lease name (also the ``name`` label of ``leader_election_master_status``).
        namespace: Lease namespace.
        identity: holder identity; :func:`default_identity` when None.
        timing: durations (:class:`LeaseTiming`; defaults 15 s / 10 s / 2 s).
        release_on_cancel: on a clean exit from :meth:`run` (work returned, raised, or ``run`` was cancelled),
            clear the holder so a standby takes over at its next attempt instead of after the lease duration.
        metrics: where ``leader_election_master_status`` / ``leader_election_slowpath_total`` live
            (default the process registry's).
        clock: monotonic seconds (default :func:`time.monotonic`).
        sleep: ``await sleep(seconds)``, the waits between attempts, on ``clock``'s time (default
            :func:`anyio.sleep`; a test passes one that advances its fake ``clock``).
        wall_clock: the instant written as renewTime/acquireTime (default now in UTC).
        labels: labels the Lease carries (set when it is created or taken over, kept on renewal), e.g. the ring of
            a dynamic-sharding member Lease (:mod:`shared.kube.sharding`); None: none.

    Attributes ``is_leader``, ``last_renewed`` (monotonic time the last successful write was sent, while
    leading) and ``stopped_leading_at`` (monotonic time leadership last ended) are for probes and tests.
    """

    def __init__(
        self,
        client: KubeApi,
        name: str,
        namespace: str,
        *,
        identity: str | None = None,
        timing: LeaseTiming | None = None,
        release_on_cancel: bool = True,
        metrics: RuntimeMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = anyio.sleep,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.labels = dict(labels or {})
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.timing = timing or LeaseTiming()
        self.release_on_cancel = release_on_cancel
        self._clock = clock
        self._sleep = sleep
        self._wall_clock = wall_clock
        metrics = metrics or runtime_metrics()
        self._status = metrics.leader_election_master_status.labels(name)
        self._slowpath = metrics.leader_election_slowpath_total.labels(name)
        self._status.set(0)
        self._observed: LeaseSighting | None = None
        self._lease: Lease | None = None  # our last successful write, as the server returned it
        self._running = False
        self.is_leader = False
        self.last_renewed: float | None = None
        self.last_contact: float | None = None
        """Monotonic time of the last successful request to the API server (GET or write)."""
        self.stopped_leading_at: float | None = None

    # -- public ----------------------------------------------------------------------------------------------

    async def run(self, lead: Callable[[], Awaitable[object]]) -> None:
        """Stand by until the Lease is ours, then ``await lead()`` while renewing it.

        - ``lead`` returns or raises: renewing stops, the Lease is released (``release_on_cancel``), and ``run``
          returns or re-raises.
        - Renewal fails for the renew deadline, or another holder appears: ``lead`` is cancelled at once, and
          ``run`` raises :class:`LeadershipLost` once ``lead`` has finished (no release: it is not ours).
        - ``run`` is cancelled (shutdown): ``lead`` is cancelled and the Lease is still renewed until ``lead``
          has finished, so no other instance leads while our workers drain; then the Lease is released
          (``release_on_cancel``).

        ``is_leader`` and ``leader_election_master_status{name}`` are 1 exactly while ``lead`` may run.

        Raises:
            LeadershipLost: see above.
            RuntimeError: ``run`` is already running on this elector.
        """
        if self._running:
            raise RuntimeError("LeaderElector.run is already running")
        self._running = True
        lost = False
        try:
            await self._campaign()
            work_scope = anyio.CancelScope()
            renew_scope = anyio.CancelScope(shield=True)  # keeps renewing while cancelled work drains

            async def renew() -> None:
                nonlocal lost
                with renew_scope:
                    await self._renew_until_lost()
                    lost = True
                    self._stop_leading()
                    work_scope.cancel()

            error: Exception | None = None
            async with anyio.create_task_group() as tg:
                tg.start_soon(renew)
                try:
                    with work_scope:
                        await lead()
                except Exception as exc:  # re-raised below as itself, not wrapped in an ExceptionGroup
                    error = exc
                finally:
                    renew_scope.cancel()
            if error is not None:
                raise error
            if lost:
                await anyio.lowlevel.checkpoint_if_cancelled()  # a shutdown stays a cancellation
                raise LeadershipLost(f"lost lease {self.namespace}/{self.name} as {self.identity}")
        finally:
            was_leader = self.is_leader
            self._stop_leading()
            if was_leader and not lost and self.release_on_cancel:
                with anyio.CancelScope(shield=True):
                    await self._release()
            self._running = False

    def healthy(self) -> bool:
        """Readiness: True while leading, or while standing by with a successful API contact within the lease
        duration (a standby that cannot reach the API server could not take over)."""
        if self.is_leader:
            return True
        return self.last_contact is not None and self._clock() - self.last_contact < self.timing.lease_duration

    # -- campaign and renewal --------------------------------------------------------------------------------

    async def _campaign(self) -> None:
        """Attempt every retry period (with jitter) until an attempt makes us the holder."""
        while True:
            started = self._clock()
            if await self._attempt(self.timing.attempt_timeout):
                self.is_leader = True
                self._status.set(1)
                log.info("became leader of lease %s/%s as %s", self.namespace, self.name, self.identity)
                return
            delay = self.timing.retry_period * (1 + random.random() * _RETRY_JITTER)
            await self._sleep(max(0.0, started + delay - self._clock()))

    async def _renew_until_lost(self) -> None:
        """Renew every retry period; return once :func:`decide` says LOST (deadline passed or lease taken)."""
        assert self.last_renewed is not None
        next_attempt = self._clock() + self.timing.retry_period
        while True:
            deadline = self.last_renewed + self.timing.renew_deadline
            await self._sleep(max(0.0, min(next_attempt, deadline) - self._clock()))
            now = self._clock()
            if now >= deadline:
                log.warning("lease %s/%s not renewed within %.1f s: stopping", self.namespace, self.name,
                            self.timing.renew_deadline)
                return
            next_attempt = now + self.timing.retry_period
            if await self._attempt(min(self.timing.attempt_timeout, deadline - now)):
                continue
            if self._decision() is LeaseAction.LOST:
                holder = self._observed.spec.holder_identity if self._observed else None
                log.warning("lease %s/%s: leadership lost (holder now %s)", self.namespace, self.name, holder)
                return

    def _decision(self) -> LeaseAction:
        return decide(self._observed, identity=self.identity, now=self._clock(),
                      last_renewed=self.last_renewed if self.is_leader else None,
                      renew_deadline=self.timing.renew_deadline)

    async def _attempt(self, budget: float) -> bool:
        """One acquire-or-renew within ``budget`` seconds; True when we hold the Lease after it."""
        with anyio.move_on_after(budget):
            try:
                if self.is_leader and self._lease is not None:
                    if await self._fast_renew(budget):
                        return True
                    self._slowpath.inc()
                return await self._read_and_write(budget)
            except (ApiError, msgspec.DecodeError) as err:
                log.info("lease %s/%s attempt failed: %s", self.namespace, self.name, err)
        return False

    async def _fast_renew(self, budget: float) -> bool:
        """Leader only: PUT a renewed record over our own last write, skipping the GET (client-go's fast path)."""
        assert self._lease is not None
        spec = next_spec(LeaseAction.RENEW, self._lease.spec, identity=self.identity, now=self._wall_clock(),
                         lease_duration_seconds=self.timing.lease_duration_seconds)
        try:
            await self._write(msgspec.structs.replace(self._lease, spec=spec), create=False, budget=budget)
        except ApiError as err:
            log.debug("lease %s/%s fast renew failed: %s", self.namespace, self.name, err)
            return False
        return True

    async def _read_and_write(self, budget: float) -> bool:
        current = await self._get(budget)
        decision = self._decision()
        if decision in (LeaseAction.WAIT, LeaseAction.LOST):
            return False
        previous = current.spec if current is not None else None
        spec = next_spec(decision, previous, identity=self.identity, now=self._wall_clock(),
                         lease_duration_seconds=self.timing.lease_duration_seconds)
        if current is None:
            lease = Lease(metadata=ObjectMeta(name=self.name, namespace=self.namespace, labels=self.labels), spec=spec)
        else:
            metadata = current.metadata
            if any(metadata.labels.get(k) != v for k, v in self.labels.items()):
                metadata = msgspec.structs.replace(metadata, labels={**metadata.labels, **self.labels})
            lease = msgspec.structs.replace(current, metadata=metadata, spec=spec)
        try:
            await self._write(lease, create=current is None, budget=budget)
        except Conflict:
            return False  # another instance wrote first; the next GET shows who
        return True

    async def _get(self, budget: float) -> Lease | None:
        """GET the Lease and update :attr:`_observed` (its ``at`` moves only when the record changed)."""
        try:
            body = await self.client.request("GET", LEASES.path(self.namespace, self.name), request_timeout=budget)
        except NotFound:
            self.last_contact = self._clock()
            self._observed = None
            return None
        lease = _lease_decoder.decode(body)
        now = self._clock()  # after the response: never earlier than the holder's write (safe side)
        self.last_contact = now
        if self._observed is None or self._observed.spec != lease.spec:
            self._observed = LeaseSighting(lease.spec, now)
        return lease

    async def _write(self, lease: Lease, *, create: bool, budget: float) -> None:
        """POST or resourceVersion-guarded PUT; on success we hold the Lease as of the moment it was sent."""
        sent = self._clock()
        body = msgspec.json.encode(lease)
        path = LEASES.path(self.namespace) if create else LEASES.path(self.namespace, self.name)
        response = await self.client.request("POST" if create else "PUT", path, body=body, request_timeout=budget)
        self._lease = _lease_decoder.decode(response)
        self._observed = LeaseSighting(self._lease.spec, sent)
        self.last_renewed = sent
        self.last_contact = self._clock()

    def _stop_leading(self) -> None:
        if self.is_leader:
            self.is_leader = False
            self.stopped_leading_at = self._clock()
            self._status.set(0)
            log.info("stopped leading lease %s/%s", self.namespace, self.name)

    async def _release(self) -> None:
        """Clear the holder, guarded by our last resourceVersion; best effort within one attempt timeout.

        A renewal cancelled in flight by the shutdown may still have been applied by the API server, leaving our
        last resourceVersion stale. On that 409 the Lease is read again and, while it still names us, released
        over the fresh version: otherwise the standby would wait out the full lease duration.
        """
        if self._lease is None:
            return
        lease = self._lease
        with anyio.move_on_after(self.timing.attempt_timeout):
            try:
                try:
                    await self._put_released(lease)
                except Conflict:
                    body = await self.client.request("GET", LEASES.path(self.namespace, self.name),
                                                     request_timeout=self.timing.attempt_timeout)
                    current = _lease_decoder.decode(body)
                    if current.spec.holder_identity != self.identity:
                        log.info("lease %s/%s already held by %s: nothing to release", self.namespace, self.name,
                                 current.spec.holder_identity)
                        return
                    await self._put_released(current)
                log.info("released lease %s/%s", self.namespace, self.name)
            except (ApiError, msgspec.DecodeError) as err:
                log.warning("could not release lease %s/%s: %s", self.namespace, self.name, err)
        self._lease = None
        self.last_renewed = None

    async def _put_released(self, lease: Lease) -> None:
        """PUT :func:`released_spec` over ``lease`` (its resourceVersion guards the write).

        Raises:
            Conflict: the Lease changed since ``lease`` was read.
            ApiError: any other refusal.
        """
        spec = released_spec(lease.spec, now=self._wall_clock())
        body = msgspec.json.encode(msgspec.structs.replace(lease, spec=spec))
        await self.client.request("PUT", LEASES.path(self.namespace, self.name), body=body,
                                  request_timeout=self.timing.attempt_timeout)
