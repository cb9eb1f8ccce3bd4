"""Many scheduled Netperfs on kwok nodes: what each scheduled run costs the operator.

    python -m tools.bench.netperf_schedule [--netperfs 200] [--schedule "* * * * *"] [--runs 4]

The scheduled counterpart of ``tools.bench.netperf_kwok``, on the same control plane, with
the operator as deployed and the same stand-in kubelet (``tools.bench.netperf_kwok.Run``
ends each client pod with a real netperf output as soon as kwok runs it). It creates
``--netperfs`` Netperfs (TCP_STREAM, 3 samples) with ``spec.schedule`` ``--schedule`` and the
defaults of everything else (history limit, ``regression``), all between two due times so they
share them, and follows ``--runs`` due times on the wall clock. The operator's clock is the real
one: a run of ``* * * * *`` takes a minute of wall clock.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster import cluster as localcluster
from operators.netperf import cron, schedule
from tests.framework.operator_process import OperatorProcess
from tools.bench import lib
from tools.bench.lib import Api, AuditLog, ProcStats, Sample, control_plane, load, operator_kubeconfig, say
from tools.bench.netperf_kwok import NETPERFS, PODS, Run

UTC = datetime.UTC
# Creating the Netperfs must end before the first due time, so that they all share it.
CREATE_MARGIN = 20.0
# A run's interval starts this long before its due time, so its first requests fall in it.
EARLY = 0.5


def _time(text: str | None) -> datetime.datetime | None:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


@dataclass
class RunSeen:
    """One scheduled run of one Netperf, as the harness's watch saw it."""

    scheduled: datetime.datetime
    started: datetime.datetime | None  # status.startedAt (whole seconds)
    seen: float  # time.time() when the watch first saw the run claimed
    finished: str | None = None  # Done or Error
    completed: datetime.datetime | None = None  # status.completedAt


