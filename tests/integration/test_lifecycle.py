"""Lifecycle guarantees of localcluster: clear start-up errors, PID-only teardown."""

from __future__ import annotations

import subprocess
import sys

import pytest

from localcluster.binaries import ensure_binaries
from localcluster.cluster import LocalCluster
from localcluster.components import ComponentError


def test_failing_component_reports_its_log_tail(tmp_path):
    bins = ensure_binaries()
    (tmp_path / "logs").mkdir()
    cl = LocalCluster(workdir=tmp_path, binaries=bins, keep_workdir=True)
    comp = cl._component("etcd", [str(bins.path("etcd")), "--no-such-flag"])
    with pytest.raises(ComponentError) as err:
        cl.wait_component(comp, "GET /health", lambda: False, timeout=60)
    msg = str(err.value)
    assert "etcd exited with code" in msg
    assert "no-such-flag" in msg  # etcd's own complaint, from the log tail
    cl.down()


def test_unready_component_times_out_with_deadline_message(tmp_path):
    (tmp_path / "logs").mkdir()
    cl = LocalCluster(workdir=tmp_path, binaries=ensure_binaries(), keep_workdir=True)
    comp = cl._component(
        "sleeper", [sys.executable, "-c", "print('booting', flush=True); import time; time.sleep(60)"]
    )
    # Let it print first: a loaded machine may take longer than the 1 s deadline to start Python.
    cl.wait_component(comp, "booted", lambda: "booting" in comp.log_path.read_text(), timeout=60)
    with pytest.raises(ComponentError) as err:
        cl.wait_component(comp, "never", lambda: False, timeout=1)
    assert "sleeper not ready (never) within 1s" in str(err.value)
    assert "booting" in str(err.value)
    cl.down()
    assert not comp.alive()


def test_down_stops_only_its_own_processes_in_reverse_order(tmp_path):
    (tmp_path / "logs").mkdir()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        cl = LocalCluster(workdir=tmp_path, binaries=ensure_binaries(), keep_workdir=True)
        script = (
            "import signal, sys, time\n"
            "def bye(*_):\n"
            "    open(sys.argv[1], 'a').write(sys.argv[2] + '\\n'); sys.exit(0)\n"
            "signal.signal(signal.SIGTERM, bye)\n"
            "print('up', flush=True)\n"
            "time.sleep(120)\n"
        )
        order = tmp_path / "order"
        comps = [cl._component(n, [sys.executable, "-c", script, str(order), n]) for n in ("first", "second")]
        for c in comps:
            cl.wait_component(c, "started", lambda c=c: "up" in c.log_path.read_text(), timeout=30)
        cl.down()
        assert order.read_text().split() == ["second", "first"]
        assert all(not c.alive() for c in comps)
        assert bystander.poll() is None  # a process we did not start survives
    finally:
        bystander.kill()
