"""HTTP endpoints of an operator: ``/metrics`` (default :8443), ``/healthz`` and ``/readyz``
(default :8081), served with aiohttp on kopf's own event loop.

``/metrics`` is served over HTTPS to callers the API server vouches for
(:mod:`shared.client.metricsauth`: TokenReview, SubjectAccessReview; 401, 403, 500 otherwise)
when :class:`Endpoints` is given a TLS context and a :class:`~shared.client.metricsauth.MetricsAuth`,
as the runtime does by default (``--metrics-secure``); the probes stay plain HTTP on their own
port, for the kubelet.

``/healthz`` answers as long as the event loop does and no watch has been failing for longer
than ``blind_after`` (then the kubelet restarts the pod rather than let it run blind).
``/readyz`` answers 200 only once every watch kopf started has *synced*: its initial LIST is
over and every listed object has been through kopf's handlers, so the caches they fill
(:class:`shared.controller.caches.OwnerCache`, a controller's store, an operator's own dicts) hold the
current state, and the operator will react to changes from here on. That is client-go's
``HasSynced``, true only once the initial list's items were delivered to the handlers; the
controllers' gate (:meth:`shared.controller.runtime.Runtime.active`) opens on it too.

The end of the LIST alone is not enough: kopf hands each event to a worker task of its object
and goes on, so when its ``Bookmark.LISTED`` marker passes, the last listed objects (a few
with handlers that never wait, many with handlers that block or wait) have not reached a
handler yet. A pass planned then misses children and autoscalers (a TDSet scales an HPA-grown
Deployment down to its schedule, a WebServer creates a surplus pod). kopf has no
public hook for either moment, so :func:`track_watches` wraps two of its internals: the
``continuous_watch`` generator, to see the listing and its end (the same wrapper makes every
relist converge, :mod:`shared.controller.informer`), and ``queueing.watcher``, to see each listed event
leave kopf's processing of it (handlers included, whether they succeeded or not). kopf is
pinned in ``constraints.txt`` and ``tests/unit/test_serving.py`` fails if those internals
change shape.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from aiohttp import web

from shared.client.metricsauth import MetricsAuth
from shared.controller import informer
from shared.controller.metrics import Metrics

DEFAULT_METRICS_PORT = 8443  # HTTPS, as controller-runtime's scaffold
DEFAULT_INSECURE_METRICS_PORT = 8080  # plain HTTP (--metrics-secure=false), as before
DEFAULT_PROBE_PORT = 8081
# /healthz fails once a watch has been failing this long (seconds; env WATCH_FAILURE_TIMEOUT).
DEFAULT_BLIND_AFTER = 120.0
logger = logging.getLogger("shared.serving")


class Readiness:
    """Tracks which watch streams have synced: listed, and every listed object handled."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: dict[str, bool] = {}
        # kopf starts its watches one by one: until all have *started*, "every started watch
        # has listed" would be true too early (a pass would see the parent but no children).
        self._expected = 1
        self._failing: dict[str, float] = {}  # watch -> monotonic time of its first failure

    def expect(self, count: int) -> None:
        """How many watch streams must have listed before the process is ready."""
        with self._lock:
            self._expected = max(1, count)

    def watch_started(self, key: str) -> None:
        with self._lock:
            self._watches.setdefault(key, False)

    def watch_listed(self, key: str) -> None:
        """The watch has synced (:class:`Listing`); it stays so across relists, as in client-go."""
        with self._lock:
            self._watches[key] = True

    def watch_failing(self, key: str, now: float) -> None:
        """The watch's stream broke with an error (kept since its first failure)."""
        with self._lock:
            self._failing.setdefault(key, now)

    def watch_recovered(self, key: str) -> None:
        with self._lock:
            self._failing.pop(key, None)

    def blind(self, now: float, longer_than: float) -> list[str]:
        """Watches that have been failing for more than ``longer_than`` seconds."""
        with self._lock:
            return sorted(k for k, since in self._failing.items() if now - since > longer_than)

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(k for k, listed in self._watches.items() if not listed)

    def is_ready(self) -> bool:
        with self._lock:
            return len(self._watches) >= self._expected and all(self._watches.values())


