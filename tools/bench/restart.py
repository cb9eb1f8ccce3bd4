"""Restart of the WebServer operator with N converged WebServers: time to ready, and API writes.

    python -m tools.bench.restart [--webservers 3000] [--idle 60]

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from localcluster import cluster as localcluster
from tests.framework.operator_process import OperatorProcess
from tools.bench import lib
from tools.bench.lib import (
    Api,
    AuditLog,
    ProcStats,
    Tracker,
    control_plane,
    describe_writes,
    load,
    operator_kubeconfig,
    say,
)
from tools.bench.scale import WEBSERVERS, webserver

RESULTS = ("success", "error", "requeue", "requeue_after")


def passes(op: OperatorProcess) -> float:
    metric = "controller_runtime_reconcile_total"
    return sum(op.metric(metric, controller="webserver", result=r) for r in RESULTS)


async def fill(api: Api, count: int) -> str:
    ns = await api.namespace("bench-restart")
    collection = WEBSERVERS.format(ns=ns)
    tracker = Tracker(api, ns, collection).start()
    t0 = time.monotonic()
    say(f"creating {count} WebServers of 1 replica in {ns}; {load()}")
    await api.create_all(collection, [webserver(f"w{i}", 1) for i in range(count)])
    await tracker.wait(count, count)
    await tracker.stop()
    say(f"{count} WebServers Ready in {time.monotonic() - t0:.1f}s; {load()}")
    return ns


async def idle_writes(audit: AuditLog, user: str, seconds: float) -> str:
    mark = audit.mark()
    await asyncio.sleep(seconds)
    return describe_writes(audit.writes(user, mark))


async def bench(cl: localcluster.LocalCluster, args: argparse.Namespace) -> None:
    kubeconfig, user = operator_kubeconfig(cl, "webserver")
    audit = AuditLog(cl.audit_log)
    logdir = Path(tempfile.mkdtemp())
    op = OperatorProcess("operators.webserver", kubeconfig, logdir / "first.log", verbose=False).start()
    assert op.proc is not None
    try:
        async with Api(cl) as api:
            await fill(api, args.webservers)
            before = await ProcStats(op.proc.pid).quiet()
            say(f"first process quiet: RSS {before.rss_mib:.1f} MiB (peak {before.hwm_mib:.1f}); {load()}")
            say(f"steady state: counting writes for {args.idle:.0f}s")
            print(f"steady state, {args.idle:.0f}s with {args.webservers} converged WebServers: API writes "
                  f"{await idle_writes(audit, user, args.idle)}; {load()}", flush=True)  # fmt: skip
    finally:
        op.stop()
    say(f"first process stopped; restarting; {load()}")
    mark = audit.mark()
    t0 = time.monotonic()
    op = OperatorProcess("operators.webserver", kubeconfig, logdir / "second.log", verbose=False)
    op.start(timeout=600)
    assert op.proc is not None
    try:
        ready = time.monotonic() - t0
        say(f"restarted process ready (/readyz) after {ready:.2f}s")
        while passes(op) < args.webservers:
            await asyncio.sleep(0.2)
        first_passes = time.monotonic() - t0
        after = await ProcStats(op.proc.pid).quiet(window=5.0)
        quiet = time.monotonic() - t0
        await asyncio.sleep(args.idle)
        writes = describe_writes(audit.writes(user, mark))
        print(
            f"\nrestart with {args.webservers} converged WebServers: /readyz after {ready:.2f}s, every "
            f"WebServer's first pass done after {first_passes:.2f}s, quiet after {quiet:.1f}s; API writes "
            f"from start to {args.idle:.0f}s after quiet: {writes}; RSS {after.rss_mib:.1f} MiB (peak "
            f"{after.hwm_mib:.1f}) vs {before.rss_mib:.1f} MiB (peak {before.hwm_mib:.1f}) before; {load()}"
        )
    finally:
        op.stop()


def main() -> None:
    """Starts the local control plane (``tools.bench.lib.control_plane``) and the WebServer
    operator as deployed (no debug log; its CSV's rules, as a user the API server audits), creates
    ``--webservers`` WebServers of one replica in one namespace and waits until every pod is Ready
    and every status says so, and the operator is quiet. Then, from the audit log:

    1. steady state: the API writes the operator makes in ``--idle`` seconds (none expected);
    2. restart: SIGTERM, then a new process. Reported: the seconds from start to ``/readyz`` (every
       watch has listed), to the first pass of every WebServer having run (the sum of
       ``controller_runtime_reconcile_total``), and to quiet (under 5 % of a core for 5 s); the
       writes of the new process from its start until ``--idle`` seconds after quiet, which must
       be 0: everything is converged, so a restart must rewrite nothing; the resident memory
       before and after.
    """
    parser = lib.parser(__doc__)
    parser.add_argument("--webservers", type=int, default=3000)
    parser.add_argument("--idle", type=float, default=60, help="seconds of steady state to count writes in")
    args = parser.parse_args()
    with control_plane(args.nodes, args.pods_per_node) as cl:
        asyncio.run(bench(cl, args))


if __name__ == "__main__":
    main()
