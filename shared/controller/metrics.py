"""Prometheus metrics compatible with controller-runtime, on a private registry.

The same names, labels and buckets as a Go operator's (``TABLE``), so dashboards and alerts
written for controller-runtime work unchanged; per-object series are dropped when the object
goes. What is exported and how it stays cheap: ``Metrics``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from shared.api.description import NAMESPACED, MetricSpec
from shared.api.errors import TerminalError

# Go's client has no *_created series; dashboards built for controller-runtime don't expect them.
# (Unannotated in prometheus_client 0.26.)
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

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
    return isinstance(exc, TerminalError)


RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)  # fmt: skip


# controller-runtime's workqueue_queue_duration_seconds buckets: 10 ns to 1000 s, x10 apart.
QUEUE_BUCKETS = tuple(10e-9 * 10**i for i in range(12))

# client-go's request latency buckets (k8s.io/client-go/tools/metrics via component-base).
REQUEST_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

# What every operator exports; an operator's own metrics are in its description.
TABLE: tuple[MetricSpec, ...] = (
    MetricSpec(
        "controller_runtime_reconcile_total",
        "counter",
        "Total number of reconciliations per controller",
        ("controller", "result"),
    ),
    MetricSpec(
        "controller_runtime_reconcile_errors_total",
        "counter",
        "Total number of reconciliation errors per controller",
        ("controller",),
    ),
    MetricSpec(
        "controller_runtime_terminal_reconcile_errors_total",
        "counter",
        "Total number of terminal reconciliation errors per controller",
        ("controller",),
    ),
    MetricSpec(
        "controller_runtime_reconcile_panics_total",
        "counter",
        "Total number of reconciliation panics per controller",
        ("controller",),
    ),
    MetricSpec(
        "controller_runtime_reconcile_time_seconds",
        "histogram",
        "Length of time per reconciliation per controller",
        ("controller",),
        buckets=RECONCILE_BUCKETS,
    ),
    MetricSpec(
        "controller_runtime_max_concurrent_reconciles",
        "gauge",
        "Maximum number of concurrent reconciles per controller",
        ("controller",),
    ),
    MetricSpec(
        "controller_runtime_active_workers",
        "gauge",
        "Number of currently used workers per controller",
        ("controller",),
    ),
    MetricSpec(
        "workqueue_depth",
        "gauge",
        "Current depth of workqueue",
        ("name", "controller"),
    ),
    MetricSpec(
        "workqueue_queue_duration_seconds",
        "histogram",
        "How long in seconds an item stays in workqueue before being requested",
        ("name", "controller"),
        buckets=QUEUE_BUCKETS,
    ),
    MetricSpec(
        "leader_election_master_status",
        "gauge",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
        "indicates master. 'name' is the string used to identify the lease. Please make sure to "
        "group by name.",
        ("name",),
    ),
    MetricSpec(
        "rest_client_requests_total",
        "counter",
        "Number of HTTP requests to the API server, partitioned by status code, method, and host",
        ("code", "method", "host"),
    ),
    MetricSpec(
        "rest_client_request_duration_seconds",
        "histogram",
        "Request latency in seconds, broken down by verb and host",
        ("verb", "host"),
        buckets=REQUEST_BUCKETS,
    ),
    MetricSpec(
        "metrics_auth_reviews_total",
        "counter",
        "Reviews the /metrics filter asked the API server for, by review (tokenreview, "
        "subjectaccessreview) and result (authenticated, unauthenticated, allowed, denied, error)",
        ("review", "result"),
    ),
    MetricSpec(
        "metrics_auth_limited_total",
        "counter",
        "Requests for /metrics refused without a review, by the limit reached: answered 429 (rate: "
        "new tokens' reviews per second; in_flight: new tokens' reviews at once) or closed before "
        "the TLS handshake (connections: connections open at once; handshakes: per second)",
        ("limit",),
    ),
)
# The series of the /metrics filter's counters, made at zero at start.
METRICS_AUTH_REVIEWS = (
    ("tokenreview", "authenticated"),
    ("tokenreview", "unauthenticated"),
    ("tokenreview", "error"),
    ("subjectaccessreview", "allowed"),
    ("subjectaccessreview", "denied"),
    ("subjectaccessreview", "error"),
)
METRICS_AUTH_LIMITS = ("rate", "in_flight", "connections", "handshakes")
BY_NAME = {m.name: m for m in TABLE}


class _Series:
    """One label set of an ``ObjectGauge`` or ``ObjectCounter``, as ``labels()`` returns
    it: made on each call and dropped after, the value lives in the family's dict."""

    __slots__ = ("family", "key")

    def __init__(self, family: _ObjectFamily, key: tuple[str, ...]) -> None:
        self.family, self.key = family, key

    def set(self, value: float) -> None:
        self.family._put(self.key, float(value))

    def inc(self, amount: float = 1) -> None:
        if self.family.kind == "counter" and amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.family._put(self.key, self.family.values.get(self.key, 0.0) + amount)

    def dec(self, amount: float = 1) -> None:
        assert self.family.kind == "gauge", "a counter only goes up"
        self.inc(-amount)


