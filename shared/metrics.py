"""Prometheus metrics compatible with controller-runtime, on a private registry.

Names, labels and buckets mirror controller-runtime so existing dashboards and alerts for Go
operators work unchanged:

- ``controller_runtime_reconcile_total{controller,result}``, result in success | error |
  requeue | requeue_after, all four initialised to 0 for every controller at start;
- ``controller_runtime_reconcile_errors_total{controller}``;
- ``controller_runtime_terminal_reconcile_errors_total{controller}``;
- ``controller_runtime_reconcile_panics_total{controller}``;
- ``controller_runtime_reconcile_time_seconds{controller}`` (histogram, controller-runtime's
  buckets);
- ``controller_runtime_max_concurrent_reconciles{controller}`` and
  ``controller_runtime_active_workers{controller}`` (gauges).

How kopf outcomes map onto ``result`` is decided in :mod:`shared.reconcile`. Each process uses
its own :class:`Metrics` (a private ``CollectorRegistry``), never the global default registry,
and ``_created`` series are disabled to match Go's output.
"""

from __future__ import annotations

from collections.abc import Iterable

import kopf
import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Go's client has no *_created series; dashboards built for controller-runtime don't expect them.
prometheus_client.disable_created_metrics()

RESULTS = ("success", "error", "requeue", "requeue_after")

# Exceptions that indicate a bug rather than a failing dependency: counted as panics.
PROGRAMMING_ERRORS: tuple[type[BaseException], ...] = (
    AssertionError,
    AttributeError,
    IndexError,
    KeyError,
    NameError,
    RecursionError,
    TypeError,
    ZeroDivisionError,
)


def is_terminal(exc: BaseException) -> bool:
    """A failure that retrying cannot fix (kopf's PermanentError)."""
    return isinstance(exc, kopf.PermanentError)


RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip


class Metrics:
    """All reconcile metrics of one operator process."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=r,
        )

    def init_controllers(self, controllers: Iterable[str], max_concurrent: int) -> None:
        """Create every labelled series at zero so rates and alerts work from the first scrape."""
        for c in controllers:
            for result in RESULTS:
                self.reconcile_total.labels(c, result)
            self.reconcile_errors.labels(c)
            self.terminal_errors.labels(c)
            self.panics.labels(c)
            self.reconcile_time.labels(c)
            self.max_concurrent.labels(c).set(max_concurrent)
            self.active_workers.labels(c).set(0)

    def observe(self, controller: str, result: str, seconds: float, exc: BaseException | None = None) -> None:
        """Record one finished reconcile; ``exc`` is the exception it ended with, if any."""
        self.reconcile_time.labels(controller).observe(seconds)
        self.reconcile_total.labels(controller, result).inc()
        if result == "error":
            self.reconcile_errors.labels(controller).inc()
        if exc is not None and is_terminal(exc):
            self.terminal_errors.labels(controller).inc()
        if exc is not None and isinstance(exc, PROGRAMMING_ERRORS):
            self.panics.labels(controller).inc()

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)