class _Listed(dict[str, Any]):
    """An event of a listing on its way to kopf's handlers, with the :class:`Listing` to tell."""

    __slots__ = ("listing",)

    def __init__(self, event: Mapping[str, Any], listing: Listing) -> None:
        super().__init__(event)
        self.listing: Listing | None = listing

    def handled(self) -> None:
        listing, self.listing = self.listing, None
        if listing is not None:
            listing.handled()


class Listing:
    """One listing of one watch: synced once it has ended and kopf has handled every event of it.

    A counter, not a set of objects: each event carries its listing (:meth:`track`) and says
    when kopf is done with it, so 10,000 objects cost one integer and an attribute per event.
    An object deleted during the listing still has its listed event handled first (kopf keeps
    one object's events in order); a handler that fails still ends kopf's processing of the
    event; a listing that breaks off never ends, and the next one is counted afresh.
    """

    def __init__(self, synced: Callable[[], None]) -> None:
        self._synced: Callable[[], None] | None = synced
        self._unhandled = 0
        self.ended = False

    def track(self, event: Mapping[str, Any]) -> _Listed:
        self._unhandled += 1
        return _Listed(event, self)

    def handled(self) -> None:
        self._unhandled -= 1
        self._check()

    def end(self) -> None:
        self.ended = True
        self._check()

    def _check(self) -> None:
        if self.ended and self._unhandled == 0 and self._synced is not None:
            synced, self._synced = self._synced, None
            synced()


RESYNC_PERIOD = 600.0  # seconds between forced relists of each watch (shared.controller.informer)
RETRY_CAP = 30.0  # longest pause between attempts of a failing watch (client-go's reflector)


def track_watches(readiness: Readiness, resync_period: float | None = RESYNC_PERIOD) -> Callable[[], None]:
    """Route kopf's watch streams through ``readiness`` and :func:`shared.controller.informer.converging`.

    Returns an undo function. Every event of a listing (the listed objects, and the deletions
    a relist found) is counted in a :class:`Listing`, and kopf's watcher gets a processor that
    reports each back once processed: the watch is ready when its listing has ended and the
    count is back to zero. A relist is counted the same way; readiness, once reached, stays.

    Each watch (resource and namespace) keeps one :class:`~shared.controller.informer.Store` across its
    relists; the resync period gets up to 10% jitter so the watches of one process (and of
    many operators) do not relist in step.

    A watch never gives up. kopf lets an API error that outlasts its request retries escape
    its watch stream (a 429 "storage is (re)initializing" from an API server that just
    started, a 403 while RBAC is being fixed, a 5xx), and the operator then stops: every
    API-server restart could cost a pod restart. Here the error is caught, counted as a
    failing watch (``/healthz`` turns unhealthy once one has failed for ``blind_after``
    seconds, so a watch that cannot recover still ends in a restart rather than a blind
    process), and the watch starts over with a fresh listing after a jittered, capped
    exponential pause.
    """
    from kopf._cogs.clients import watching
    from kopf._core.reactor import queueing

    original = watching.continuous_watch
    original_watcher = queueing.watcher
    if getattr(original, "_readiness_wrapped", False):
        raise RuntimeError("kopf watches are already tracked by another Readiness")
    stores: dict[str, informer.Store] = {}

    async def continuous_watch(**kwargs: Any) -> AsyncIterator[Any]:
        key = f"{kwargs['resource']}@{kwargs.get('namespace') or '*'}"
        readiness.watch_started(key)
        store = stores.setdefault(key, informer.Store())
        failures = 0
        while True:
            resync = resync_period * random.uniform(1.0, 1.1) if resync_period else None
            listing = Listing(lambda: readiness.watch_listed(key))
            try:
                async for item in informer.converging(
                    original(**kwargs),
                    store,
                    listed_marker=watching.Bookmark.LISTED,
                    resync_after=resync,
                    name=key,
                ):
                    if item is watching.Bookmark.LISTED:
                        listing.end()
                        readiness.watch_recovered(key)
                        failures = 0
                    # kopf's watcher drops BOOKMARK events unprocessed: one counted would never
                    # come back (none comes before LISTED today).
                    if not listing.ended and isinstance(item, Mapping) and item.get("type") != "BOOKMARK":
                        yield listing.track(item)
                    else:
                        yield item
                return  # 410 Gone, resync, pause: kopf's infinite_watch lists again
            except Exception as exc:
                readiness.watch_failing(key, time.monotonic())
                delay = min(RETRY_CAP, 0.5 * 2**failures) * random.uniform(1.0, 1.2)
                failures += 1
                logger.warning(f"watch of {key} failed ({exc!r}); listing again in {delay:.1f}s")
                await asyncio.sleep(delay)

    async def watcher(*, processor: Any, **kwargs: Any) -> None:
        async def processing(*, raw_event: Any, **kw: Any) -> Any:
            try:
                return await processor(raw_event=raw_event, **kw)
            finally:
                if isinstance(raw_event, _Listed):
                    raw_event.handled()

        await original_watcher(processor=processing, **kwargs)

    continuous_watch._readiness_wrapped = True  # type: ignore[attr-defined]  # a marker: wrapped once
    watching.continuous_watch = continuous_watch
    queueing.watcher = watcher

    def undo() -> None:
        watching.continuous_watch = original
        queueing.watcher = original_watcher

    return undo


