import inspect
import shutil
import subprocess
import time

import aiohttp
import pytest
from kopf._cogs.clients import watching

from localcluster.cluster import free_port
from shared import serving
from shared.metrics import Metrics
from shared.serving import Endpoints, Readiness, track_watches


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


async def test_track_watches_marks_listing_through_kopf_generator(monkeypatch):
    async def fake_continuous_watch(**kwargs):
        yield {"type": None, "object": {}}
        yield watching.Bookmark.LISTED
        yield {"type": "ADDED", "object": {}}

    monkeypatch.setattr(watching, "continuous_watch", fake_continuous_watch)
    r = Readiness()
    undo = track_watches(r)
    try:
        with pytest.raises(RuntimeError):
            track_watches(Readiness())
        gen = watching.continuous_watch(resource="pods.v1", namespace="ns", settings=None)
        first = await gen.__anext__()
        assert first["type"] is None and not r.is_ready() and r.pending() == ["pods.v1@ns"]
        assert await gen.__anext__() is watching.Bookmark.LISTED
        assert r.is_ready()
        items = [i async for i in gen]
        assert items == [{"type": "ADDED", "object": {}}]
    finally:
        undo()
    assert watching.continuous_watch is fake_continuous_watch


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
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: `make test` installs Debian's prometheus package"
    proc = subprocess.run([promtool, "check", "metrics"], check=False, input=body, capture_output=True)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


async def test_a_watch_that_fails_is_reported_retried_with_a_fresh_listing_and_recovers(monkeypatch):
    """#15.10: kopf let such an error end the resource's watcher for good (running blind)."""
    r = Readiness()
    seen_blind: list[list[str]] = []

    async def fake_continuous_watch(**kwargs):
        if not seen_blind:
            seen_blind.append([])
            raise RuntimeError("403 Forbidden while the API server starts")
        seen_blind.append(r.blind(time.monotonic() + 1000, 0))  # what /healthz sees meanwhile
        yield watching.Bookmark.LISTED

    monkeypatch.setattr(watching, "continuous_watch", fake_continuous_watch)
    monkeypatch.setattr(serving, "RETRY_CAP", 0.01)
    undo = track_watches(r)
    try:
        gen = watching.continuous_watch(resource="pods.v1", namespace="ns", settings=None)
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
