"""Noisy neighbour: how long a change in a quiet namespace waits while another namespace floods the operator.

    python -m tools.bench.noisy_neighbour [--webservers 3000] [--pause 1] [--quiet-probes 10]
    python -m tools.bench.noisy_neighbour --webservers 10 --replicas 100   # few big ones instead

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster import cluster as localcluster
from tests.framework.operator_process import OperatorProcess
from tools.bench import lib
from tools.bench.lib import (
    MERGE_PATCH,
    Api,
    AuditLog,
    ProcStats,
    Tracker,
    control_plane,
    describe_writes,
    load,
    operator_kubeconfig,
    percentile,
    say,
)
from tools.bench.scale import WEBSERVERS, webserver

PROBE = "probe"


@dataclass(frozen=True)
class Probe:
    replicas: int  # what the probe scaled to
    observed: float  # seconds from the PATCH to observedGeneration
    counted: float  # ... to status.replicas == replicas as well
    flood_ready: int  # Ready pods of the flooding namespace when the probe started


class Watched:
    """The latest body of one object, from a watch of its collection, and a wait on it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.body: dict[str, Any] = {}
        self._changed = asyncio.Event()

    def on_event(self, kind: str, body: dict[str, Any]) -> None:
        if body["metadata"]["name"] == self.name and kind != "DELETED":
            self.body = body
            self._changed.set()

    async def until(self, predicate: Callable[[Mapping[str, Any]], bool], timeout: float) -> None:
        async def wait() -> None:
            while not predicate(self.body):
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), timeout)


def status_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return body.get("status") or {}


async def ready_probe(api: Api, namespace: str) -> tuple[str, Watched, asyncio.Task[Any]]:
    """The probe WebServer created in ``namespace`` and Ready: its path, its watched state and
    the task watching it (cancel it when done)."""
    quiet = WEBSERVERS.format(ns=namespace)
    watched = Watched(PROBE)
    watch = asyncio.create_task(api.watch(quiet, watched.on_event))
    await api.request("POST", quiet, webserver(PROBE, 1))
    await watched.until(lambda b: status_of(b).get("readyReplicas") == 1, 300)
    return f"{quiet}/{PROBE}", watched, watch


async def probe(api: Api, path: str, watched: Watched, replicas: int, flood_ready: int) -> Probe:
    """Scale the probe WebServer to ``replicas``; the seconds until its status says so."""
    t0 = time.monotonic()
    patched = await api.request("PATCH", path, {"spec": {"replicas": replicas}}, content_type=MERGE_PATCH)
    generation = patched["metadata"]["generation"]
    await watched.until(lambda b: (status_of(b).get("observedGeneration") or 0) >= generation, 900)
    observed = time.monotonic() - t0
    await watched.until(
        lambda b: (
            (status_of(b).get("observedGeneration") or 0) >= generation
            and status_of(b).get("replicas") == replicas
        ),
        900,
    )
    return Probe(replicas, observed, time.monotonic() - t0, flood_ready)


def report(what: str, probes: list[Probe]) -> str:
    if not probes:
        return f"{what}: no probes"

    def dist(values: list[float]) -> str:
        return (
            f"p50 {statistics.median(values):.2f}s, p99 {percentile(values, 99):.2f}s, max {max(values):.2f}s"
        )

    return (
        f"{what}: {len(probes)} probes; write -> status.replicas and observedGeneration "
        f"{dist([p.counted for p in probes])} (-> observedGeneration alone "
        f"{dist([p.observed for p in probes])})"
    )