class Endpoints:
    """The metrics and probe HTTP servers of one operator process."""

    def __init__(
        self,
        metrics: Metrics,
        readiness: Readiness,
        metrics_port: int = DEFAULT_METRICS_PORT,
        probe_port: int = DEFAULT_PROBE_PORT,
        host: str = "0.0.0.0",
        *,
        blind_after: float = DEFAULT_BLIND_AFTER,
        metrics_tls: ssl.SSLContext | None = None,
        metrics_auth: MetricsAuth | None = None,
    ) -> None:
        if metrics_tls is not None and metrics_port == probe_port:
            raise ValueError(f"HTTPS metrics need a port of their own; the probes' ({probe_port}) is HTTP")
        self.blind_after = blind_after
        self.metrics_tls = metrics_tls
        self.metrics_auth = metrics_auth
        self.metrics = metrics
        self.readiness = readiness
        self.metrics_port = metrics_port
        self.probe_port = probe_port
        self.host = host
        self._runners: list[web.AppRunner] = []

    async def _metrics(self, _: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, self.metrics.exposition)
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def _guarded_metrics(self, request: web.Request) -> web.Response:
        """``/metrics`` for a caller :attr:`metrics_auth` lets through, else its error."""
        assert self.metrics_auth is not None
        decision = await self.metrics_auth.decide(
            request.headers.get("Authorization"), request.method, request.path
        )
        if not decision.allowed:
            return web.Response(status=decision.status, text=decision.message)
        return await self._metrics(request)

    async def _healthz(self, _: web.Request) -> web.Response:
        blind = self.readiness.blind(time.monotonic(), self.blind_after)
        if blind:
            # Never run blind: a restart lists everything afresh.
            return web.Response(
                status=503, text=f"watches failing for over {self.blind_after:.0f}s: {', '.join(blind)}"
            )
        return web.Response(text="ok")

    async def _readyz(self, _: web.Request) -> web.Response:
        if self.readiness.is_ready():
            return web.Response(text="ok")
        pending = self.readiness.pending()
        detail = (
            f"waiting for the initial listing, and its handling, of: {', '.join(pending)}"
            if pending
            else "no watch started"
        )
        return web.Response(status=503, text=detail)

    async def start(self) -> None:
        apps: dict[int, web.Application] = {}
        for port, path, handler in (
            (self.metrics_port, "/metrics", self._guarded_metrics if self.metrics_auth else self._metrics),
            (self.probe_port, "/healthz", self._healthz),
            (self.probe_port, "/readyz", self._readyz),
        ):
            apps.setdefault(port, web.Application()).router.add_get(path, handler)
        for port, app in apps.items():
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            tls = self.metrics_tls if port == self.metrics_port else None
            await web.TCPSite(runner, self.host, port, ssl_context=tls).start()
            self._runners.append(runner)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        if self.metrics_auth is not None:
            await self.metrics_auth.close()
