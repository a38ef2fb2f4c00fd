"""The manager: runs informers, controllers, leader election, the health server, and shutdown.

One per binary (controller-runtime's ``manager.Manager``):

- informers run from start-up on every replica, so a standby's cache is warm when it
  takes over; controllers' workers run only while this replica leads (when electing);
- ``/readyz`` is ready when every informer has synced and, when electing, the elector is
  leading or standing by healthily; ``/healthz`` while the loop answers;
- SIGTERM / SIGINT (or :meth:`Manager.stop`): stop handing out work, let in-flight
  reconciles finish within ``shutdown_grace`` seconds (controller-runtime's
  GracefulShutdownTimeout, 30 s), release the Lease, return;
- losing the Lease raises :class:`~shared.kube.leader.LeadershipLost`, so the binary
  exits non-zero and is restarted clean (controller-runtime exits too).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio

from shared.kube.api import KubeApi
from shared.kube.client import Resource
from shared.kube.controller import Controller
from shared.kube.health import HealthServer
from shared.kube.informer import Informer
from shared.kube.leader import LeaderElector, LeadershipLost, LeaseOptions

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 30.0
"""Seconds in-flight reconciles get to finish on shutdown (controller-runtime's default)."""


class Manager:
    """Owns the shared client's informers and the controllers built on them.

    Args:
        client: the shared API client.
        health: the ``/metrics`` + probes server (None: no HTTP server).
        elector: leader election (None: always lead, e.g. a single replica or tests).
        shutdown_grace: seconds for in-flight reconciles on shutdown.
        handle_signals: stop on SIGTERM / SIGINT.
    """

    def __init__(
        self,
        client: KubeApi,
        *,
        health: HealthServer | None = None,
        elector: LeaderElector | None = None,
        shutdown_grace: float = SHUTDOWN_GRACE,
        handle_signals: bool = True,
    ) -> None:
        self.client = client
        self.health = health
        self.elector = elector
        self.shutdown_grace = shutdown_grace
        self.handle_signals = handle_signals
        self._informers: dict[tuple[Resource, str | None, str | None], Informer[Any]] = {}
        self._informer_options: dict[tuple[Resource, str | None, str | None], tuple[type[Any], dict[str, Any]]] = {}
        self._controllers: list[Controller[Any]] = []
        self._runnables: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._idle_checks: list[Callable[[], bool]] = []
        self._before_start: list[Callable[[], Awaitable[None]]] = []
        self._stop = anyio.Event()
        self._lost: LeadershipLost | None = None
        if health is not None:
            health.add_readiness_check("informers-synced", self.has_synced)
            if elector is not None:
                health.add_readiness_check("leader-election", elector.healthy)

    @classmethod
    def configured(
        cls,
        client: KubeApi,
        *,
        health: tuple[str, int] | None,
        lease: LeaseOptions | None,
        identity: str | None = None,
        handle_signals: bool = True,
    ) -> Manager:
        """A manager as a binary's flags describe it: the health server on ``health`` (``(host, port)``;
        None: none) and leader election on ``lease`` (None: always lead) as ``identity`` (default: the
        host name with a random suffix)."""
        server = HealthServer(*health) if health is not None else None
        elector = None
        if lease is not None:
            elector = LeaderElector(client, lease.name, lease.namespace, identity=identity, timing=lease.timing,
                                    labels=dict(lease.labels))
        return cls(client, health=server, elector=elector, handle_signals=handle_signals)

    def informer(self, resource: Resource, decode_type: type[Any], *, namespace: str | None = None,
                 label_selector: str | None = None, **options: Any) -> Informer[Any]:
        """The shared informer for (resource, namespace, selector), created on first request.

        Raises:
            ValueError: an informer for that key exists with another decode type or other options
                (two callers would silently share a cache decoded one way).
        """
        key = (resource, namespace, label_selector)
        made = (decode_type, options)
        if key not in self._informers:
            self._informers[key] = Informer(self.client, resource, decode_type, namespace=namespace,
                                            label_selector=label_selector, **options)
            self._informer_options[key] = made
        elif self._informer_options[key] != made:
            raise ValueError(f"an informer of {resource.plural} in {namespace or 'all namespaces'} "
                             "exists with another decode type or options")
        return self._informers[key]

    def add(self, controller: Controller[Any]) -> None:
        """Run ``controller`` (while leading, when electing)."""
        self._controllers.append(controller)

    def before_start(self, step: Callable[[], Awaitable[None]]) -> None:
        """Await ``step()`` when :meth:`run` starts, before any informer runs, in the order added
        (e.g. resolving kinds by discovery and creating their informers)."""
        self._before_start.append(step)

    def add_runnable(self, run: Callable[[], Coroutine[Any, Any, None]], *,
                     idle: Callable[[], bool] | None = None) -> None:
        """Run ``await run()`` beside the controllers, only while leading (e.g. a batched status writer).

        It is cancelled at shutdown once the controllers have drained. ``idle``, when given, says
        whether it has work in hand; :meth:`idle` counts it (e.g. Events still to be written).
        """
        self._runnables.append(run)
        if idle is not None:
            self._idle_checks.append(idle)

    def has_synced(self) -> bool:
        return all(i.has_synced for i in self._informers.values())

    def idle(self) -> bool:
        """True when no controller has a key queued or in progress (delayed requeues not counted) and no
        runnable registered with an ``idle`` check has work in hand."""
        return (all(len(c.queue) == 0 and c.queue.processing == 0 for c in self._controllers)
                and all(check() for check in self._idle_checks))

    def stop(self) -> None:
        """Begin a graceful shutdown (as SIGTERM does)."""
        self._stop.set()

    async def run(self) -> None:
        """Run until :meth:`stop` or a signal; then drain and return.

        Raises:
            LeadershipLost: the Lease was lost while leading.
            shared.kube.errors.ApiError: a :meth:`before_start` step's API call failed.
        """
        for step in self._before_start:
            await step()
        async with anyio.create_task_group() as tg:
            if self.health is not None:
                await tg.start(self.health.run)
            if self.handle_signals:
                tg.start_soon(self._watch_signals)
            for informer in self._informers.values():
                tg.start_soon(informer.run)
            async with anyio.create_task_group() as work:
                work.start_soon(self._lead_or_run)
                await self._stop.wait()
                log.info("shutting down: draining in-flight reconciles (grace %.0f s)", self.shutdown_grace)
                with anyio.move_on_after(self.shutdown_grace) as grace:
                    async with anyio.create_task_group() as drains:
                        for controller in self._controllers:
                            drains.start_soon(controller.shutdown)
                if grace.cancelled_caught:
                    log.warning("shutdown grace of %.0f s exceeded; cancelling reconciles", self.shutdown_grace)
                # Workers have returned (or overrun the grace): end the campaign / release the Lease.
                work.cancel_scope.cancel()
            tg.cancel_scope.cancel()
        if self._lost is not None:
            raise self._lost
        log.info("stopped")

    async def _lead_or_run(self) -> None:
        if self.elector is None:
            await self._run_controllers()
            return
        try:
            await self.elector.run(self._run_controllers)
        except LeadershipLost as lost:
            log.error("%s; stopping", lost)
            self._lost = lost
            self.stop()

    async def _run_controllers(self) -> None:
        log.info("starting %d controllers", len(self._controllers))
        async with anyio.create_task_group() as tg:
            for runnable in self._runnables:
                tg.start_soon(runnable)
            for controller in self._controllers:
                tg.start_soon(controller.run)

    async def _watch_signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("received %s", signal.Signals(signum).name)
                self.stop()
                return
