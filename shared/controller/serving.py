"""HTTP endpoints of an operator: ``/metrics`` (default :8443), ``/healthz`` and ``/readyz``
(default :8081), served with aiohttp on kopf's own event loop.

``/metrics`` is served over HTTPS to callers the API server vouches for
(``shared.client.metricsauth``: TokenReview, SubjectAccessReview; 401, 403, 500 otherwise,
and 429 when a new token's review is beyond its limits)
when ``Endpoints`` is given a TLS context and a ``MetricsAuth``,
as the runtime does by default (``--metrics-secure``); its connections pass a ``TLSGate``
(a bound on connections open and on new handshakes a second) before their TLS handshake. The
probes stay plain HTTP on their own port, for the kubelet.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from aiohttp import web

from shared.api.metricsauth import RateLimit
from shared.client.metricsauth import MetricsAuth
from shared.controller.metrics import Metrics

DEFAULT_METRICS_PORT = 8443  # HTTPS, as controller-runtime's scaffold
DEFAULT_INSECURE_METRICS_PORT = 8080  # plain HTTP (--metrics-secure=false), as before
DEFAULT_PROBE_PORT = 8081
# /healthz fails once a watch has been failing this long (seconds; env WATCH_FAILURE_TIMEOUT).
DEFAULT_BLIND_AFTER = 120.0
# HTTPS connections to the metrics port: at most this many open at once, and at most this many
# new ones' TLS handshakes a second (a burst of as many); beyond either, a connection is closed
# before its handshake costs the event loop anything. A scraper keeps its connection open
# between scrapes (keep-alive), so a flood of new connections does not cut it off.
METRICS_CONNECTIONS = 32
HANDSHAKES_QPS = 20.0
HANDSHAKE_BURST = 20
HANDSHAKE_TIMEOUT = 10.0
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
        """The watch has synced (``Listing``); it stays so across relists, as in client-go."""
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


class Listed(dict[str, Any]):
    """An event of a listing on its way to kopf's handlers, with the ``Listing`` to tell."""

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

    A counter, not a set of objects: each event carries its listing (``track``) and says
    when kopf is done with it, so 10,000 objects cost one integer and an attribute per event.
    An object deleted during the listing still has its listed event handled first (kopf keeps
    one object's events in order); a handler that fails still ends kopf's processing of the
    event; a listing that breaks off never ends, and the next one is counted afresh.
    """

    def __init__(self, synced: Callable[[], None]) -> None:
        self._synced: Callable[[], None] | None = synced
        self._unhandled = 0
        self.ended = False

    def track(self, event: Mapping[str, Any]) -> Listed:
        self._unhandled += 1
        return Listed(event, self)

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


class TLSGate:
    """Accepts TCP connections and starts TLS on each itself, within bounds: at most
    ``connections`` open at once, at most ``qps`` handshakes a second (``burst`` at once), each
    done within ``HANDSHAKE_TIMEOUT``. A connection beyond a bound is closed at once, before
    the handshake (whose key exchange and signature are the expensive part, done on the event
    loop); ``refused(limit)`` is told (``connections`` or ``handshakes``). The connections let
    through are served by ``serve()``'s protocol (aiohttp's request handler).
    """

    def __init__(
        self,
        serve: Callable[[], asyncio.Protocol],
        tls: ssl.SSLContext,
        *,
        connections: int = METRICS_CONNECTIONS,
        qps: float = HANDSHAKES_QPS,
        burst: int = HANDSHAKE_BURST,
        clock: Callable[[], float] = time.monotonic,
        refused: Callable[[str], None] = lambda limit: None,
    ) -> None:
        self.serve = serve
        self.tls = tls
        self.connections = connections
        self.handshakes = RateLimit(qps, burst)
        self.clock = clock
        self.refused = refused
        self.open = 0

    def __call__(self) -> asyncio.Protocol:
        return _GatedConnection(self)


class _GatedConnection(asyncio.Protocol):
    """One connection through a ``TLSGate``: counted, upgraded to TLS, then handed to the
    served protocol (this one forwards to it, so the gate sees the connection end)."""

    def __init__(self, gate: TLSGate) -> None:
        self.gate = gate
        self.app: asyncio.Protocol | None = None
        self.counted = False
        self.early: list[bytes] = []  # application data that came with the end of the handshake
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        gate = self.gate
        limit = (
            "connections"
            if gate.open >= gate.connections
            else "handshakes"
            if not gate.handshakes.take(gate.clock())
            else None
        )
        if limit is not None:
            gate.refused(limit)
            transport.abort()
            return
        gate.open += 1
        self.counted = True
        asyncio.get_running_loop().create_task(self._upgrade(transport))

    async def _upgrade(self, transport: asyncio.Transport) -> None:
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(
                transport, self, self.gate.tls, server_side=True, ssl_handshake_timeout=HANDSHAKE_TIMEOUT
            )
        except Exception:  # a failed or timed-out handshake, a peer gone: the connection ends
            transport.abort()
            self._release()
            return
        if tls is None:  # the peer went away
            self._release()
            return
        self.app = app = self.gate.serve()
        app.connection_made(tls)
        for data in self.early:
            app.data_received(data)
        self.early.clear()
        if self.eof:
            app.eof_received()

    def _release(self) -> None:
        if self.counted:
            self.counted = False
            self.gate.open -= 1

    def data_received(self, data: bytes) -> None:
        if self.app is None:
            self.early.append(data)
        else:
            self.app.data_received(data)

    def eof_received(self) -> bool | None:
        if self.app is None:
            self.eof = True
            return True
        return self.app.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if self.app is not None:
            self.app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.app is not None:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self.app is not None:
            self.app.resume_writing()


class Endpoints:
    """The metrics and probe HTTP servers of one operator process.

    ``/healthz`` answers as long as the event loop does and no watch has been failing for longer
    than ``blind_after`` (then the kubelet restarts the pod rather than let it run blind).
    ``/readyz`` answers 200 only once every watch kopf started has *synced*: its initial LIST is
    over and every listed object has been through kopf's handlers, so the caches they fill
    (``shared.controller.caches.OwnerCache``, a controller's store, an operator's own dicts) hold the
    current state, and the operator will react to changes from here on. That is client-go's
    ``HasSynced``, true only once the initial list's items were delivered to the handlers; the
    controllers' gate (``shared.controller.runtime.Runtime.active``) opens on it too.

    The end of the LIST alone is not enough: kopf hands each event to a worker task of its object
    and goes on, so when the listing ends the last listed objects may not have reached a handler
    yet. ``Listing`` counts both; the kopf adapter
    (``shared.controller.kopf_adapter.track_watches``) feeds it from kopf's watch streams.
    """

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
        self._servers: list[asyncio.AbstractServer] = []
        self.gate: TLSGate | None = None

    async def _metrics(self, _: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, self.metrics.exposition)
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def _guarded_metrics(self, request: web.Request) -> web.Response:
        """``/metrics`` for a caller ``metrics_auth`` lets through, else its error."""
        assert self.metrics_auth is not None
        decision = await self.metrics_auth.decide(
            request.headers.get("Authorization"), request.method, request.path
        )
        if not decision.allowed:
            # A 429 is a limit on new tokens' reviews: the next second may have room.
            headers = {"Retry-After": "1"} if decision.status == HTTPStatus.TOO_MANY_REQUESTS else None
            return web.Response(status=decision.status, text=decision.message, headers=headers)
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
            self._runners.append(runner)
            if port == self.metrics_port and self.metrics_tls is not None:
                assert runner.server is not None
                self.gate = TLSGate(
                    runner.server,
                    self.metrics_tls,
                    refused=lambda limit: self.metrics.observe_metrics_auth("limited", limit),
                )
                server = await asyncio.get_running_loop().create_server(
                    self.gate, self.host, port, reuse_address=True
                )
                self._servers.append(server)
            else:
                await web.TCPSite(runner, self.host, port).start()

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        self._servers.clear()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        if self.metrics_auth is not None:
            await self.metrics_auth.close()
