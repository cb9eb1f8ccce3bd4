"""The operator process shared by every operator: options, start-up and shut-down, endpoints.

A :class:`Runtime` holds what one process shares (metrics, readiness, options, the leader
election) and runs the watches it is given (:mod:`shared.controller.builder` makes both from an
operator's description and reconciler); kopf is reached through :mod:`shared.controller.kopf_adapter`.
Everything below is the same for all operators:

- options from the command line, then the environment (``WATCH_NAMESPACE``, ``METRICS_PORT``,
  ``HEALTH_PORT``, ``LOG_FORMAT``, ``MAX_CONCURRENT_RECONCILES``, ``KUBE_API_QPS``,
  ``KUBE_API_BURST``); ``WATCH_NAMESPACE`` is a comma-separated list, empty means all
  namespaces (OLM's ``olm.targetNamespaces`` annotation maps onto it in the bundle);
- throttling: at most ``MAX_CONCURRENT_RECONCILES`` passes per controller at once
  (:mod:`shared.controller.workqueue`), reported as ``controller_runtime_max_concurrent_reconciles``, and
  the client's rate limit (:mod:`shared.client.kube`; QPS 0 = none), both applied at start-up to every
  managed controller and client;
- leader election (:mod:`shared.client.leader`), off by default as in kubebuilder's scaffold and
  on in the bundle: ``--leader-elect`` (``LEADER_ELECT``), the Lease's namespace
  (``--leader-election-namespace``, ``LEADER_ELECTION_NAMESPACE``; default the pod's
  ``POD_NAMESPACE``, else the first watched namespace) and name (``--leader-election-id``,
  ``LEADER_ELECTION_ID``; default ``<app>-leader``), and controller-runtime's durations
  (``--leader-election-lease-duration``/``-renew-deadline``/``-retry-period``, env
  ``LEADER_ELECTION_LEASE_DURATION`` etc., seconds: 15, 10, 2). Every process watches and
  reports ready; only the leader's controllers run (:meth:`Runtime.active`), and its writes,
  Events included, are fenced;
- kopf only watches (:mod:`shared.controller.kopf_adapter`); Events are posted through the
  operator's own client (:mod:`shared.client.events`);
- server-side label selectors on child watches (:mod:`shared.controller.caches`);
- ``/metrics`` over HTTPS for callers allowed ``get`` on it (``--metrics-secure``, ``METRICS_SECURE``,
  default true; the certificate from ``--metrics-cert-dir``/``METRICS_CERT_DIR`` when it holds
  ``tls.crt`` and ``tls.key``, else self-signed: :mod:`shared.controller.certs`; the reviews
  through the operator's own client: :mod:`shared.client.metricsauth`), on ``METRICS_PORT``
  (default 8443; 8080 with ``--metrics-secure=false``, plain HTTP for development);
- ``/metrics``, ``/healthz``, ``/readyz`` (:mod:`shared.controller.serving`); ``WATCH_FAILURE_TIMEOUT``
  (seconds, default 120) is how long a watch may fail before ``/healthz`` does;
- watches that reconnect fast after an API outage and notice dead connections (see
  :func:`shared.controller.kopf_adapter.configure_settings`).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import math
import os
import socket
import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from shared.api import leases
from shared.api.clock import OFFSET_ENV, Clock
from shared.api.description import OperatorDescription
from shared.client import leader
from shared.client.events import EventRecorder
from shared.client.kube import DEFAULT_BURST, DEFAULT_QPS, KubeClient
from shared.client.metricsauth import MetricsAuth
from shared.controller import certs, kopf_adapter
from shared.controller.metrics import Metrics
from shared.controller.serving import (
    DEFAULT_BLIND_AFTER,
    DEFAULT_INSECURE_METRICS_PORT,
    DEFAULT_METRICS_PORT,
    DEFAULT_PROBE_PORT,
    Endpoints,
    Readiness,
)
from shared.controller.watches import Watch
from shared.controller.workqueue import DEFAULT_MAX_CONCURRENT_RECONCILES, Controller

LOG_FORMATS = ("full", "json", "plain")
WATCH_FAILURE_TIMEOUT_ENV = "WATCH_FAILURE_TIMEOUT"  # seconds a watch may fail before /healthz does
logger = logging.getLogger("shared.runtime")
N = TypeVar("N", int, float)


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


@dataclass(frozen=True)
class Options:
    namespaces: tuple[str, ...] = ()
    metrics_port: int = DEFAULT_METRICS_PORT
    probe_port: int = DEFAULT_PROBE_PORT
    log_format: str = "plain"
    verbose: bool = False
    max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES
    kube_api_qps: float = DEFAULT_QPS
    kube_api_burst: int = DEFAULT_BURST
    leader_elect: bool = False
    leader_election_namespace: str = ""  # resolved by parse_options when leader_elect
    leader_election_id: str = ""  # "": leases.lease_name(app)
    lease_duration: float = leader.LEASE_DURATION
    renew_deadline: float = leader.RENEW_DEADLINE
    retry_period: float = leader.RETRY_PERIOD
    metrics_secure: bool = True  # HTTPS + TokenReview/SubjectAccessReview on /metrics
    metrics_cert_dir: str = ""  # tls.crt + tls.key there, else a self-signed certificate

    @property
    def clusterwide(self) -> bool:
        return not self.namespaces


def split_namespaces(values: Iterable[str]) -> tuple[str, ...]:
    """Flatten comma-separated namespace lists, dropping blanks and duplicates, keeping order."""
    seen: dict[str, None] = {}
    for value in values:
        for ns in value.split(","):
            if ns.strip():
                seen.setdefault(ns.strip(), None)
    return tuple(seen)


def at_least(minimum: N, convert: Callable[[str], N]) -> Callable[[str], N]:
    """An argparse type: a finite number (``int`` or ``float``, as ``convert``) >= ``minimum``."""

    def parse(text: str) -> N:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not {'an integer' if convert is int else 'a number'}: {text!r}"
            ) from None
        if not minimum <= value < math.inf:
            raise argparse.ArgumentTypeError(f"must be a finite number >= {minimum:g}, not {text}")
        return value

    return parse


def boolean(text: str) -> bool:
    """An argparse type for Go-style booleans: ``--flag``, ``--flag=true``, ``--flag=false``."""
    value = text.strip().lower()
    if value in ("1", "t", "true", "yes", "on"):
        return True
    if value in ("", "0", "f", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


def parse_options(
    argv: Sequence[str] | None,
    env: Mapping[str, str] | None = None,
    prog: str = "",
    max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES,
) -> Options:
    """The options from ``argv``, else ``env``, else the defaults (``max_concurrent_reconciles``:
    the operator's own)."""
    env = os.environ if env is None else env
    parser = argparse.ArgumentParser(prog=prog, description=f"Run the {prog} operator.")
    parser.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="namespace to watch (repeat or comma-separate); default: $WATCH_NAMESPACE, else all",
    )
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="watch all namespaces")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help=f"default: $METRICS_PORT, else {DEFAULT_METRICS_PORT} ({DEFAULT_INSECURE_METRICS_PORT} "
        "with --metrics-secure=false)",
    )
    parser.add_argument(
        "--metrics-secure",
        type=boolean,
        nargs="?",
        const=True,
        default=env.get("METRICS_SECURE") or "true",
        help="serve /metrics over HTTPS, only to callers the API server authenticates and allows "
        "`get` on /metrics; false: plain HTTP to anyone, for development (default: $METRICS_SECURE, "
        "else true)",
    )
    parser.add_argument(
        "--metrics-cert-dir",
        default=env.get("METRICS_CERT_DIR") or "",
        help="directory with tls.crt and tls.key for /metrics; without them a self-signed "
        "certificate is made at start (default: $METRICS_CERT_DIR)",
    )
    parser.add_argument("--health-port", type=int, default=int(env.get("HEALTH_PORT", DEFAULT_PROBE_PORT)))
    parser.add_argument(
        "--log-format", choices=sorted(LOG_FORMATS), default=env.get("LOG_FORMAT", "plain") or "plain"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    # argparse applies ``type`` to string defaults too, so a bad environment value is reported
    # like a bad flag.
    parser.add_argument(
        "--max-concurrent-reconciles",
        type=at_least(1, int),
        default=env.get("MAX_CONCURRENT_RECONCILES") or str(max_concurrent_reconciles),
        help="reconcile passes per controller at once (default: $MAX_CONCURRENT_RECONCILES, else "
        f"{max_concurrent_reconciles})",
    )
    parser.add_argument(
        "--kube-api-qps",
        type=at_least(0.0, float),
        default=env.get("KUBE_API_QPS") or str(DEFAULT_QPS),
        help="client-side limit of API requests per second, 0 = none (default: $KUBE_API_QPS, else "
        f"{DEFAULT_QPS:g}, as controller-runtime)",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=at_least(0, int),
        default=env.get("KUBE_API_BURST") or str(DEFAULT_BURST),
        help=f"API requests at once above --kube-api-qps (default: $KUBE_API_BURST, else {DEFAULT_BURST})",
    )
    add_leader_election_options(parser, env, prog)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.kube_api_qps > 0 and args.kube_api_burst < 1:
        parser.error("--kube-api-burst must be at least 1 when --kube-api-qps is not 0")
    if args.all_namespaces:
        namespaces: tuple[str, ...] = ()
    elif args.namespace:
        namespaces = split_namespaces(args.namespace)
    else:
        namespaces = split_namespaces([env.get("WATCH_NAMESPACE", "")])
    lease_namespace = ""
    if args.leader_elect:
        if errors := leader.duration_errors(
            args.leader_election_lease_duration,
            args.leader_election_renew_deadline,
            args.leader_election_retry_period,
        ):
            parser.error("; ".join(errors))
        # The pod's own namespace, as controller-runtime's in-cluster default; on a host, the
        # first watched namespace: where the operator's RBAC surely reaches.
        lease_namespace = (
            args.leader_election_namespace or env.get("POD_NAMESPACE") or next(iter(namespaces), "")
        )
        if not lease_namespace:
            parser.error(
                "--leader-elect needs a namespace for the Lease: set --leader-election-namespace "
                "(LEADER_ELECTION_NAMESPACE), or POD_NAMESPACE (the downward API does in a pod), or "
                "watch a namespace (--namespace)"
            )
    if args.metrics_port is None:
        default_port = DEFAULT_METRICS_PORT if args.metrics_secure else DEFAULT_INSECURE_METRICS_PORT
        args.metrics_port = int(env.get("METRICS_PORT") or default_port)
    return Options(
        namespaces,
        args.metrics_port,
        args.health_port,
        args.log_format,
        args.verbose,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
        leader_elect=args.leader_elect,
        leader_election_namespace=lease_namespace,
        leader_election_id=args.leader_election_id,
        lease_duration=args.leader_election_lease_duration,
        renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period,
        metrics_secure=args.metrics_secure,
        metrics_cert_dir=args.metrics_cert_dir,
    )


def add_leader_election_options(parser: argparse.ArgumentParser, env: Mapping[str, str], prog: str) -> None:
    """kubebuilder's ``--leader-elect`` and controller-runtime's election settings (seconds)."""
    parser.add_argument(
        "--leader-elect",
        type=boolean,
        nargs="?",
        const=True,
        default=env.get("LEADER_ELECT") or "false",
        help="elect a leader on a Lease, so that replicas can stand by; only the leader reconciles "
        "(default: $LEADER_ELECT, else false)",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=env.get("LEADER_ELECTION_NAMESPACE") or "",
        help="namespace of the Lease (default: $LEADER_ELECTION_NAMESPACE, else $POD_NAMESPACE, else "
        "the first watched namespace)",
    )
    parser.add_argument(
        "--leader-election-id",
        default=env.get("LEADER_ELECTION_ID") or "",
        help=f"name of the Lease (default: $LEADER_ELECTION_ID, else {leases.lease_name(prog or '<app>')})",
    )
    for name, default, what in (
        ("lease-duration", leader.LEASE_DURATION, "how long standbys wait before taking an unrenewed Lease"),
        ("renew-deadline", leader.RENEW_DEADLINE, "how long the leader acts without a successful renewal"),
        ("retry-period", leader.RETRY_PERIOD, "how often the leader renews and standbys try"),
    ):
        var = f"LEADER_ELECTION_{name.replace('-', '_').upper()}"
        parser.add_argument(
            f"--leader-election-{name}",
            type=at_least(0.0, float),
            default=env.get(var) or str(default),
            help=f"{what}, in seconds (default: ${var}, else {default:g})",
        )


@dataclass
class Runtime:
    """What an operator's handlers share within one process."""

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
        With leader election, ``kube``'s writes are fenced (:mod:`shared.client.leader`).
        """
        self._managed.append((controller, kube, clock or Clock()))
        if events is not None:
            self._recorders.append(events)

    def on_startup(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` at start-up, on the event loop (it may start tasks that wait for
        :meth:`active`)."""
        self._on_startup.append(hook)

    def active(self) -> bool:
        """Whether this process may reconcile (the controllers' gate): every watch has synced
        (listed, and every listed object handled: :mod:`shared.controller.serving`), so no pass plans
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
            blind_after=float(os.environ.get(WATCH_FAILURE_TIMEOUT_ENV) or DEFAULT_BLIND_AFTER),
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
