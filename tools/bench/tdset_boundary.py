"""Lag from a TDSet window boundary to the Deployment's new replica count, for many TDSets at once.

    python -m tools.bench.tdset_boundary [--tdsets 10] [--boundaries 3] [--high 4 --low 2]

Starts the local control plane (:func:`tools.bench.lib.control_plane`: kwok nodes that take
thousands of pods) and one TDSet operator as deployed (no debug log; its CSV's rules, as a
user the API server audits) whose clock is shifted (``OPERATOR_CLOCK_OFFSET``) to hh:mm:15.
It creates ``--tdsets`` TDSets whose windows alternate between ``--high`` and ``--low``
replicas every minute, so every TDSet flips at each of ``--boundaries`` whole minutes, all at
the same instant; the first boundary is at least ``--lead`` seconds after they are created
(default: 75 s, or a quarter second per TDSet), so that every Deployment exists by then. A
watch on the Deployments records when each one's ``spec.replicas`` changes; the lag is that
instant (on the operator's shifted clock) minus the boundary. It includes the watch's delivery
time, i.e. it is what a client watching the Deployment sees. Reported per boundary and over
all: min, median, p99 and max, the flips seen before the boundary (must be 0), and the
operator's API writes, CPU and memory.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from localcluster import cluster as localcluster
from shared.api.clock import OFFSET_ENV
from tests.framework.operator_process import OperatorProcess
from tools.bench import lib
from tools.bench.lib import (
    Api,
    AuditLog,
    ProcStats,
    control_plane,
    describe_writes,
    kcm_limits,
    load,
    operator_kubeconfig,
    percentile,
    say,
    summary,
)

UTC = datetime.UTC
TDSETS = "/apis/schedule.rs/v1/namespaces/{ns}/tdsets"
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"


def spec_flipping_at(
    first: datetime.datetime, boundaries: int, high: int = 4, low: int = 2
) -> dict[str, Any]:
    """Windows of one minute each from ``first``: ``high`` replicas, then ``low`` (default), alternating."""
    windows = []
    for i in range(0, boundaries + 1, 2):
        start = first + datetime.timedelta(minutes=i)
        end = start + datetime.timedelta(minutes=1)
        windows.append(
            {
                "startTime": start.hour,
                "startMinute": start.minute,
                "endTime": end.hour,
                "endMinute": end.minute,
                "replica": high,
            }
        )
    return {
        "container": {"image": "nginx:1.27", "port": 80},
        "schedulingConfig": windows,
        "defaultReplica": low,
        "intervalMint": 60,
    }


class ReplicaWatch:
    """Records (shifted wall time, name, replicas) whenever a Deployment's spec.replicas changes."""

    def __init__(self, offset: float) -> None:
        self.offset = datetime.timedelta(seconds=offset)
        self.changes: list[tuple[datetime.datetime, str, int]] = []
        self.last: dict[str, int] = {}

    def __call__(self, kind: str, dep: dict[str, Any]) -> None:
        seen = datetime.datetime.now(UTC) + self.offset
        name, replicas = dep["metadata"]["name"], dep["spec"]["replicas"]
        if kind != "DELETED" and self.last.get(name) != replicas:
            self.last[name] = replicas
            self.changes.append((seen, name, replicas))

    def at(self, replicas: int) -> int:
        return sum(1 for r in self.last.values() if r == replicas)


async def boundaries(
    watcher: ReplicaWatch, first: datetime.datetime, shifted: datetime.datetime, args: argparse.Namespace
) -> list[float]:
    """The lag of every flip at each boundary, once every Deployment has flipped."""
    lags: list[float] = []
    for b in range(args.boundaries):
        boundary = first + datetime.timedelta(minutes=b)
        want = args.high if b % 2 == 0 else args.low
        deadline = time.monotonic() + (boundary - shifted).total_seconds() + 600
        while True:
            flips = [
                (seen - boundary).total_seconds()
                for seen, _, replicas in list(watcher.changes)
                if seen >= boundary - datetime.timedelta(seconds=1) and replicas == want
            ]
            if len(flips) >= args.tdsets or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        if len(flips) < args.tdsets:
            raise SystemExit(f"only {len(flips)} of {args.tdsets} Deployments flipped at {boundary}")
        lags.extend(flips)
        say(f"boundary {boundary:%H:%M:%S} -> {want} replicas: {summary(flips)}; {load()}")
    return lags


