import asyncio
import functools
import inspect
import ssl
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import kopf
import pytest
from aiohttp import web
from kopf._cogs.clients import watching
from kopf._cogs.structs import references
from kopf._core.actions import lifecycles
from kopf._core.engines import indexing
from kopf._core.reactor import inventory, orchestration, processing, queueing

from localcluster.process import free_port
from shared.api.metricsauth import RateLimit
from shared.controller import certs, kopf_adapter, serving
from shared.controller.kopf_adapter import track_watches
from shared.controller.metrics import Metrics
from shared.controller.serving import Endpoints, Readiness
from shared.controller.watches import Watch

PODS = references.Resource("", "v1", "pods", kind="Pod", namespaced=True)


def test_readiness_needs_every_started_watch_listed():
    r = Readiness()
    assert not r.is_ready()  # nothing watched yet
    r.watch_started("pods@ns1")
    r.watch_started("webservers@ns1")
    r.watch_listed("pods@ns1")
    assert not r.is_ready() and r.pending() == ["webservers@ns1"]
    r.watch_listed("webservers@ns1")
    assert r.is_ready()
    r.watch_started("pods@ns1")  # a restarted watch stays listed
    assert r.is_ready()


def test_readiness_waits_for_every_expected_watch_to_start():
    r = Readiness()
    r.expect(2)
    r.watch_started("netperfs@*")
    r.watch_listed("netperfs@*")
    assert not r.is_ready()  # the pods watch has not even started: children unknown
    r.watch_started("pods@*")
    assert not r.is_ready()
    r.watch_listed("pods@*")
    assert r.is_ready()