class _ObjectFamily:
    """A labelled gauge or counter kept as ``{label values: value}`` and yielded at scrape time.

    ``labels(...)`` creates the series at 0 as prometheus_client's does (a counter at 0 from the
    first pass is what ``increase()`` needs to see the first step). Only the event loop writes;
    the exposition, in a thread, reads a copy of the dict (``dict.copy`` holds the GIL
    throughout), so a series added or removed during a scrape cannot break it. The series are
    also indexed by object (namespace, name), so replacing or dropping one object's series costs
    its own series, not all of them.
    """

    kind = ""

    def __init__(self, spec: MetricSpec, registry: CollectorRegistry) -> None:
        assert spec.kind == self.kind, f"{spec.name} is a {spec.kind}"
        self.spec = spec
        self.values: dict[tuple[str, ...], float] = {}
        self._objects: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
        registry.register(self)  # a collector: describe() and collect()

    def _put(self, key: tuple[str, ...], value: float) -> None:
        self.values[key] = value
        self._objects.setdefault(key[:2], set()).add(key)

    def _drop(self, key: tuple[str, ...]) -> None:
        del self.values[key]
        keys = self._objects.get(key[:2])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._objects[key[:2]]

    def _key(self, values: tuple[str, ...], named: dict[str, str]) -> tuple[str, ...]:
        names = self.spec.labels
        if named:
            assert not values and set(named) == set(names), f"{self.spec.name} takes labels {names}"
            values = tuple(named[n] for n in names)
        assert len(values) == len(names), f"{self.spec.name} takes labels {names}"
        return tuple(str(v) for v in values)

    def labels(self, *values: str, **named: str) -> _Series:
        key = self._key(values, named)
        self._put(key, self.values.get(key, 0.0))
        return _Series(self, key)

    def remove(self, *values: str) -> None:
        """Drop one series; KeyError when there is none (as prometheus_client)."""
        self._drop(self._key(values, {}))

    def remove_by_labels(self, labels: dict[str, str]) -> None:
        """Drop every series whose labels include ``labels``."""
        at = [(self.spec.labels.index(n), v) for n, v in labels.items()]
        namespace, name = labels.get("namespace"), labels.get("name")
        candidates: Iterable[tuple[str, ...]] = self.values
        if namespace is not None and name is not None:  # one object's: from the index
            candidates = self._objects.get((namespace, name), set())
        for key in [k for k in candidates if all(k[i] == v for i, v in at)]:
            self._drop(key)

    def set_object(self, namespace: str, name: str, series: Mapping[tuple[str, ...], float]) -> None:
        """Make an object's series exactly ``series`` ({the label values after namespace and
        name: value}): each set first, then the others dropped, so a scrape in between never
        misses a series that stays (a missing sample would make Prometheus resolve its alert)."""
        wanted = {self._key((namespace, name, *rest), {}): float(value) for rest, value in series.items()}
        for key, value in wanted.items():
            self._put(key, value)
        for key in [k for k in self._objects.get((namespace, name), ()) if k not in wanted]:
            self._drop(key)

    def clear(self) -> None:
        self.values.clear()
        self._objects.clear()

    def _family(self) -> CounterMetricFamily | GaugeMetricFamily:
        spec = self.spec
        if self.kind == "counter":
            return CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
        return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for key, value in self.values.copy().items():
            family.add_metric(key, value)
        yield family