async def bench(cl: localcluster.LocalCluster, args: argparse.Namespace) -> None:
    kubeconfig, user = operator_kubeconfig(cl, "tdset")
    audit = AuditLog(cl.audit_log)
    async with Api(cl) as api:
        ns = await api.namespace("bench-tds")
        # Shift the operator's clock to hh:mm:15 now: boundaries fall on its whole minutes.
        now = datetime.datetime.now(UTC)
        offset = (now.replace(second=15, microsecond=0) - now).total_seconds()
        log = Path(tempfile.mkdtemp()) / "tdset.log"
        say(f"starting the TDSet operator (clock offset {offset:+.1f}s)")
        env = {OFFSET_ENV: f"{offset:.6f}", **lib.operator_env(args)}
        op = OperatorProcess("operators.tdset", kubeconfig, log, namespaces=ns, env=env, verbose=False)
        op.start()
        assert op.proc is not None
        stats = ProcStats(op.proc.pid)
        watcher = ReplicaWatch(offset)
        watch = asyncio.create_task(api.watch(DEPLOYMENTS.format(ns=ns), watcher))
        try:
            shifted = datetime.datetime.now(UTC) + datetime.timedelta(seconds=offset)
            lead = args.lead if args.lead is not None else max(75.0, args.tdsets / 4)
            first = (shifted + datetime.timedelta(seconds=lead + 59)).replace(second=0, microsecond=0)
            spec = spec_flipping_at(first, args.boundaries, args.high, args.low)
            bodies = [
                {"apiVersion": "schedule.rs/v1", "kind": "TDSet", "metadata": {"name": f"t{i}"}, "spec": spec}
                for i in range(args.tdsets)
            ]
            took = await api.create_all(TDSETS.format(ns=ns), bodies)
            say(
                f"{args.tdsets} TDSets created in {took:.1f}s; {args.boundaries} boundaries from "
                f"{first:%H:%M}:00 (operator clock); log {log}"
            )
            t0 = time.monotonic()
            while watcher.at(args.low) < args.tdsets:
                if watch.done():
                    watch.result()
                await asyncio.sleep(0.2)
            to_first = (first - (datetime.datetime.now(UTC) + watcher.offset)).total_seconds()
            say(f"all {args.tdsets} Deployments at {args.low} replicas after {time.monotonic() - t0:.1f}s, "
                f"{to_first:.0f}s before the first boundary; {load()}")  # fmt: skip
            if to_first < 0:
                raise SystemExit("the Deployments were not all there before the first boundary: raise --lead")
            mark, cpu0 = audit.mark(), stats.sample()
            lags = await boundaries(watcher, first, shifted, args)
            cpu1 = stats.sample()
            early = [lag for lag in lags if lag < 0]
            print(
                f"\nboundary -> Deployment replicas, {len(lags)} flips ({args.tdsets} TDSets x "
                f"{args.boundaries} boundaries): min {min(lags):.3f}s median {statistics.median(lags):.3f}s "
                f"p99 {percentile(lags, 99):.3f}s max {max(lags):.3f}s; early flips: {len(early)}\n"
                f"operator over the boundaries: API writes {describe_writes(audit.writes(user, mark))}; "
                f"CPU {cpu1.cpu_s - cpu0.cpu_s:.1f}s; RSS {cpu1.rss_mib:.0f} MiB (peak {cpu1.hwm_mib:.0f})\n"
                f"limits: {lib.operator_limits(args)}; kube-controller-manager {kcm_limits(cl)}; "
                f"{load()}"
            )
        finally:
            watch.cancel()
            op.stop()


def main() -> None:
    parser = lib.parser(__doc__)
    parser.add_argument("--tdsets", type=int, default=10, help="TDSets flipping at the same instant")
    parser.add_argument("--boundaries", type=int, default=3, help="consecutive minute boundaries")
    parser.add_argument("--high", type=int, default=4, help="replicas inside the windows")
    parser.add_argument("--low", type=int, default=2, help="replicas outside (defaultReplica)")
    parser.add_argument("--lead", type=float, default=None, help="seconds to the first boundary")
    args = parser.parse_args()
    with control_plane(args.nodes, args.pods_per_node) as cl:
        asyncio.run(bench(cl, args))


if __name__ == "__main__":
    main()
