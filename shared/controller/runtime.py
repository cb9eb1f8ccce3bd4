"""The operator process shared by every operator: options, start-up and shut-down, endpoints.

One place for what every operator does alike (flags and their environment variables, leader
election, ``/metrics`` and the probes, the order of start-up and shut-down), so an operator
package holds its logic only. The sequence: ``Runtime``.
"""

from __future__ import annotations

import asyncio
import getpass
import logging
import os
import socket
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from shared.api import leases
from shared.api.clock import OFFSET_ENV, Clock
from shared.api.description import OperatorDescription
from shared.client import leader
from shared.client.events import EventRecorder
from shared.client.kube import KubeClient
from shared.client.metricsauth import MetricsAuth
from shared.controller import certs, kopf_adapter, options
from shared.controller.metrics import Metrics
from shared.controller.options import WATCH_FAILURE_TIMEOUT_ENV, Options
from shared.controller.serving import (
    Endpoints,
    Readiness,
)
from shared.controller.watches import Watch
from shared.controller.workqueue import Controller

logger = logging.getLogger("shared.runtime")


def operator_identity() -> str:
    """Who this process is, for kopf's identity and logs; never fails.

    kopf's own detection calls ``getpass.getuser()``, which raises for a UID without a passwd
    entry and no ``USER``/``LOGNAME`` in the environment: exactly how containers run (our
    images' UID 65532 before it had an entry; any UID OpenShift's ``restricted-v2`` picks).
    The pod name (``POD_NAME`` from the downward API) is the best identity when there is one.
    """
    for var in ("POD_NAME", "POD_ID"):
        if value := os.environ.get(var):
            return value
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid{os.getuid()}"
    return f"{user}@{socket.gethostname()}"