class ObjectGauge(_ObjectFamily):
    """A per-object gauge: ``labels(namespace, name).set(v)``, as prometheus_client's Gauge."""

    kind = "gauge"


class ObjectCounter(_ObjectFamily):
    """A per-object counter: ``labels(namespace, name).inc()``, as prometheus_client's Counter."""

    kind = "counter"


def per_object(spec: MetricSpec) -> bool:
    """Whether ``spec`` has a series per object (its labels start with namespace, name)."""
    return spec.labels[: len(NAMESPACED)] == NAMESPACED and spec.kind in ("gauge", "counter")


class Metrics:
    """All metrics of one operator process, on a private registry.

    ``domain``: the operator's own metrics (its description's); they are registered at once,
    and no metric that is neither in ``TABLE`` nor in ``domain`` can be made.

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
      ``controller_runtime_active_workers{controller}`` (gauges);
    - ``workqueue_depth{name,controller}`` (gauge) and ``workqueue_queue_duration_seconds{name,controller}``
      (histogram, controller-runtime's buckets), both labels the controller's name as
      controller-runtime sets them: the passes that are due but wait for a slot, and how long each
      waited (``shared.controller.workqueue`` has no queue of keys: a pass waiting for a slot
      is what an item in controller-runtime's queue is).

    plus client-go's ``leader_election_master_status{name}`` (1 while this process holds the
    Lease ``name``, 0 while it stands by; no series without leader election),
    ``rest_client_requests_total{code,method,host}`` and
    ``rest_client_request_duration_seconds{verb,host}`` for the requests the operator's own client
    (``shared.client.kube.KubeClient``) makes, ``metrics_auth_reviews_total{review,result}`` and
    ``metrics_auth_limited_total{limit}`` for the ``/metrics`` filter's reviews and the requests it
    refused without one (``shared.client.metricsauth``, ``shared.controller.serving.TLSGate``),
    the process collector's ``process_*`` series, and each operator's domain metrics. Every metric
    is declared once (name, type, help, labels): the shared ones in ``TABLE``, an operator's own
    in its description
    (``shared.api.description.OperatorDescription.metrics``); the registry and the documentation's
    metrics table (``tools/generate/docs.py``) are both made from them.

    Per-object metrics (labels starting with ``namespace``, ``name``; ``NAMESPACED``) are
    ``ObjectGauge`` / ``ObjectCounter`` families, not prometheus_client's: one plain value
    per label set in a dict, yielded at scrape time, where prometheus_client keeps a child object with
    its own lock per label set (about 0.6 KiB a series, 1.9 KiB for a WebServer's three). What is
    scraped is the same, byte for byte.

    How kopf outcomes map onto ``result`` is decided in ``shared.controller.workqueue``. Each process uses
    its own ``Metrics`` (a private ``CollectorRegistry``), never the global default registry,
    and ``_created`` series are disabled to match Go's output.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, *, domain: Iterable[MetricSpec] = ()
    ) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        domain = tuple(domain)
        self.specs = {m.name: m for m in (*TABLE, *domain)}
        # process_* (CPU, memory, file descriptors, start time) and python_info, as Go's
        # process and build-info collectors give controller-runtime operators.
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self._made: dict[str, Counter | Gauge | Histogram | _ObjectFamily] = {}
        self.reconcile_total = self._counter("controller_runtime_reconcile_total")
        self.reconcile_errors = self._counter("controller_runtime_reconcile_errors_total")
        self.terminal_errors = self._counter("controller_runtime_terminal_reconcile_errors_total")
        self.panics = self._counter("controller_runtime_reconcile_panics_total")
        self.reconcile_time = self.histogram("controller_runtime_reconcile_time_seconds")
        self.max_concurrent = self._gauge("controller_runtime_max_concurrent_reconciles")
        self.active_workers = self._gauge("controller_runtime_active_workers")
        self.queue_depth = self._gauge("workqueue_depth")
        self.queue_duration = self.histogram("workqueue_queue_duration_seconds")
        self.requests = self._counter("rest_client_requests_total")
        self.request_duration = self.histogram("rest_client_request_duration_seconds")
        self.auth_reviews = self._counter("metrics_auth_reviews_total")
        self.auth_limited = self._counter("metrics_auth_limited_total")
        for review, result in METRICS_AUTH_REVIEWS:
            self.auth_reviews.labels(review, result)
        for limit in METRICS_AUTH_LIMITS:
            self.auth_limited.labels(limit)
        for spec in domain:
            self._make(spec.name, spec.kind)

    def _make(self, name: str, kind: str) -> Counter | Gauge | Histogram | _ObjectFamily:
        spec = self.specs[name]
        assert spec.kind == kind, f"{name} is a {spec.kind}"
        if name not in self._made:
            if per_object(spec):
                family = ObjectCounter if kind == "counter" else ObjectGauge
                self._made[name] = family(spec, self.registry)
            elif kind == "counter":
                self._made[name] = Counter(name, spec.help, spec.labels, registry=self.registry)
            elif kind == "gauge":
                self._made[name] = Gauge(name, spec.help, spec.labels, registry=self.registry)
            else:
                self._made[name] = Histogram(
                    name, spec.help, spec.labels, buckets=spec.buckets, registry=self.registry
                )
        return self._made[name]

    def counter(self, name: str) -> Counter | ObjectCounter:
        """The counter ``name``: an ``ObjectCounter`` if it has a series per object."""
        made = self._make(name, "counter")
        assert isinstance(made, (Counter, ObjectCounter))
        return made

    def gauge(self, name: str) -> Gauge | ObjectGauge:
        """The gauge ``name``: an ``ObjectGauge`` if it has a series per object."""
        made = self._make(name, "gauge")
        assert isinstance(made, (Gauge, ObjectGauge))
        return made

    def _counter(self, name: str) -> Counter:
        made = self.counter(name)
        assert isinstance(made, Counter)
        return made

    def _gauge(self, name: str) -> Gauge:
        made = self.gauge(name)
        assert isinstance(made, Gauge)
        return made

    def histogram(self, name: str) -> Histogram:
        made = self._make(name, "histogram")
        assert isinstance(made, Histogram)
        return made

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
            self.queue_depth.labels(c, c)
            self.queue_duration.labels(c, c)

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

    def observe_request(self, method: str, host: str, code: int | str, seconds: float) -> None:
        """One API request by the operator's client (code ``<error>`` when none came back)."""
        self.requests.labels(str(code), method.upper(), host).inc()
        self.request_duration.labels(method.upper(), host).observe(seconds)

    def observe_metrics_auth(self, review: str, result: str) -> None:
        """One review of the ``/metrics`` filter, or (review ``limited``) one request refused
        without a review (``shared.client.metricsauth.MetricsAuth``'s ``observe``)."""
        if review == "limited":
            self.auth_limited.labels(result).inc()
        else:
            self.auth_reviews.labels(review, result).inc()

    def forget_object(self, namespace: str, name: str) -> None:
        """Drop an object's series from every namespace/name metric (it was deleted)."""
        for metric_name, metric in self._made.items():
            labels = self.specs[metric_name].labels
            if labels == NAMESPACED:
                with contextlib.suppress(KeyError):  # no series for this object
                    metric.remove(namespace, name)
            elif labels[: len(NAMESPACED)] == NAMESPACED:  # per object and more (e.g. test type)
                metric.remove_by_labels({"namespace": namespace, "name": name})

    def exposition(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)
