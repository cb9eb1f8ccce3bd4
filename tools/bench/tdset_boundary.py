"""Lag from a TDSet window boundary to the Deployment's new replica count, for many TDSets at once.

    python -m tools.bench.tdset_boundary [--tdsets 10] [--boundaries 3] [--high 4 --low 2]
                                         [--targets] [--lead-time 30]
                                         [--targets --floor python|go [--floor-concurrency N]]

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from localcluster import cluster as localcluster
from shared.api.clock import OFFSET_ENV
from tests.framework.operator_process import OperatorProcess
from tools.bench import flip_floor, lib
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
CLAIM = "schedule.rs/scaled-by"  # operators.tdset.target.HOLDER


def spec_flipping_at(
    first: datetime.datetime,
    boundaries: int,
    high: int = 4,
    low: int = 2,
    *,
    target: str | None = None,
    lead_time: int = 0,
) -> dict[str, Any]:
    """Windows of one minute each from ``first``: ``high`` replicas, then ``low`` (default),
    alternating; scaling the Deployment ``target`` (else one of the TDSet's own), pre-warmed
    ``lead_time`` seconds before each window (0: not)."""
    windows: list[dict[str, Any]] = []
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
                **({"leadTime": f"{lead_time}s"} if lead_time else {}),
            }
        )
    workload: dict[str, Any] = (
        {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target}}
        if target is not None
        else {"container": {"image": "nginx:1.27", "port": 80}}
    )
    return {**workload, "schedulingConfig": windows, "defaultReplica": low, "intervalMint": 60}


def target_deployment(name: str, replicas: int) -> dict[str, Any]:
    """A user's Deployment for ``--targets`` (kwok nodes run its pods)."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"bench": "tdset-target"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }


class ReplicaWatch:
    """Records (shifted wall time, name, replicas) whenever a Deployment's spec.replicas changes,
    and (shifted wall time, name, ready replicas) whenever its status.readyReplicas does."""

    def __init__(self, offset: float) -> None:
        self.offset = datetime.timedelta(seconds=offset)
        self.changes: list[tuple[datetime.datetime, str, int]] = []
        self.last: dict[str, int] = {}
        self.ready: list[tuple[datetime.datetime, str, int]] = []
        self.last_ready: dict[str, int] = {}
        self.claimed: set[str] = set()  # Deployments a TDSet holds (scaleTargetRef)
        self.uids: dict[str, str] = {}  # name -> UID (the floor's precondition)

    def __call__(self, kind: str, dep: dict[str, Any]) -> None:
        seen = datetime.datetime.now(UTC) + self.offset
        name, replicas = dep["metadata"]["name"], dep["spec"]["replicas"]
        if kind == "DELETED":
            return
        self.uids[name] = dep["metadata"]["uid"]
        if CLAIM in (dep["metadata"].get("labels") or {}):
            self.claimed.add(name)
        if self.last.get(name) != replicas:
            self.last[name] = replicas
            self.changes.append((seen, name, replicas))
        ready = int((dep.get("status") or {}).get("readyReplicas") or 0)
        if self.last_ready.get(name) != ready:
            self.last_ready[name] = ready
            self.ready.append((seen, name, ready))

    def at(self, replicas: int) -> int:
        return sum(1 for r in self.last.values() if r == replicas)

    def ready_at(self, replicas: int) -> int:
        """Deployments at ``replicas`` with that many pods Ready."""
        return sum(1 for n, r in self.last.items() if r == replicas and self.last_ready.get(n) == replicas)


async def boundaries(
    watcher: ReplicaWatch, first: datetime.datetime, args: argparse.Namespace
) -> tuple[list[float], list[float]]:
    """The lag of every flip at each boundary, once every Deployment has flipped (a scale-up
    with ``--lead-time``: from its window start minus the lead time); and with
    ``--lead-time``, when each Deployment reported every pod of a pre-warmed window Ready,
    relative to that window's start."""
    lags: list[float] = []
    ready_at: list[float] = []
    lead = datetime.timedelta(seconds=args.lead_time)
    for b in range(args.boundaries):
        boundary = first + datetime.timedelta(minutes=b)
        up = b % 2 == 0
        want = args.high if up else args.low
        due = boundary - lead if up else boundary
        # A flip after the next one is due is not this boundary's any more: a TDSet that had not
        # flipped by then missed it (counted, and its lag is taken as infinite).
        next_due = boundary + datetime.timedelta(minutes=1) - (lead if not up else datetime.timedelta())
        deadline = (
            time.monotonic() + (next_due - (datetime.datetime.now(UTC) + watcher.offset)).total_seconds()
        )
        while True:
            since: dict[str, datetime.datetime] = {}
            for seen, name, replicas in list(watcher.changes):
                if seen >= due - datetime.timedelta(seconds=1) and replicas == want:
                    since.setdefault(name, seen)
            flips = [(seen - due).total_seconds() for seen in since.values()]
            readies = [
                (seen - boundary).total_seconds()
                for seen, name, ready in list(watcher.ready)
                if name in since and seen >= since[name] and ready == want
            ]
            enough = len(flips) >= args.tdsets and (not (up and lead) or len(readies) >= args.tdsets)
            if enough or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        if not flips:
            raise SystemExit(f"no Deployment flipped at {boundary}")
        missed = args.tdsets - len(flips)
        lags.extend(flips + [math.inf] * missed)
        what = f"{want} replicas" + (f" (due {args.lead_time}s before)" if up and lead else "")
        say(
            f"boundary {boundary:%H:%M:%S} -> {what}: {summary(flips)}; missed (not flipped by the next "
            f"boundary): {missed}; {load()}"
        )
        if up and lead:
            # A Deployment not Ready by the end of the window never was for it (infinite).
            ready_at.extend(readies + [math.inf] * (args.tdsets - len(readies)))
            say(
                f"  every pod Ready, relative to the window start: {summary(readies or [math.inf])}; "
                f"not within the window: {args.tdsets - len(readies)}"
            )
    return lags, ready_at


def request_counts(metrics: str) -> dict[str, float]:
    """The operator's requests by method and its passes, from its /metrics text."""
    counts: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("rest_client_requests_total{"):
            method = line.split('method="', 1)[1].split('"', 1)[0]
            counts[method] = counts.get(method, 0.0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith("controller_runtime_reconcile_total{"):
            counts["passes"] = counts.get("passes", 0.0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith(
            ("rest_client_request_duration_seconds_sum{", "rest_client_request_duration_seconds_count{")
        ):
            verb = line.split('verb="', 1)[1].split('"', 1)[0]
            kind = "s" if "_sum{" in line else "n"
            counts[f"{kind}:{verb}"] = counts.get(f"{kind}:{verb}", 0.0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith("controller_runtime_reconcile_time_seconds_sum{"):
            counts["s:pass"] = counts.get("s:pass", 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def report(
    args: argparse.Namespace,
    lags: list[float],
    ready_at: list[float],
    before: dict[str, float],
    after: dict[str, float],
) -> str:
    """The lag over every flip, the pre-warm's readiness and the operator's requests per flip."""
    delta = {k: after[k] - before.get(k, 0.0) for k in sorted(after)}
    requests = ", ".join(f"{k} {n:.0f} ({n / len(lags):.2f}/flip)" for k, n in delta.items() if ":" not in k)
    # Mean latency of a request (rate-limiter wait excluded) by verb, and of a pass.
    latency = ", ".join(
        f"{k[2:]} {1000 * n / delta[f'n:{k[2:]}']:.0f} ms"
        for k, n in delta.items()
        if k.startswith("s:") and delta.get(f"n:{k[2:]}")
    )
    if delta.get("s:pass") and delta.get("passes"):
        latency += f", pass {1000 * delta['s:pass'] / delta['passes']:.0f} ms"
    early = [lag for lag in lags if lag < 0]
    missed = sum(1 for lag in lags if lag == math.inf)
    kind = "scaleTargetRef to existing" if args.targets else "own"
    late = sum(1 for r in ready_at if r > 0)
    prewarm = (
        f"\nwith leadTime {args.lead_time}s, every pod Ready relative to the window start: "
        f"{summary(ready_at)}; {len(ready_at) - late} of {len(ready_at)} Ready at or before the start "
        f"(inf: not within the window)"
        if ready_at
        else ""
    )
    return (
        f"\nboundary -> Deployment replicas ({kind} Deployments), {len(lags)} flips ({args.tdsets} "
        f"TDSets x {args.boundaries} boundaries): min {min(lags):.3f}s median {statistics.median(lags):.3f}s "
        f"p99 {percentile(lags, 99):.3f}s max {max(lags):.3f}s (inf: missed, not flipped before the next "
        f"boundary: {missed}); early flips: {len(early)}{prewarm}\n"
        f"operator requests over the boundaries (its /metrics): {requests}; mean latency: {latency}"
    )


PLANE = ("kube-apiserver", "etcd", "kube-controller-manager")


def plane_cpu(cl: localcluster.LocalCluster) -> dict[str, float]:
    """CPU seconds so far of the control plane's processes that serve and follow the flips."""
    return {c.name: ProcStats(c.proc.pid).sample().cpu_s for c in cl.components if c.name in PLANE and c.proc}


def describe_cpu(before: dict[str, float], after: dict[str, float]) -> str:
    return ", ".join(f"{name} {after[name] - before[name]:.1f}s" for name in after if name in before)


async def floor_clients(
    args: argparse.Namespace, kubeconfig: Path, ns: str, targets: Path, first: datetime.datetime
) -> list[dict[str, Any]]:
    """At each boundary, one client process (``--floor``) sending every flip's PATCH at once;
    started 10 s before the boundary so that it is set up (and its connection open) by then."""
    results: list[dict[str, Any]] = []
    for b in range(args.boundaries):
        boundary = first + datetime.timedelta(minutes=b)
        replicas = args.high if b % 2 == 0 else args.low
        await asyncio.sleep(max(0.0, boundary.timestamp() - 10 - time.time()))
        command = (
            [str(flip_floor.go_binary())]
            if args.floor == "go"
            else [sys.executable, "-m", "tools.bench.flip_floor"]
        )
        proc = await asyncio.create_subprocess_exec(
            *command,
            f"--kubeconfig={kubeconfig}",
            f"--namespace={ns}",
            f"--targets={targets}",
            f"--replicas={replicas}",
            f"--at={boundary.timestamp():.6f}",
            *(
                [f"--{'connections' if args.floor == 'python' else 'concurrency'}={args.floor_concurrency}"]
                if args.floor_concurrency
                else []
            ),
            cwd=lib.REPO,
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"the {args.floor} floor client failed (exit {proc.returncode})")
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
        say(f"  floor client at {boundary:%H:%M:%S}: {results[-1]}")
    return results


async def floor_bench(cl: localcluster.LocalCluster, args: argparse.Namespace) -> None:
    """``--floor``: the boundaries' writes from a plain client, no operator (module docstring)."""
    kubeconfig, user = operator_kubeconfig(cl, "tdset")
    audit = AuditLog(cl.audit_log)
    async with Api(cl) as api:
        ns = await api.namespace("bench-tds")
        watcher = ReplicaWatch(0.0)
        watch = asyncio.create_task(api.watch(DEPLOYMENTS.format(ns=ns), watcher))
        try:
            took = await api.create_all(
                DEPLOYMENTS.format(ns=ns), [target_deployment(f"d{i}", args.low) for i in range(args.tdsets)]
            )
            say(f"{args.tdsets} target Deployments created in {took:.1f}s")
            t0 = time.monotonic()
            while watcher.ready_at(args.low) < args.tdsets:
                if watch.done():
                    watch.result()
                await asyncio.sleep(0.2)
            now = datetime.datetime.now(UTC)
            first = (now + datetime.timedelta(seconds=20 + 59)).replace(second=0, microsecond=0)
            say(
                f"all {args.tdsets} Deployments with {args.low} pods Ready after "
                f"{time.monotonic() - t0:.1f}s; {args.boundaries} boundaries from {first:%H:%M}:00; {load()}"
            )
            targets = Path(tempfile.mkdtemp()) / "targets.json"
            targets.write_text(json.dumps({f"d{i}": watcher.uids[f"d{i}"] for i in range(args.tdsets)}))
            mark, cpu0 = audit.mark(), plane_cpu(cl)
            clients = asyncio.create_task(floor_clients(args, kubeconfig, ns, targets, first))
            lags, _ = await boundaries(watcher, first, args)
            results = await clients
            cpu1 = plane_cpu(cl)
            early = sum(1 for lag in lags if lag < 0)
            missed = sum(1 for lag in lags if lag == math.inf)
            print(
                f"\nboundary -> Deployment replicas (floor: {results[0]['client']}, no operator), "
                f"{len(lags)} flips ({args.tdsets} Deployments x {args.boundaries} boundaries): "
                f"{summary(lags)} "
                f"(inf: missed: {missed}); early flips: {early}\n"
                + "".join(
                    f"client at boundary {b + 1}: {r['sent']} PATCHes in {r['took_s']:.3f}s from "
                    f"{r['late_start_s']:+.3f}s, latency p50 {r['latency_p50']:.3f}s "
                    f"p99 {r['latency_p99']:.3f}s, "
                    f"errors {r['errors']} {r['first_error']}\n"
                    for b, r in enumerate(results)
                )
                + f"client API writes over the boundaries: {describe_writes(audit.writes(user, mark))}\n"
                f"control plane CPU over the boundaries: {describe_cpu(cpu0, cpu1)}; "
                f"kube-controller-manager {kcm_limits(cl)}; {load()}"
            )
        finally:
            watch.cancel()


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
            lead += args.lead_time + (args.tdsets / 20 if args.targets else 0)
            first = (shifted + datetime.timedelta(seconds=lead + 59)).replace(second=0, microsecond=0)
            if args.targets:
                took = await api.create_all(
                    DEPLOYMENTS.format(ns=ns),
                    [target_deployment(f"d{i}", args.low) for i in range(args.tdsets)],
                )
                say(f"{args.tdsets} target Deployments created in {took:.1f}s")
            bodies = [
                {
                    "apiVersion": "schedule.rs/v1",
                    "kind": "TDSet",
                    "metadata": {"name": f"t{i}"},
                    "spec": spec_flipping_at(
                        first,
                        args.boundaries,
                        args.high,
                        args.low,
                        target=f"d{i}" if args.targets else None,
                        lead_time=args.lead_time,
                    ),
                }
                for i in range(args.tdsets)
            ]
            took = await api.create_all(TDSETS.format(ns=ns), bodies)
            say(
                f"{args.tdsets} TDSets created in {took:.1f}s; {args.boundaries} boundaries from "
                f"{first:%H:%M}:00 (operator clock); log {log}"
            )
            t0 = time.monotonic()
            while watcher.at(args.low) < args.tdsets or (args.targets and len(watcher.claimed) < args.tdsets):
                if watch.done():
                    watch.result()
                await asyncio.sleep(0.2)
            to_first = (first - (datetime.datetime.now(UTC) + watcher.offset)).total_seconds()
            say(f"all {args.tdsets} Deployments at {args.low} replicas after {time.monotonic() - t0:.1f}s, "
                f"{to_first:.0f}s before the first boundary; {load()}")  # fmt: skip
            if to_first < 0:
                raise SystemExit("the Deployments were not all there before the first boundary: raise --lead")
            mark, cpu0, plane0 = audit.mark(), stats.sample(), plane_cpu(cl)
            before = request_counts(op.metrics())
            lags, ready_at = await boundaries(watcher, first, args)
            cpu1, plane1 = stats.sample(), plane_cpu(cl)
            after = request_counts(op.metrics())
            print(report(args, lags, ready_at, before, after))
            print(
                f"operator over the boundaries: API writes {describe_writes(audit.writes(user, mark))}; "
                f"CPU {cpu1.cpu_s - cpu0.cpu_s:.1f}s; RSS {cpu1.rss_mib:.0f} MiB (peak {cpu1.hwm_mib:.0f})\n"
                f"control plane CPU over the boundaries: {describe_cpu(plane0, plane1)}\n"
                f"limits: {lib.operator_limits(args)}; kube-controller-manager {kcm_limits(cl)}; "
                f"{load()}"
            )
        finally:
            watch.cancel()
            op.stop()


def main() -> None:
    """Starts the local control plane (``tools.bench.lib.control_plane``: kwok nodes that take
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

    ``--targets``: the bench creates the Deployments itself first (``d<i>``, at ``--low``
    replicas), and each TDSet names one with ``spec.scaleTargetRef`` (read and written through
    ``/scale``) instead of a ``container`` of its own.

    ``--lead-time S``: the windows carry ``leadTime: Ss``, so a scale-up is due S seconds before
    its window opens (the flip's lag is measured from then; a scale-down stays at the boundary),
    and the same watch records when each Deployment reports ``readyReplicas`` at the window's
    replicas (kwok pods turn Ready once scheduled): reported as seconds relative to the window
    start (negative: ready before it opened, the goal; infinite: not within the window).

    Between the first and the last boundary the operator's own ``/metrics`` give its requests by
    method (``rest_client_requests_total``) and its passes (``controller_runtime_reconcile_total``),
    so the requests per flip are printed beside the audit log's writes.

    ``--floor python|go`` (with ``--targets``): the floor, what bounds the flips on this machine
    with no operator at all. The same Deployments on the same control plane, but no operator and no
    TDSets: at each boundary a client process (``tools.bench.flip_floor``: ``python``, the
    operator's own client on a warm pool of ``--floor-concurrency`` connections, default 100;
    ``go``, client-go over HTTP/2 with no rate limit, all at once unless ``--floor-concurrency``
    bounds the writes in flight) sends the boundary's 1000 PATCHes of ``/scale``, as the
    operator's identity, the body of the operator's flip, and the same watch measures the same
    lag. The first boundary is the first whole minute at least 20 s after every Deployment has its
    pods Ready (kube-controller-manager quiet, as it is by the operator arm's first boundary after
    its longer lead). Reported beside the lag: what the client measured (how long the writes took,
    their latency) and the control plane's CPU over the boundaries.
    """
    parser = lib.parser(__doc__)
    parser.add_argument("--tdsets", type=int, default=10, help="TDSets flipping at the same instant")
    parser.add_argument("--boundaries", type=int, default=3, help="consecutive minute boundaries")
    parser.add_argument("--high", type=int, default=4, help="replicas inside the windows")
    parser.add_argument("--low", type=int, default=2, help="replicas outside (defaultReplica)")
    parser.add_argument("--lead", type=float, default=None, help="seconds to the first boundary")
    parser.add_argument(
        "--targets", action="store_true", help="TDSets with scaleTargetRef to Deployments the bench creates"
    )
    parser.add_argument(
        "--lead-time", type=int, default=0, help="leadTime (seconds) of every window; 0: none"
    )
    parser.add_argument(
        "--floor",
        choices=("python", "go"),
        default=None,
        help="no operator: a client of this kind sends every flip's PATCH at each boundary (with --targets)",
    )
    parser.add_argument(
        "--floor-concurrency",
        type=int,
        default=0,
        help="writes in flight at most: the python floor's pool (default: the operator's 100), the go "
        "floor's limit (default: all at once)",
    )
    args = parser.parse_args()
    if args.floor and (not args.targets or args.lead_time):
        parser.error("--floor measures --targets flips at the boundary (no --lead-time)")
    if args.floor == "go":
        flip_floor.go_binary()  # built before the control plane starts, not during the boundaries
    with control_plane(args.nodes, args.pods_per_node) as cl:
        asyncio.run(floor_bench(cl, args) if args.floor else bench(cl, args))


if __name__ == "__main__":
    main()
