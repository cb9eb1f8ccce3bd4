"""HTTP endpoints of an operator: ``/metrics`` (default :8080), ``/healthz`` and ``/readyz``
(default :8081), served with aiohttp on kopf's own event loop.

``/healthz`` answers as long as the event loop does and no watch has been failing for longer
than ``blind_after`` (then the kubelet restarts the pod rather than let it run blind).
``/readyz`` answers 200 only once every watch kopf started has finished its initial LIST, i.e.
the operator has seen the current state and will react to changes from here on. kopf has no
public hook for that moment, so :func:`track_watches` wraps kopf's ``continuous_watch`` generator (kopf's own
``Bookmark.LISTED`` marker, yielded after the initial listing); the same wrapper makes every
relist converge (:mod:`shared.informer`). kopf is pinned in ``constraints.txt`` and
``tests/unit/test_serving.py`` fails if that internal changes shape.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web

from shared import informer
from shared.metrics import Metrics

DEFAULT_METRICS_PORT = 8080
DEFAULT_PROBE_PORT = 8081
# /healthz fails once a watch has been failing this long (seconds; env WATCH_FAILURE_TIMEOUT).
DEFAULT_BLIND_AFTER = 120.0
logger = logging.getLogger("shared.serving")


class Readiness:
    """Tracks which watch streams have completed their initial listing."""

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


RESYNC_PERIOD = 600.0  # seconds between forced relists of each watch (shared.informer)
RETRY_CAP = 30.0  # longest pause between attempts of a failing watch (client-go's reflector)


def track_watches(readiness: Readiness, resync_period: float | None = RESYNC_PERIOD) -> Callable[[], None]:
    """Route kopf's watch streams through ``readiness`` and :func:`shared.informer.converging`.

    Returns an undo function. Each watch (resource and namespace) keeps one
    :class:`~shared.informer.Store` across its relists; the resync period gets up to 10%
    jitter so the watches of one process (and of many operators) do not relist in step.

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

    original = watching.continuous_watch
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
            try:
                async for item in informer.converging(
                    original(**kwargs),
                    store,
                    listed_marker=watching.Bookmark.LISTED,
                    resync_after=resync,
                    name=key,
                ):
                    if item is watching.Bookmark.LISTED:
                        readiness.watch_listed(key)
                        readiness.watch_recovered(key)
                        failures = 0
                    yield item
                return  # 410 Gone, resync, pause: kopf's infinite_watch lists again
            except Exception as exc:
                readiness.watch_failing(key, time.monotonic())
                delay = min(RETRY_CAP, 0.5 * 2**failures) * random.uniform(1.0, 1.2)
                failures += 1
                logger.warning(f"watch of {key} failed ({exc!r}); listing again in {delay:.1f}s")
                await asyncio.sleep(delay)

    continuous_watch._readiness_wrapped = True  # type: ignore[attr-defined]
    watching.continuous_watch = continuous_watch  # type: ignore[assignment]

    def undo() -> None:
        watching.continuous_watch = original  # type: ignore[assignment]

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
    ) -> None:
        self.blind_after = blind_after
        self.metrics = metrics
        self.readiness = readiness
        self.metrics_port = metrics_port
        self.probe_port = probe_port
        self.host = host
        self._runners: list[web.AppRunner] = []

    async def _metrics(self, _: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, self.metrics.exposition)
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

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
        detail = f"waiting for initial listing of: {', '.join(pending)}" if pending else "no watch started"
        return web.Response(status=503, text=detail)

    async def start(self) -> None:
        apps: dict[int, web.Application] = {}
        for port, path, handler in (
            (self.metrics_port, "/metrics", self._metrics),
            (self.probe_port, "/healthz", self._healthz),
            (self.probe_port, "/readyz", self._readyz),
        ):
            apps.setdefault(port, web.Application()).router.add_get(path, handler)
        for port, app in apps.items():
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, self.host, port).start()
            self._runners.append(runner)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