@dataclass
class Schedules:
    """The Netperfs' latest objects and every run their status showed."""

    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[tuple[str, int], RunSeen] = field(default_factory=dict)

    def netperf(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.latest.pop(name, None)
            return
        self.latest[name] = obj
        st = obj.get("status") or {}
        number, scheduled = st.get("run"), _time(st.get("scheduledTime"))
        if not number or scheduled is None:
            return
        key = (name, int(number))
        if key not in self.runs:
            self.runs[key] = RunSeen(scheduled, _time(st.get("startedAt")), time.time())
        seen = self.runs[key]
        if st.get("status") in ("Done", "Error") and seen.finished is None:
            seen.finished, seen.completed = st["status"], _time(st.get("completedAt"))

    def of_due(self, due: datetime.datetime) -> list[RunSeen]:
        """The runs started for due time ``due`` (a Netperf that skipped one has a lower run
        number than the others from then on: runs are matched by due time, not by number)."""
        return [seen for seen in self.runs.values() if seen.scheduled == due]


def quantiles(values: list[float]) -> str:
    if not values:
        return "none"
    return (
        f"p50 {statistics.median(values):.2f}s p99 {lib.percentile(values, 99):.2f}s max {max(values):.2f}s"
    )


def status_bytes(obj: dict[str, Any]) -> int:
    return len(json.dumps(obj.get("status") or {}, separators=(",", ":")))


def describe(counts: Counter[str]) -> str:
    total = sum(counts.values())
    return f"{total} (" + ", ".join(f"{n} {what}" for what, n in counts.most_common()) + ")"


async def sleep_until(instant: datetime.datetime) -> None:
    await asyncio.sleep(max(0.0, (instant - datetime.datetime.now(UTC)).total_seconds()))


def due_times(expression: cron.Cron, after: datetime.datetime, count: int) -> list[datetime.datetime]:
    zone = cron.load_zone("UTC")
    times: list[datetime.datetime] = []
    while len(times) < count:
        nxt = cron.next_after(expression, times[-1] if times else after, zone)
        assert nxt is not None, "the schedule never fires"
        times.append(nxt)
    return times


async def bench(cl: localcluster.LocalCluster, args: argparse.Namespace) -> None:
    expression = cron.parse(args.schedule)
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
            ns = await api.namespace("bench-nps")
            kubelet, seen = Run(api, ns), Schedules()
            watches = [
                asyncio.create_task(api.watch(NETPERFS.format(ns=ns), seen.netperf)),
                asyncio.create_task(api.watch(PODS.format(ns=ns), kubelet.pod)),
            ]
            await asyncio.sleep(1)  # both watches listening
            base = await stats.quiet()
            now = datetime.datetime.now(UTC)
            (first,) = due_times(expression, now, 1)
            if (first - now).total_seconds() < CREATE_MARGIN:  # too close: create after it
                await sleep_until(first + datetime.timedelta(seconds=1))
            say(
                f"creating {args.netperfs} Netperfs ({args.schedule!r}) in {ns}; operator RSS "
                f"{base.rss_mib:.0f} MiB; {load()}"
            )
            spec = {"testType": "TCP_STREAM", "samples": 3, "duration": 2, "schedule": args.schedule}
            body = {"apiVersion": "app.example.com/v1alpha1", "kind": "Netperf", "spec": spec}
            bodies = [{**body, "metadata": {"name": f"n{i}"}} for i in range(args.netperfs)]
            took = await api.create_all(NETPERFS.format(ns=ns), bodies)
            created = datetime.datetime.now(UTC)
            dues = due_times(expression, created, args.runs + 1)
            say(f"{args.netperfs} Netperfs POSTed in {took:.1f}s; first due time {dues[0]:%H:%M:%S}")
            after_create = stats.sample()
            # Interval i: from just before due time i to just before due time i + 1.
            marks: list[tuple[int, Sample]] = []
            early = datetime.timedelta(seconds=EARLY)
            for due in dues:
                while datetime.datetime.now(UTC) < due - early:
                    for task in watches:
                        if task.done():
                            task.result()
                    await asyncio.sleep(min(1.0, (due - early - datetime.datetime.now(UTC)).total_seconds()))
                marks.append((audit.mark(), stats.sample()))
                if len(marks) > 1:
                    runs = seen.of_due(dues[len(marks) - 2])
                    say(
                        f"due {dues[len(marks) - 2]:%H:%M:%S}: {len(runs)} started, "
                        f"{sum(1 for r in runs if r.finished)} finished; "
                        f"{len(kubelet.pods)} pods; {load()}"
                    )
            # Runs that were still going at the next due time: let them finish for their figures.
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and any(
                r.finished is None for due in dues[:-1] for r in seen.of_due(due)
            ):
                await asyncio.sleep(0.5)
            end = stats.sample()
            for task in watches:
                task.cancel()
            listing = await api.request("GET", NETPERFS.format(ns=ns))
        report(
            args,
            audit.requests,
            user,
            seen=seen,
            marks=marks,
            dues=dues,
            memory=(base, after_create, end),
            items=listing["items"],
        )
    finally:
        op.stop()


def report(
    args: argparse.Namespace,
    requests: Callable[[str, int, int], Counter[str]],
    user: str,
    *,
    seen: Schedules,
    marks: list[tuple[int, Sample]],
    dues: list[datetime.datetime],
    memory: tuple[Sample, Sample, Sample],
    items: list[dict[str, Any]],
) -> None:
    base, after_create, end = memory
    minutes = (dues[1] - dues[0]).total_seconds() / 60  # of the first interval; "* * * * *": 1
    print(f"\n{args.netperfs} Netperfs scheduled {args.schedule!r} on kwok, {args.runs} due times:")
    cpu_per_run = []
    total: Counter[str] = Counter()
    started = 0
    for i in range(args.runs):
        (mark, before), (until, after) = marks[i], marks[i + 1]
        cpu = after.cpu_s - before.cpu_s
        cpu_per_run.append(cpu)
        runs = seen.of_due(dues[i])
        lag_status = [(r.started - r.scheduled).total_seconds() for r in runs if r.started]
        lag_seen = [r.seen - r.scheduled.timestamp() for r in runs]
        to_done = [(r.completed - r.scheduled).total_seconds() for r in runs if r.completed]
        counts = requests(user, mark, until)
        total += counts
        started += len(runs)
        errors = sum(1 for r in runs if r.finished == "Error")
        print(
            f"due time {i + 1} ({dues[i]:%H:%M:%S}): {len(runs)} runs started, {errors} in Error; "
            f"operator CPU "
            f"{cpu:.1f}s; API requests {describe(counts)}\n"
            f"  lag due -> startedAt {quantiles(lag_status)}; due -> claim seen {quantiles(lag_seen)}; "
            f"due -> completedAt {quantiles(to_done)}"
        )
    per_run = ", ".join(f"{n / started:.2f} {what}" for what, n in total.most_common())
    print(f"all {args.runs} intervals: {started} runs started, API requests per run started: {per_run}")
    all_lags = [r.seen - r.scheduled.timestamp() for due in dues[:-1] for r in seen.of_due(due)]
    total_cpu = sum(cpu_per_run)
    skipped: Counter[str] = Counter()
    for item in items:
        skipped.update({k: int(v) for k, v in ((item.get("status") or {}).get("skippedRuns") or {}).items()})
    sizes = [status_bytes(item) for item in items]
    objects = [len(json.dumps(item, separators=(",", ":"))) for item in items]
    histories = [len((item.get("status") or {}).get("history") or []) for item in items]
    # What the status would weigh with a full history (the default limit, and the most allowed).
    entries = [e for item in items for e in (item.get("status") or {}).get("history") or []]
    per_entry = statistics.mean(len(json.dumps(e, separators=(",", ":"))) for e in entries or [{}])
    without = statistics.median(
        status_bytes(item)
        - len(json.dumps((item.get("status") or {}).get("history") or [], separators=(",", ":")))
        for item in items
    )
    full, most = ((without + n * per_entry) / 1024 for n in (schedule.DEFAULT_HISTORY, schedule.MAX_HISTORY))
    print(
        f"operator CPU {statistics.mean(cpu_per_run):.1f}s per run (min {min(cpu_per_run):.1f}, "
        f"max {max(cpu_per_run):.1f}), {total_cpu / (args.netperfs * minutes * args.runs) * 1000:.1f} ms "
        f"per Netperf-minute of schedule; due -> claim seen, all runs: {quantiles(all_lags)}\n"
        f"RSS {base.rss_mib:.0f} MiB before, {after_create.rss_mib:.0f} after creating, peak "
        f"{end.hwm_mib:.0f}, {end.rss_mib:.0f} at the end: "
        f"{(end.rss_mib - base.rss_mib) * 1024 / args.netperfs:.0f} KiB per Netperf\n"
        f"skipped runs {dict(skipped) or 0}; history entries {min(histories)}-{max(histories)}; "
        f"status {statistics.median(sizes):.0f} B median, {max(sizes)} B max; whole object "
        f"{statistics.median(objects):.0f} B median, {max(objects)} B max; a history entry "
        f"{per_entry:.0f} B: a status of about {full:.1f} KiB at the default "
        f"{schedule.DEFAULT_HISTORY} entries, {most:.1f} KiB at the most ({schedule.MAX_HISTORY})\n"
        f"{lib.operator_limits(args)}; {load()}"
    )


def main() -> None:
    """Each run is the interval from just before its due time to just before the next one. Reported
    per run: the operator's CPU seconds (also per Netperf-minute of schedule), its API requests by
    verb and resource (the API server's audit log: reads and watches too, not only writes), how
    many runs started and finished in it, and the lag from the due time to the run's start, twice:
    ``status.startedAt - status.scheduledTime`` (the operator's own account, whole seconds) and the
    instant the harness's watch first saw the run's claim minus the due time (sub-second, includes
    the watch's delivery). At the end: RSS (before, peak, after; growth per Netperf), the skipped
    runs (``status.skippedRuns`` summed by reason), and the size of each object's status and its
    history after the last run (the object must stay small).
    """
    parser = lib.parser(__doc__)
    parser.add_argument("--netperfs", type=int, default=200)
    parser.add_argument("--schedule", default="* * * * *", help="spec.schedule (cron, UTC)")
    parser.add_argument("--runs", type=int, default=4, help="due times to follow")
    args = parser.parse_args()
    with control_plane(args.nodes, args.pods_per_node) as cl:
        asyncio.run(bench(cl, args))


if __name__ == "__main__":
    main()
