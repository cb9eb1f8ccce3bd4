"""What requests woken all at once cost the work queue, in process (no cluster).

    python -m tools.bench.woken [--requests 10000] [--namespaces 10] [--trace]

A relist, a restart or the standby taking over wakes every object together: each request is
due, and ``max_concurrent_reconciles`` (8) of them run at once while the others wait for a
slot. This stores N bodies in a ``Controller`` behind a closed
gate (as a standby holds them), opens it, and once every slot is held by a reconcile that
waits, reports the growth of the process's resident memory (VmRSS), the tasks alive and, with
``--trace``, tracemalloc's live bytes per request and the lines that allocated the most
(tracemalloc inflates RSS: take RSS from a run without it). Then the passes are let through and
the RSS still held once all have run is reported: CPython's allocator keeps much of a peak.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tracemalloc
from collections.abc import Mapping
from typing import Any

from shared.controller.workqueue import Controller


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def _until(predicate: Any) -> None:
    while not predicate():
        await asyncio.sleep(0.05)


async def run(requests: int, namespaces: int, trace: bool) -> None:
    release, done, gate_open = asyncio.Event(), [0], [False]

    async def reconcile(body: Mapping[str, Any]) -> float | None:
        await release.wait()
        done[0] += 1
        return None

    ctl = Controller("bench", reconcile, gate=lambda: gate_open[0])
    for i in range(requests):
        meta = {"uid": f"u{i}", "namespace": f"ns{i % namespaces}", "name": f"o{i}"}
        ctl.observe(None, {"metadata": meta, "spec": {}})
    gc.collect()
    if trace:
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
    rss0 = rss_mib()
    gate_open[0] = True  # every request is due at once
    limit = ctl.max_concurrent_reconciles
    await _until(lambda: ctl.queued >= requests - limit)
    await asyncio.sleep(0.2)
    gc.collect()
    rss1 = rss_mib()
    tasks = sum(1 for task in asyncio.all_tasks() if task.get_name().startswith("bench/"))
    print(
        f"{requests} requests woken, {limit} slots: {ctl.queued} waiting, {tasks} tasks; "
        f"RSS +{rss1 - rss0:.1f} MiB"
    )
    if trace:
        after = tracemalloc.take_snapshot()
        grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        print(f"traced +{grown / 1024:.0f} KiB, {grown / requests:.0f} B per request")
        for stat in after.compare_to(before, "lineno")[:5]:
            print(f"  {stat}")
        tracemalloc.stop()
    release.set()
    await _until(lambda: done[0] >= requests)
    gc.collect()
    print(f"all {requests} passes run: RSS still +{rss_mib() - rss0:.1f} MiB")
    await ctl.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--trace", action="store_true", help="also tracemalloc's live bytes")
    args = parser.parse_args()
    asyncio.run(run(args.requests, args.namespaces, args.trace))


if __name__ == "__main__":
    main()