@dataclass
class Runtime:
    """What an operator's handlers share within one process.

    A ``Runtime`` holds what one process shares (metrics, readiness, options, the leader
    election) and runs the watches it is given (``shared.controller.builder`` makes both from an
    operator's description and reconciler); kopf is reached through ``shared.controller.kopf_adapter``.
    Everything below is the same for all operators:

    - options from the command line, then the environment (``WATCH_NAMESPACE``, ``METRICS_PORT``,
      ``HEALTH_PORT``, ``LOG_FORMAT``, ``MAX_CONCURRENT_RECONCILES``, ``KUBE_API_QPS``,
      ``KUBE_API_BURST``); ``WATCH_NAMESPACE`` is a comma-separated list, empty means all
      namespaces (OLM's ``olm.targetNamespaces`` annotation maps onto it in the bundle);
    - throttling: at most ``MAX_CONCURRENT_RECONCILES`` passes per controller at once
      (``shared.controller.workqueue``), reported as ``controller_runtime_max_concurrent_reconciles``, and
      the client's rate limit (``shared.client.kube``; QPS 0 = none), both applied at start-up to every
      managed controller and client;
    - leader election (``shared.client.leader``), off by default as in kubebuilder's scaffold and
      on in the bundle: ``--leader-elect`` (``LEADER_ELECT``), the Lease's namespace
      (``--leader-election-namespace``, ``LEADER_ELECTION_NAMESPACE``; default the pod's
      ``POD_NAMESPACE``, else the first watched namespace) and name (``--leader-election-id``,
      ``LEADER_ELECTION_ID``; default ``<app>-leader``), and controller-runtime's durations
      (``--leader-election-lease-duration``/``-renew-deadline``/``-retry-period``, env
      ``LEADER_ELECTION_LEASE_DURATION`` etc., seconds: 15, 10, 2). Every process watches and
      reports ready; only the leader's controllers run (``Runtime.active``), and its writes,
      Events included, are fenced;
    - kopf only watches (``shared.controller.kopf_adapter``); Events are posted through the
      operator's own client (``shared.client.events``);
    - server-side label selectors on child watches (``shared.controller.caches``);
    - ``/metrics`` over HTTPS for callers allowed ``get`` on it (``--metrics-secure``, ``METRICS_SECURE``,
      default true; the certificate from ``--metrics-cert-dir``/``METRICS_CERT_DIR`` when it holds
      ``tls.crt`` and ``tls.key``, else self-signed: ``shared.controller.certs``; the reviews
      through the operator's own client: ``shared.client.metricsauth``), on ``METRICS_PORT``
      (default 8443; 8080 with ``--metrics-secure=false``, plain HTTP for development);
    - ``/metrics``, ``/healthz``, ``/readyz`` (``shared.controller.serving``); ``WATCH_FAILURE_TIMEOUT``
      (seconds, default 120) is how long a watch may fail before ``/healthz`` does;
    - watches that reconnect fast after an API outage and notice dead connections (see
      ``shared.controller.kopf_adapter.configure_settings``).
    """

    app: str
    controllers: tuple[str, ...]
    child_resources: tuple[str, ...] = ()
    metrics: Metrics = field(default_factory=Metrics)
    readiness: Readiness = field(default_factory=Readiness)
    options: Options = field(default_factory=Options)
    # Made at start-up with --leader-elect; None: this process always leads (standalone).
    elector: leader.LeaderElector | None = None
    _managed: list[tuple[Controller, KubeClient, Clock]] = field(default_factory=list)
    _recorders: list[EventRecorder] = field(default_factory=list)
    _election: asyncio.Task[None] | None = None
    # Called on the event loop once the clients are loaded (a reconciler's start-up work).
    _on_startup: list[Callable[[], None]] = field(default_factory=list)

    @classmethod
    def for_operator(cls, description: OperatorDescription) -> Runtime:
        """The operator process's runtime as ``description`` declares it: its app label, its one
        controller, its watched children, a metrics registry with exactly the declared metrics."""
        return cls(
            app=description.app,
            controllers=(description.controller,),
            child_resources=description.child_resources,
            metrics=Metrics(domain=description.metrics),
        )

    def manage(
        self,
        controller: Controller,
        kube: KubeClient,
        clock: Clock | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        """At start-up load ``kube``'s credentials; at exit stop ``controller``'s loops, post the
        ``events`` still queued, close ``kube``.

        A shifted ``clock`` (``OPERATOR_CLOCK_OFFSET``) is announced in the log at start-up.
        With leader election, ``kube``'s writes are fenced (``shared.client.leader``).
        """
        self._managed.append((controller, kube, clock or Clock()))
        if events is not None:
            self._recorders.append(events)

    def on_startup(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` at start-up, on the event loop (it may start tasks that wait for
        ``active``)."""
        self._on_startup.append(hook)

    def active(self) -> bool:
        """Whether this process may reconcile (the controllers' gate): every watch has synced
        (listed, and every listed object handled: ``shared.controller.serving``), so no pass plans
        from a half-filled cache, and, with leader election, it leads."""
        return self.readiness.is_ready() and (self.elector is None or self.elector.is_leader())

    def apply_options(self) -> None:
        """Give the managed controllers and clients the options' limits and start every
        controller's metrics at zero, with ``controller_runtime_max_concurrent_reconciles`` at
        the real limit.

        Called at start-up: the operators build their controllers and clients at import time,
        before ``__main__`` has parsed the options.
        """
        for controller, kube, _ in self._managed:
            controller.max_concurrent_reconciles = self.options.max_concurrent_reconciles
            kube.limit_rate(self.options.kube_api_qps, self.options.kube_api_burst)
        self.metrics.init_controllers(self.controllers, self.options.max_concurrent_reconciles)

    async def campaign(self) -> None:
        """Start leader election: fence every write of this process, then campaign and renew in
        a task of its own. The elector gets a client of its own, so a burst of the operator's
        writes never holds a renewal in the rate limiter."""
        opts = self.options
        config = leader.ElectionConfig(
            namespace=opts.leader_election_namespace,
            name=opts.leader_election_id or leases.lease_name(self.app),
            identity=leader.new_identity(),
            lease_duration=opts.lease_duration,
            renew_deadline=opts.renew_deadline,
            retry_period=opts.retry_period,
        )
        kube = KubeClient(
            observer=self.metrics.observe_request, qps=opts.kube_api_qps, burst=opts.kube_api_burst
        )
        await kube.load()
        status = self.metrics.gauge("leader_election_master_status").labels(config.name)
        self.elector = elector = leader.LeaderElector(config, kube, status=status)
        for _, managed, _ in self._managed:
            managed.fence = elector.fence
        self._election = asyncio.create_task(elector.run(), name="leader-election")
        self._election.add_done_callback(_election_ended)

    async def step_down(self) -> None:
        """At clean shutdown, once the controllers have stopped: release the Lease (if held)."""
        if self.elector is None:
            return
        if self._election is not None:
            self._election.cancel()
            await asyncio.gather(self._election, return_exceptions=True)
        await self.elector.release()

    def metrics_security(self) -> tuple[ssl.SSLContext | None, MetricsAuth | None]:
        """The TLS context and the authentication/authorization filter of ``/metrics``; none with
        ``--metrics-secure=false``. The reviews go through the operator's own client (the first
        managed one: metered and rate-limited with its other calls), else a client of their own."""
        if not self.options.metrics_secure:
            return None, None
        tls = certs.server_context(self.options.metrics_cert_dir or None)
        if self._managed:
            return tls, MetricsAuth(self._managed[0][1], observe=self.metrics.observe_metrics_auth)
        kube = KubeClient(
            observer=self.metrics.observe_request,
            qps=self.options.kube_api_qps,
            burst=self.options.kube_api_burst,
        )
        return tls, MetricsAuth(kube, observe=self.metrics.observe_metrics_auth, close=kube.close)

    def run(self, watches: Iterable[Watch]) -> None:
        """Run the process until SIGINT/SIGTERM: ``watches``, the endpoints, the election."""
        metrics_tls, metrics_auth = self.metrics_security()
        endpoints = Endpoints(
            self.metrics,
            self.readiness,
            self.options.metrics_port,
            self.options.probe_port,
            blind_after=options.read(WATCH_FAILURE_TIMEOUT_ENV),
            metrics_tls=metrics_tls,
            metrics_auth=metrics_auth,
        )

        async def startup() -> None:
            self.apply_options()
            for _, kube, clock in self._managed:
                if clock.offset:
                    logger.warning(f"clock shifted by {clock.offset.total_seconds():+.3f}s ({OFFSET_ENV})")
                await kube.load()
            if self.options.leader_elect:
                await self.campaign()
            await endpoints.start()
            for hook in self._on_startup:
                hook()

        async def cleanup() -> None:
            # Every pass has stopped before the Lease is released: nothing is written after,
            # but the Events the passes recorded, which still go out while this leads.
            for controller, _, _ in self._managed:
                await controller.shutdown()
            for recorder in self._recorders:
                await recorder.close()
            await self.step_down()
            # The endpoints before the clients: a scrape's reviews use the operator's client.
            await endpoints.stop()
            for _, kube, _ in self._managed:
                await kube.close()

        kopf_adapter.run(
            watches,
            self.readiness,
            startup=startup,
            cleanup=cleanup,
            namespaces=self.options.namespaces,
            identity=operator_identity(),
            verbose=self.options.verbose,
            log_format=self.options.log_format,
        )


def _election_ended(task: asyncio.Task[None]) -> None:
    """The elector's task ends only when cancelled at shutdown or after losing (which exits):
    anything else is a bug, and a process that cannot renew must not go on as if it led."""
    if not task.cancelled():
        leader.exit_process(f"the election task ended: {task.exception()!r}")