def test_kopf_internal_shape_we_rely_on():
    assert inspect.isasyncgenfunction(watching.continuous_watch)
    params = inspect.signature(watching.continuous_watch).parameters
    assert {"resource", "namespace", "settings"} <= set(params)
    assert watching.Bookmark.LISTED
    # Every watch stream is consumed by queueing.watcher, looked up when a watcher is spawned,
    # which hands each event (the very object the stream yielded) to ``processor``.
    params = inspect.signature(queueing.watcher).parameters
    assert params["processor"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "queueing.watcher(" in inspect.getsource(orchestration)
    assert "await processor(\n                raw_event=raw_event," in inspect.getsource(queueing.worker)


async def test_track_watches_marks_listing_through_kopf_generator(monkeypatch):
    async def fake_continuous_watch(**kwargs):
        yield {"type": None, "object": {}}
        yield watching.Bookmark.LISTED
        yield {"type": "ADDED", "object": {}}

    monkeypatch.setattr(watching, "continuous_watch", fake_continuous_watch)
    kopf_watcher = queueing.watcher
    r = Readiness()
    undo = track_watches(r)
    try:
        with pytest.raises(RuntimeError):
            track_watches(Readiness())
        gen = watching.continuous_watch(resource=PODS, namespace="ns", settings=None)
        first = await gen.__anext__()
        assert first == {"type": None, "object": {}} and not r.is_ready() and r.pending() == ["pods.v1@ns"]
        assert await gen.__anext__() is watching.Bookmark.LISTED
        assert not r.is_ready()  # listed, but the listed object has not been handled
        first.handled()
        assert r.is_ready()
        items = [i async for i in gen]
        assert items == [{"type": "ADDED", "object": {}}]
    finally:
        undo()
    assert watching.continuous_watch is fake_continuous_watch
    assert queueing.watcher is kopf_watcher


def test_a_listing_is_synced_once_ended_and_every_event_handled():
    synced: list[str] = []
    listing = serving.Listing(lambda: synced.append("synced"))
    a, b = listing.track({"type": None, "object": {}}), listing.track({"type": "DELETED", "object": {}})
    a.handled()
    listing.end()
    assert not synced
    b.handled()
    b.handled()  # an event is counted once
    assert synced == ["synced"]
    listing.end()
    assert synced == ["synced"]  # and the listing reports once
    serving.Listing(lambda: synced.append("never")).end()
    assert synced == ["synced", "never"]  # an empty listing is synced when it ends
    broken = serving.Listing(lambda: synced.append("broken"))
    broken.track({"type": None, "object": {}}).handled()
    assert synced == ["synced", "never"]  # a listing that broke off never ends


def pod(name: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns", "uid": f"u-{name}"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta}


async def until(probe: Callable[[], Any], what: str, timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not probe():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def run_kopf_watcher(registry: kopf.OperatorRegistry) -> asyncio.Task[None]:
    """kopf's own watcher of pods in ``ns``, its workers and processing calling ``registry``'s
    handlers, as its orchestrator spawns it (through ``queueing.watcher``, tracked or not)."""
    settings = kopf.OperatorSettings()
    processor = functools.partial(
        processing.process_resource_event,
        lifecycle=lifecycles.all_at_once,
        registry=registry,
        settings=settings,
        indexers=indexing.OperatorIndexers(),
        memories=inventory.ResourceMemories(),
        memobase=kopf.Memo(),
        event_queue=asyncio.Queue(),
        resource=PODS,
    )
    return asyncio.create_task(
        queueing.watcher(namespace="ns", settings=settings, resource=PODS, processor=processor)
    )


async def test_a_watch_is_ready_only_once_every_listed_object_reached_the_handlers(monkeypatch):
    """Kopf hands each listed object to a worker of its own and goes on, so /readyz and
    the controllers' gate opened at the end of the listing, with the caches half filled."""
    registry = kopf.OperatorRegistry()
    release = {name: asyncio.Event() for name in "abc"}
    cache: dict[str, str | None] = {}  # what an operator's cache would hold
    listed = asyncio.Event()

    @kopf.on.event("v1", "pods", registry=registry)
    async def slow_handler(type: str | None, body: kopf.Body, **_: Any) -> None:
        name = body["metadata"]["name"]
        await release[name].wait()
        cache[name] = type
        if name == "b":
            raise RuntimeError("a handler that fails")  # kopf logs it and goes on

    async def fake_continuous_watch(**kwargs):
        for name in "abc":
            yield {"type": None, "object": pod(name)}
        yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}  # never handled
        yield watching.Bookmark.LISTED
        listed.set()  # the watcher asked for more: the marker has passed through it
        yield {"type": "DELETED", "object": pod("c")}  # deleted right after it was listed
        await asyncio.Event().wait()

    monkeypatch.setattr(watching, "continuous_watch", fake_continuous_watch)
    r = Readiness()
    undo = track_watches(r)
    watcher = run_kopf_watcher(registry)
    try:
        await asyncio.wait_for(listed.wait(), 60)
        assert not r.is_ready(), "ready with none of the listed objects handled"
        assert r.pending() == ["pods.v1@ns"]
        release["a"].set()
        await until(lambda: "a" in cache, "pod a handled")
        release["b"].set()
        await until(lambda: "b" in cache, "pod b handled (its handler fails)")
        assert not r.is_ready(), "ready with pod c not handled yet"
        release["c"].set()
        await until(r.is_ready, "ready once every listed pod was handled")
        await until(lambda: cache.get("c") == "DELETED", "pod c's deletion handled after its listing")
        assert cache == {"a": None, "b": None, "c": "DELETED"}
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        undo()


@pytest.mark.slow  # two seconds of real time
async def test_a_listing_that_broke_off_is_not_waited_for(monkeypatch):
    registry = kopf.OperatorRegistry()
    handled: list[str] = []
    attempts: list[int] = []

    @kopf.on.event("v1", "pods", registry=registry)
    async def handler(body: kopf.Body, **_: Any) -> None:
        if body["metadata"]["name"] == "stuck":
            await asyncio.Event().wait()  # this object's worker never gets any further
        handled.append(body["metadata"]["name"])

    async def fake_continuous_watch(**kwargs):
        attempts.append(1)
        if len(attempts) == 1:
            yield {"type": None, "object": pod("stuck")}
            raise RuntimeError("connection reset in the middle of the listing")
        yield {"type": None, "object": pod("b")}
        yield watching.Bookmark.LISTED
        await asyncio.Event().wait()

    monkeypatch.setattr(watching, "continuous_watch", fake_continuous_watch)
    monkeypatch.setattr(kopf_adapter, "RETRY_CAP", 0.01)
    r = Readiness()
    undo = track_watches(r)
    watcher = run_kopf_watcher(registry)
    try:
        await until(r.is_ready, "ready once the second, complete listing was handled")
        assert handled == ["b"] and len(attempts) == 2
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        undo()


async def test_endpoints_serve_metrics_and_probes():
    metrics = Metrics()
    metrics.init_controllers(["demo"], 6)
    readiness = Readiness()
    mport, pport = free_port(), free_port()
    endpoints = Endpoints(metrics, readiness, mport, pport, host="127.0.0.1")
    await endpoints.start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{pport}/healthz") as resp:
                assert resp.status == 200
            async with http.get(f"http://127.0.0.1:{pport}/readyz") as resp:
                assert resp.status == 503
                assert "no watch started" in await resp.text()
            readiness.watch_started("x@*")
            async with http.get(f"http://127.0.0.1:{pport}/readyz") as resp:
                assert resp.status == 503 and "x@*" in await resp.text()
                assert "initial listing, and its handling" in await resp.text()
            readiness.watch_listed("x@*")
            async with http.get(f"http://127.0.0.1:{pport}/readyz") as resp:
                assert resp.status == 200
            async with http.get(f"http://127.0.0.1:{mport}/metrics") as resp:
                assert resp.status == 200
                assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                body = await resp.read()
            async with http.get(f"http://127.0.0.1:{mport}/readyz") as resp:
                assert resp.status == 404  # probes live on their own port
    finally:
        await endpoints.stop()
    assert b'controller_runtime_reconcile_total{controller="demo",result="success"} 0.0' in body
    # promtool's lint of the served body: tests/external/test_metrics_promtool.py


async def test_a_watch_that_fails_is_reported_retried_with_a_fresh_listing_and_recovers(monkeypatch):
    """Kopf let such an error end the resource's watcher for good (running blind)."""
    r = Readiness()
    seen_blind: list[list[str]] = []

    async def fake_continuous_watch(**kwargs):
        if not seen_blind:
            seen_blind.append([])
            raise RuntimeError("403 Forbidden while the API server starts")
        seen_blind.append(r.blind(time.monotonic() + 1000, 0))  # what /healthz sees meanwhile
        yield watching.Bookmark.LISTED

    monkeypatch.setattr(watching, "continuous_watch", fake_continuous_watch)
    monkeypatch.setattr(kopf_adapter, "RETRY_CAP", 0.01)
    undo = track_watches(r)
    try:
        gen = watching.continuous_watch(resource=PODS, namespace="ns", settings=None)
        assert await anext(gen) is watching.Bookmark.LISTED
    finally:
        undo()
    assert seen_blind == [[], ["pods.v1@ns"]]
    assert r.blind(time.monotonic() + 1000, 0) == [] and r.is_ready()


async def test_healthz_fails_once_a_watch_has_failed_for_too_long():
    readiness = Readiness()
    endpoints = Endpoints(Metrics(), readiness, free_port(), free_port(), host="127.0.0.1", blind_after=30)
    assert (await endpoints._healthz(None)).status == 200
    readiness.watch_failing("pods@ns", time.monotonic() - 10)
    assert (await endpoints._healthz(None)).status == 200  # failing, but not for long
    readiness.watch_failing("webservers@ns", time.monotonic() - 31)
    response = await endpoints._healthz(None)
    assert response.status == 503 and "webservers@ns" in response.text and "pods@ns" not in response.text
    readiness.watch_recovered("webservers@ns")
    assert (await endpoints._healthz(None)).status == 200


def run_direct_watcher(watches: list[Watch], r: Readiness) -> tuple[asyncio.Task[None], Callable[[], None]]:
    """The watcher kopf's orchestrator spawns for pods in ``ns`` once ``track_watches`` knows
    ``watches``: kopf's processor must never be called (kopf's per-event processing is skipped)."""

    async def processor(**_: Any) -> None:
        raise AssertionError("kopf's per-event processing was called")

    undo = track_watches(r, watches=watches)
    settings = kopf.OperatorSettings()
    task = asyncio.create_task(
        queueing.watcher(namespace="ns", settings=settings, resource=PODS, processor=processor)
    )
    return task, undo


async def test_events_go_straight_to_the_handlers_in_order_stripped_and_kopf_keeps_nothing(monkeypatch):
    """The watches' handlers get every event, in the stream's order, without kopf's
    ``process_resource_event`` (so no per-object record, ``ResourceMemories``, is ever made),
    and the bodies without managedFields (informer.strip, where events enter)."""
    seen: list[tuple[str | None, str]] = []
    bodies: list[Any] = []
    labelled: list[str] = []

    def handler(event_type: str | None, body: Any) -> None:
        seen.append((event_type, body["metadata"]["name"]))
        bodies.append(body)

    async def fake_continuous_watch(**kwargs):
        for name in "ab":
            body = pod(name)
            body["metadata"]["managedFields"] = [{"manager": "kubectl"}]
            yield {"type": None, "object": body}
        yield watching.Bookmark.LISTED
        yield {"type": "MODIFIED", "object": pod("a")}
        yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}
        yield {"type": "DELETED", "object": pod("a")}
        await asyncio.Event().wait()

    def on_app(event_type: str | None, body: Any) -> None:
        labelled.append(body["metadata"]["name"])

    monkeypatch.setattr(watching, "continuous_watch", fake_continuous_watch)
    r = Readiness()
    watches = [Watch("", "v1", "pods", handler), Watch("", "v1", "pods", on_app, {"app": "x"})]
    watcher, undo = run_direct_watcher(watches, r)
    try:
        await until(lambda: len(seen) == 4, "every event handled")
        assert r.is_ready()
        assert seen == [(None, "a"), (None, "b"), ("MODIFIED", "a"), ("DELETED", "a")]
        assert all("managedFields" not in b["metadata"] for b in bodies)
        assert labelled == []  # a watch's labels are checked on every object, as kopf's filter did
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        undo()


async def test_direct_handling_is_ready_once_every_listed_object_is_handled_and_survives_errors(monkeypatch):
    """On the direct path: the listing is synced only once every listed event has left
    its handlers (a coroutine handler is awaited), and a handler that raises neither stops the
    stream nor keeps the watch from being ready."""
    release = {name: asyncio.Event() for name in "abc"}
    cache: dict[str, str | None] = {}
    listed = asyncio.Event()

    async def slow_handler(event_type: str | None, body: Any) -> None:
        name = body["metadata"]["name"]
        await release[name].wait()
        cache[name] = event_type
        if name == "b":
            raise RuntimeError("a handler that fails")

    async def fake_continuous_watch(**kwargs):
        for name in "abc":
            yield {"type": None, "object": pod(name)}
        yield watching.Bookmark.LISTED
        listed.set()
        yield {"type": "DELETED", "object": pod("c")}
        await asyncio.Event().wait()

    monkeypatch.setattr(watching, "continuous_watch", fake_continuous_watch)
    r = Readiness()
    watcher, undo = run_direct_watcher([Watch("", "v1", "pods", slow_handler)], r)
    try:
        release["a"].set()
        await until(lambda: "a" in cache, "pod a handled")
        assert not r.is_ready() and r.pending() == ["pods.v1@ns"]
        release["b"].set()
        await until(lambda: "b" in cache, "pod b handled (its handler fails)")
        assert not r.is_ready(), "ready with pod c not handled yet"
        release["c"].set()
        await until(r.is_ready, "ready once every listed pod was handled")
        await until(lambda: cache.get("c") == "DELETED", "pod c's deletion handled after its listing")
        assert listed.is_set() and cache == {"a": None, "b": None, "c": "DELETED"}
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        undo()


# -- the metrics port's TLS gate --------------------------------------------------------------


def _tls_client() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx


async def _get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """One keep-alive ``GET /x`` on an open connection: the status code."""
    writer.write(b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def _tls_connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, ssl=_tls_client())


async def _refused(port: int) -> bool:
    """Whether a TLS connection to ``port`` is closed before its handshake completes."""
    try:
        _, writer = await _tls_connect(port)
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        return True
    writer.close()
    return False


async def _until(condition: Callable[[], bool]) -> None:
    """Let the event loop run until ``condition`` holds (a generous deadline, no timing)."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


@pytest.fixture
async def gated():
    """An aiohttp app behind a ``serving.TLSGate`` (its bounds set by each test)."""

    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/x", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    refused: list[str] = []
    assert runner.server is not None
    gate = serving.TLSGate(runner.server, certs.server_context(), refused=refused.append)
    port = free_port()
    server = await asyncio.get_running_loop().create_server(gate, "127.0.0.1", port)
    yield gate, port, refused
    server.close()
    await runner.cleanup()


async def test_the_gate_bounds_connections_open_at_once_handshakes_included(gated):
    """Connections that never finish their handshake hold their slots (until the handshake
    timeout); one more is closed before any handshake; a slot freed is a slot reused."""
    gate, port, refused = gated
    gate.connections = 2
    idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]  # no TLS hello
    await _until(lambda: gate.open == 2)
    assert await _refused(port)
    assert refused == ["connections"] and gate.open == 2
    idle[0][1].close()
    await _until(lambda: gate.open == 1)
    reader, writer = await _tls_connect(port)
    assert await _get(reader, writer) == 200
    assert await _get(reader, writer) == 200  # keep-alive: one handshake, many requests
    writer.close()
    idle[1][1].close()
    await _until(lambda: gate.open == 0)


async def test_the_gate_bounds_new_handshakes_a_second_and_open_connections_keep_serving(gated):
    gate, port, refused = gated
    now = [100.0]
    gate.clock = lambda: now[0]
    gate.handshakes = RateLimit(1.0, 2)
    first = await _tls_connect(port)
    second = await _tls_connect(port)
    assert [await _refused(port) for _ in range(5)] == [True] * 5
    assert refused == ["handshakes"] * 5
    # The scraper's open connection is not cut off by the flood of new ones.
    assert await _get(*first) == 200 and await _get(*second) == 200
    now[0] += 1.0  # one handshake's worth of time later
    third = await _tls_connect(port)
    assert await _get(*third) == 200
    for _, writer in (first, second, third):
        writer.close()
    await _until(lambda: gate.open == 0)


async def test_plain_http_on_the_gated_port_ends_in_a_failed_handshake_and_frees_its_slot(gated):
    gate, port, _ = gated
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await writer.drain()
    assert await reader.read() == b""  # closed without an HTTP answer
    await _until(lambda: gate.open == 0)


async def test_endpoints_count_connections_their_gate_refused():
    metrics = Metrics()
    endpoints = Endpoints(
        metrics, Readiness(), free_port(), free_port(), host="127.0.0.1", metrics_tls=certs.server_context()
    )
    await endpoints.start()
    try:
        assert endpoints.gate is not None
        endpoints.gate.connections = 0
        assert await _refused(endpoints.metrics_port)
        assert b'metrics_auth_limited_total{limit="connections"} 1.0' in metrics.exposition()
        assert b'metrics_auth_limited_total{limit="handshakes"} 0.0' in metrics.exposition()
    finally:
        await endpoints.stop()
