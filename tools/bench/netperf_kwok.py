"""Many Netperfs at once on kwok nodes: creation -> ``Done`` for each, and what it costs the operator.

    python -m tools.bench.netperf_kwok [--netperfs 200]

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from localcluster import cluster as localcluster
from tests.framework.operator_process import OperatorProcess
from tools.bench import lib
from tools.bench.lib import (
    MERGE_PATCH,
    REPO,
    Api,
    AuditLog,
    ProcStats,
    control_plane,
    describe_writes,
    load,
    operator_kubeconfig,
    say,
    summary,
)

NETPERFS = "/apis/app.example.com/v1alpha1/namespaces/{ns}/netperfs"
PODS = "/api/v1/namespaces/{ns}/pods"
OUTPUT = (REPO / "tests" / "unit" / "netperf" / "fixtures" / "tcp_stream.txt").read_text()


class Run:
    """Follows the Netperfs and their pods; ends client pods as a kubelet would."""

    def __init__(self, api: Api, ns: str) -> None:
        self.api, self.ns = api, ns
        self.created: dict[str, float] = {}
        self.finished: dict[str, tuple[float, str]] = {}  # name -> (seconds, Done or Error)
        self.pods: set[str] = set()
        self.ended: set[str] = set()
        self.patches: set[asyncio.Task[Any]] = set()

    def netperf(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        phase = (obj.get("status") or {}).get("status")
        if phase in ("Done", "Error") and name not in self.finished and name in self.created:
            self.finished[name] = (time.monotonic() - self.created[name], phase)

    def pod(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        name = meta["name"]
        if kind == "DELETED":
            self.pods.discard(name)
            return
        self.pods.add(name)
        component = (meta.get("labels") or {}).get("app.kubernetes.io/component")
        running = (pod.get("status") or {}).get("phase") == "Running"
        if component == "client" and running and name not in self.ended:
            self.ended.add(name)
            task = asyncio.create_task(self.end(name))
            self.patches.add(task)
            task.add_done_callback(self.patches.discard)

    async def end(self, pod: str) -> None:
        annotations = {"localcluster.dev/exit-code": "0", "localcluster.dev/termination-message": OUTPUT}
        await self.api.request(
            "PATCH",
            f"{PODS.format(ns=self.ns)}/{pod}",
            {"metadata": {"annotations": annotations}},
            content_type=MERGE_PATCH,
        )


async def bench(cl: localcluster.LocalCluster, args: argparse.Namespace) -> None:
    kubeconfig, user = operator_kubeconfig(cl, "netperf")
    audit = AuditLog(cl.audit_log)
    log = Path(tempfile.mkdtemp()) / "netperf.log"
    op = OperatorProcess(
        "operators.netperf", kubeconfig, log, env=lib.operator_env(args), verbose=False
    ).start()
    assert op.proc is not None
    stats = ProcStats(op.proc.pid)
    try:
        async with Api(cl) as api:
            ns = await api.namespace("bench-np")
            run = Run(api, ns)
            watches = [
                asyncio.create_task(api.watch(NETPERFS.format(ns=ns), run.netperf)),
                asyncio.create_task(api.watch(PODS.format(ns=ns), run.pod)),
            ]
            await asyncio.sleep(1)  # both watches listening
            base = await stats.quiet()
            mark = audit.mark()
            say(f"creating {args.netperfs} Netperfs in {ns}; operator RSS {base.rss_mib:.0f} MiB; {load()}")
            spec = {"testType": "TCP_STREAM", "samples": 3, "duration": 2}
            t0 = time.monotonic()
            for i in range(args.netperfs):
                run.created[f"n{i}"] = t0
            body = {"apiVersion": "app.example.com/v1alpha1", "kind": "Netperf", "spec": spec}
            bodies = [{**body, "metadata": {"name": f"n{i}"}} for i in range(args.netperfs)]
            took = await api.create_all(NETPERFS.format(ns=ns), bodies)
            say(f"{args.netperfs} Netperfs POSTed in {took:.1f}s")
            last_said = time.monotonic()
            while len(run.finished) < args.netperfs or run.pods:
                for task in watches:
                    if task.done():
                        task.result()
                if time.monotonic() - last_said > 15:
                    say(f"{len(run.finished)}/{args.netperfs} finished, {len(run.pods)} pods left; {load()}")
                    last_said = time.monotonic()
                if time.monotonic() - t0 > 1800:
                    raise TimeoutError(f"{len(run.finished)}/{args.netperfs} finished after 30 min")
                await asyncio.sleep(0.1)
            clean = time.monotonic() - t0
            after = stats.sample()
            for task in watches:
                task.cancel()
            times = [t for t, _ in run.finished.values()]
            errors = [n for n, (_, phase) in run.finished.items() if phase != "Done"]
            print(
                f"\n{args.netperfs} Netperfs at once on kwok, creation -> Done: {summary(times)}; last "
                f"Done after {max(times):.2f}s, last pod gone after {clean:.2f}s; {len(errors)} ended in "
                f"Error\noperator: API writes {describe_writes(audit.writes(user, mark))}; CPU "
                f"{after.cpu_s - base.cpu_s:.1f}s; RSS {after.rss_mib:.0f} MiB (peak {after.hwm_mib:.0f}, "
                f"{base.rss_mib:.0f} before); limits: {lib.operator_limits(args)}; {load()}"
            )
    finally:
        op.stop()


def main() -> None:
    """Starts the local control plane (``tools.bench.lib.control_plane``) and the Netperf operator
    as deployed (no debug log; its CSV's rules, as a user the API server audits), creates
    ``--netperfs`` Netperfs (TCP_STREAM, 3 samples) in one namespace at once, and acts as the
    kubelet for their client pods: as soon as kwok reports one Running, it is ended with exit code
    0 and the output of a real netperf run (``tests/unit/netperf/fixtures/tcp_stream.txt``, via
    kwok's ``pod-finish`` stage, as ``tests/integration/test_netperf.py`` does). Nothing runs, so
    creation -> ``Done`` is the operator's own overhead at that concurrency: claim the run, server
    pod, wait Ready, client pod, parse the result, write it, delete both pods. Reported: min,
    median, p99 and max of that time, when the last one finished and when the last pod was gone,
    the operator's API writes, CPU seconds and memory. There is no built-in controller to compare
    with.
    """
    parser = lib.parser(__doc__)
    parser.add_argument("--netperfs", type=int, default=200)
    args = parser.parse_args()
    with control_plane(args.nodes, args.pods_per_node) as cl:
        asyncio.run(bench(cl, args))


if __name__ == "__main__":
    main()
