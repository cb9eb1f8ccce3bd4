"""Every family the operators export passes promtool's lint (``promtool check metrics``), and
so does what ``/metrics`` serves.
"""

import shutil
import subprocess

import aiohttp
import pytest

from localcluster.process import free_port
from operators import PACKAGES, description
from shared.controller.metrics import NAMESPACED, TABLE, Metrics, MetricSpec
from shared.controller.serving import Endpoints, Readiness


def every_family_sampled(operator: str, extra: tuple[MetricSpec, ...] = ()) -> bytes:
    """``operator``'s exposition with at least one sample in every family it exports.

    promtool only lints families that have samples, and a labelled family has none until
    something sets it: linting a fresh process would skip every per-object gauge.
    """
    own = (*description(operator).metrics, *extra)
    m = Metrics(domain=own)
    m.init_controllers([operator], 6)
    for spec in (*TABLE, *own):
        labels = {name: "x" for name in spec.labels}
        if spec.kind == "counter":
            m.counter(spec.name).labels(**labels).inc()
        elif spec.kind == "gauge":
            m.gauge(spec.name).labels(**labels).set(1)
        else:
            m.histogram(spec.name).labels(**labels).observe(0.1)
    return m.exposition()


def promtool_check(exposition: bytes) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: `make test` installs Debian's prometheus package")
    proc = subprocess.run([promtool, "check", "metrics"], check=False, input=exposition, capture_output=True)
    return (proc.stdout + proc.stderr).decode().strip() + (
        "" if proc.returncode == 0 else f" (exit {proc.returncode})"
    )


@pytest.mark.parametrize("operator", PACKAGES)
def test_promtool_finds_nothing_in_any_family(operator):
    lines = every_family_sampled(operator).decode().splitlines()
    families = {line.split()[2] for line in lines if line.startswith("# TYPE")}
    sampled = {line.split("{")[0].split()[0] for line in lines if not line.startswith("#")}
    assert {s.name for s in (*TABLE, *description(operator).metrics)} <= families
    # Every family, the process collector's included, has a sample for promtool to lint.
    assert all(any(s == f or s.startswith(f + "_") for s in sampled) for f in families), families - sampled
    text = "\n".join(lines).encode() + b"\n"
    assert promtool_check(text) == ""


def test_promtool_check_catches_a_bad_name():
    """The check above can fail: the name promtool rejected on a fresh machine."""
    bad = MetricSpec("netperf_throughput_bits_per_second", "gauge", "bits", NAMESPACED)
    assert 'use base unit "bytes" instead of "bits"' in promtool_check(
        every_family_sampled("netperf", (bad,))
    )


async def test_what_metrics_serves_passes_promtool():
    metrics = Metrics()
    metrics.init_controllers(["demo"], 6)
    mport, pport = free_port(), free_port()
    endpoints = Endpoints(metrics, Readiness(), mport, pport, host="127.0.0.1")
    await endpoints.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{mport}/metrics") as resp:
            body = await resp.read()
    finally:
        await endpoints.stop()
    assert promtool_check(body) == ""
