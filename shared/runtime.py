"""Start-up conventions shared by every operator: options, logging, kopf settings, endpoints.

An operator package calls :func:`run` from its ``__main__`` with its name, the controllers it
reports metrics for and the child resources it watches; everything else is the same for all:

- options from the command line, then the environment (``WATCH_NAMESPACE``, ``METRICS_PORT``,
  ``HEALTH_PORT``, ``LOG_FORMAT``, ``MAX_CONCURRENT_RECONCILES``, ``KUBE_API_QPS``,
  ``KUBE_API_BURST``); ``WATCH_NAMESPACE`` is a comma-separated list, empty means all
  namespaces (OLM's ``olm.targetNamespaces`` annotation maps onto it in the bundle);
- throttling: at most ``MAX_CONCURRENT_RECONCILES`` passes per controller at once
  (:mod:`shared.workqueue`), reported as ``controller_runtime_max_concurrent_reconciles``, and
  the client's rate limit (:mod:`shared.kube`; QPS 0 = none), both applied at start-up to every
  managed controller and client;
- kopf standalone (one replica, ``Recreate`` rollouts; kopf has no Lease election), with
  resource scanning disabled so no cluster-wide namespace/CRD list permission is needed, and
  handler progress kept in annotations only (``status.kopf`` would be pruned by structural
  schemas);
- Events only for warnings and errors from kopf itself; operators post their decisions
  explicitly;
- server-side label selectors on child watches (:mod:`shared.caches`);
- ``/metrics``, ``/healthz``, ``/readyz`` (:mod:`shared.serving`); ``WATCH_FAILURE_TIMEOUT``
  (seconds, default 120) is how long a watch may fail before ``/healthz`` does;
- watches that reconnect fast after an API outage and notice dead connections (see
  :func:`configure_settings`).
"""

from __future__ import annotations

import argparse
import getpass
import logging
import math
import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kopf

from shared.caches import watch_only_managed
from shared.clock import OFFSET_ENV, Clock
from shared.kube import DEFAULT_BURST, DEFAULT_QPS, KubeClient
from shared.metrics import Metrics
from shared.serving import (
    DEFAULT_BLIND_AFTER,
    DEFAULT_METRICS_PORT,
    DEFAULT_PROBE_PORT,
    Endpoints,
    Readiness,
    track_watches,
)
from shared.workqueue import DEFAULT_MAX_CONCURRENT_RECONCILES, Controller

LOG_FORMATS = {"plain": kopf.LogFormat.PLAIN, "full": kopf.LogFormat.FULL, "json": kopf.LogFormat.JSON}
PROGRESS_PREFIX = "operators.k8s-operators-py.dev"
WATCH_FAILURE_TIMEOUT_ENV = "WATCH_FAILURE_TIMEOUT"  # seconds a watch may fail before /healthz does
logger = logging.getLogger("shared.runtime")
N = TypeVar("N", int, float)