async def bench(
    cl: localcluster.LocalCluster, op: OperatorProcess, user: str, args: argparse.Namespace
) -> None:
    assert op.proc is not None
    stats, audit = ProcStats(op.proc.pid), AuditLog(cl.audit_log)
    async with Api(cl) as api:
        quiet_ns, flood_ns = await api.namespace("bench-quiet"), await api.namespace("bench-flood")
        path, watched, watch = await ready_probe(api, quiet_ns)
        say(f"{quiet_ns}/{PROBE} ready; {load()}")

        flood = WEBSERVERS.format(ns=flood_ns)
        tracker = Tracker(api, flood_ns, flood).start()
        mark, before = audit.mark(), await stats.quiet()
        pods = args.webservers * args.replicas
        say(f"creating {args.webservers} WebServers of {args.replicas} in {flood_ns}; {load()}")
        t0 = time.monotonic()
        posting = asyncio.create_task(
            api.create_all(flood, [webserver(f"w{i}", args.replicas) for i in range(args.webservers)])
        )
        converging = asyncio.create_task(tracker.wait(pods, args.webservers))
        flooded: list[Probe] = []
        replicas = 1
        while not converging.done():
            replicas = 3 - replicas  # 1 -> 2 -> 1 ...
            flooded.append(await probe(api, path, watched, replicas, tracker.ready_pods()))
            p = flooded[-1]
            say(
                f"probe {len(flooded)} (to {p.replicas}, {p.flood_ready}/{pods} Ready in "
                f"{flood_ns}): status after {p.counted:.2f}s (observedGeneration after {p.observed:.2f}s)"
            )
            await asyncio.wait([converging], timeout=args.pause)
        done = converging.result()
        posted = await posting
        after = stats.sample()
        took = done - t0
        say(
            f"{args.webservers} WebServers POSTed in {posted:.1f}s, all Ready and reported in {took:.1f}s; "
            f"{load()}"
        )
        writes = describe_writes(audit.writes(user, mark))
        await tracker.stop()
        await stats.quiet()
        calm: list[Probe] = []
        for _ in range(args.quiet_probes):
            replicas = 3 - replicas
            calm.append(await probe(api, path, watched, replicas, pods))
            await asyncio.sleep(args.pause)
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    print(
        f"\nwhile {args.webservers} WebServers x {args.replicas} pods of one namespace converged "
        f"({took:.1f}s), scaling a WebServer in another namespace:\n"
        f"  {report('during the flood', flooded)}\n  {report('after it, quiet', calm)}\n"
        f"  flood: operator CPU {after.cpu_s - before.cpu_s:.1f}s, RSS {after.rss_mib:.0f} MiB; API writes "
        f"{writes}\n  limits: {lib.operator_limits(args)}; {load()}"
    )


def main() -> None:
    """Starts the local control plane (``tools.bench.lib.control_plane``) and the WebServer operator
    as deployed (no debug log; its CSV's rules, as a user the API server audits), creates the
    WebServer ``probe`` of one replica in namespace B and waits until its status says it is ready.
    Then it creates ``--webservers`` WebServers of ``--replicas`` (1) in namespace A, 16 POSTs at
    once (as ``tools.bench.scale``), and from the first POST until every pod of A is Ready and
    every status of A says so, it scales ``probe`` between 1 and 2 replicas, one change at a time,
    ``--pause`` seconds apart. Each probe is timed from just before its PATCH until B's watch shows
    a status whose ``observedGeneration`` is the patched generation (the first pass for it has
    written) and whose ``replicas`` is the new count (the pod it created or deleted is counted:
    the pass woken by the pod's event has written too). After the flood, ``--quiet-probes`` more
    probes give the figure with nothing else to do.

    Reported: count, p50, p99 and max of both times, for the probes that started during the
    flood and for the quiet ones; each flood probe with the flood's progress (Ready pods of A)
    when it started; how long A took; the operator's CPU and API writes; the load average.
    """
    parser = lib.parser(__doc__)
    parser.add_argument("--webservers", type=int, default=3000, help="WebServers of the flood")
    parser.add_argument("--replicas", type=int, default=1, help="pods of each WebServer of the flood")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between probes")
    parser.add_argument("--quiet-probes", type=int, default=10, help="probes after the flood")
    args = parser.parse_args()
    env = lib.operator_env(args)
    with control_plane(args.nodes, args.pods_per_node) as cl:
        kubeconfig, user = operator_kubeconfig(cl, "webserver")
        log = Path(tempfile.mkdtemp()) / "webserver.log"
        op = OperatorProcess("operators.webserver", kubeconfig, log, env=env, verbose=False).start()
        say(f"WebServer operator running (pid {op.proc.pid if op.proc else '?'}, log {log})")
        try:
            asyncio.run(bench(cl, op, user, args))
        finally:
            op.stop()


if __name__ == "__main__":
    main()