def operator_identity() -> str:
    """Who this process is, for kopf's peering identity and logs; never fails.

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


def parse_options(
    argv: Sequence[str] | None, env: Mapping[str, str] | None = None, prog: str = ""
) -> Options:
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
        "--metrics-port", type=int, default=int(env.get("METRICS_PORT", DEFAULT_METRICS_PORT))
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
        default=env.get("MAX_CONCURRENT_RECONCILES") or str(DEFAULT_MAX_CONCURRENT_RECONCILES),
        help="reconcile passes per controller at once (default: $MAX_CONCURRENT_RECONCILES, else "
        f"{DEFAULT_MAX_CONCURRENT_RECONCILES})",
    )
    parser.add_argument(
        "--kube-api-qps",
        type=at_least(0.0, float),
        default=env.get("KUBE_API_QPS") or str(DEFAULT_QPS),
        help=f"API requests per second, 0 = unlimited (default: $KUBE_API_QPS, else {DEFAULT_QPS:g})",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=at_least(0, int),
        default=env.get("KUBE_API_BURST") or str(DEFAULT_BURST),
        help=f"API requests at once above the QPS (default: $KUBE_API_BURST, else {DEFAULT_BURST})",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.kube_api_qps > 0 and args.kube_api_burst < 1:
        parser.error("--kube-api-burst must be at least 1 when --kube-api-qps is not 0")
    if args.all_namespaces:
        namespaces: tuple[str, ...] = ()
    elif args.namespace:
        namespaces = split_namespaces(args.namespace)
    else:
        namespaces = split_namespaces([env.get("WATCH_NAMESPACE", "")])
    return Options(
        namespaces,
        args.metrics_port,
        args.health_port,
        args.log_format,
        args.verbose,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
    )


def configure_settings(settings: kopf.OperatorSettings, app: str, child_resources: Iterable[str]) -> None:
    """Apply the shared kopf settings (see the module docstring for why each is set)."""
    settings.peering.standalone = True
    settings.scanning.disabled = True
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PROGRESS_PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=PROGRESS_PREFIX, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING
    # The server ends each watch after 5 min, and the client drops one after 5.5 min: a
    # connection that died without a FIN or RST (a partition) is noticed, not waited on forever.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    # API retries at most 2 s apart (kopf's default grows to 21 s between attempts, so an
    # outage of 22 s took 12 s more to recover from); a watch whose retries run out connects
    # again, and one that fails otherwise starts over (shared.serving.track_watches).
    settings.networking.error_backoffs = (0.5, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2)
    watch_only_managed(settings, child_resources, app)


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """kopf's credentials, never left on disk.

    In a pod, the official client's in-cluster loader: it reads the ServiceAccount's files and
    takes the API server's address from ``KUBERNETES_SERVICE_HOST`` (kopf's own
    service-account login uses ``kubernetes.default.svc``, a name that needs cluster DNS).
    Elsewhere, kopf's kubeconfig loader, which keeps an embedded certificate and key in memory:
    the official one writes them to temp files removed only at a clean exit, so every SIGKILL
    left a client key on disk. Kubeconfigs that need a plugin (exec, auth-provider) still go
    through the official client.
    """
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return kopf.login_via_client(**kwargs)
    info = kopf.login_with_kubeconfig(**kwargs)
    if info is not None and (info.token or info.certificate_data or info.certificate_path or info.username):
        return info
    return kopf.login_via_client(**kwargs)


@dataclass
class Runtime:
    """What an operator's handlers share within one process."""

    app: str
    controllers: tuple[str, ...]
    child_resources: tuple[str, ...] = ()
    metrics: Metrics = field(default_factory=Metrics)
    readiness: Readiness = field(default_factory=Readiness)
    options: Options = field(default_factory=Options)
    _managed: list[tuple[Controller, KubeClient, Clock]] = field(default_factory=list)

    def manage(self, controller: Controller, kube: KubeClient, clock: Clock | None = None) -> None:
        """At start-up load ``kube``'s credentials; at exit stop ``controller``'s loops, close ``kube``.

        A shifted ``clock`` (``OPERATOR_CLOCK_OFFSET``) is announced in the log at start-up.
        """
        self._managed.append((controller, kube, clock or Clock()))

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

    def register(self, registry: kopf.OperatorRegistry | None = None) -> None:
        """Register the shared start-up and clean-up activities."""
        endpoints = Endpoints(
            self.metrics,
            self.readiness,
            self.options.metrics_port,
            self.options.probe_port,
            blind_after=float(os.environ.get(WATCH_FAILURE_TIMEOUT_ENV) or DEFAULT_BLIND_AFTER),
        )

        async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
            configure_settings(settings, self.app, self.child_resources)
            # One watch per watched resource and namespace (one cluster-wide when none given).
            # kopf has no public accessor for the selectors its watchers were registered with.
            watched = (registry or kopf.get_default_registry())._watching.get_all_selectors()
            self.readiness.expect(len(list(watched)) * max(1, len(self.options.namespaces)))
            self.apply_options()
            for _, kube, clock in self._managed:
                if clock.offset:
                    logger.warning(f"clock shifted by {clock.offset.total_seconds():+.3f}s ({OFFSET_ENV})")
                await kube.load()
            await endpoints.start()

        async def cleanup(**_: Any) -> None:
            for controller, kube, _ in self._managed:
                await controller.shutdown()
                await kube.close()
            await endpoints.stop()

        kopf.on.login(registry=registry, id="shared-login")(login)
        kopf.on.startup(registry=registry, id="shared-startup")(startup)
        kopf.on.cleanup(registry=registry, id="shared-cleanup")(cleanup)

    def run(self, registry: kopf.OperatorRegistry | None = None) -> None:
        """Run kopf until SIGINT/SIGTERM, with the shared conventions applied."""
        kopf.configure(verbose=self.options.verbose, log_format=LOG_FORMATS[self.options.log_format])
        track_watches(self.readiness)
        self.register(registry)
        kopf.run(
            registry=registry,
            standalone=True,
            identity=operator_identity(),  # type: ignore[arg-type]  # kopf.Identity is a NewType of str
            clusterwide=self.options.clusterwide,
            namespaces=list(self.options.namespaces),
        )
