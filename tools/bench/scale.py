"""WebServer operator at scale, against the ReplicaSet controller on the same control plane, same run.

    python -m tools.bench.scale [--replicas 100] [--rounds 3]             # one owner of N pods
    python -m tools.bench.scale --replicas 1000 --raw-posts --rounds 1     # ... and N plain POSTs
    python -m tools.bench.scale --webservers 3000 --rounds 1               # N owners x 1 pod
    python -m tools.bench.scale --webservers 1000 --rounds 1 --cost        # ... and what each costs
    python -m tools.bench.scale --memory 1000,2000,3000                    # RSS and CPU per step
    python -m tools.bench.scale --memory 2000 --breakdown                  # ... and where it goes
    python -m tools.bench.scale --memory 2000,10000 --standby --relist 90 --restart  # HA, peaks
    python -m tools.bench.scale --memory 2000,10000 --kind tdsets ...      # the TDSet operator
    ... --kind tdsets --kcm-qps 200                                        # its Deployments sooner
    ... --operator-qps 20 --operator-burst 30                              # kube-controller-manager's limits

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster import cluster as localcluster
from tests.framework.operator_process import OperatorProcess
from tools.bench import lib, memtrace
from tools.bench.lib import (
    Api,
    AuditLog,
    ProcStats,
    Sample,
    Tracker,
    control_plane,
    describe_writes,
    kcm_limits,
    load,
    operator_kubeconfig,
    say,
)

IMAGE = "nginxdemos/hello"
WEBSERVERS = "/apis/demo.k8s.io/v1alpha1/namespaces/{ns}/webservers"
REPLICASETS = "/apis/apps/v1/namespaces/{ns}/replicasets"
TDSETS = "/apis/schedule.rs/v1/namespaces/{ns}/tdsets"
PODS = "/api/v1/namespaces/{ns}/pods"


def webserver(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": name},
        "spec": {"replicas": replicas},
    }


def tdset(name: str) -> dict[str, Any]:
    """A TDSet of its own Deployment at one replica all day (one window, the default outside it)."""
    return {
        "apiVersion": "schedule.rs/v1",
        "kind": "TDSet",
        "metadata": {"name": name},
        "spec": {
            "container": {"image": IMAGE, "port": 80},
            "schedulingConfig": [{"startTime": 0, "endTime": 12, "replica": 1}],
            "defaultReplica": 1,
        },
    }


def replicaset(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": IMAGE}]},
            },
        },
    }


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [
        {"name": "web", "image": IMAGE}
    ]}}  # fmt: skip


@dataclass
class Bench:
    """What every scenario shares: the cluster, the client, the operator and its accounting."""

    cl: localcluster.LocalCluster
    api: Api
    op: OperatorProcess
    user: str
    # per phase ("webservers", "replicasets"), per process ("operator", "kcm"): (before, after)
    costs: dict[str, list[dict[str, tuple[Sample, Sample]]]] = field(default_factory=dict)
    breakdown: Path | None = None
    standby: OperatorProcess | None = None
    kind: str = "webservers"  # what --memory creates: "webservers" or "tdsets"
    # CPU seconds per second each process ("operator", "kcm") spends with nothing to do
    idle: dict[str, float] = field(default_factory=dict)

    @property
    def lease(self) -> str:
        return f"{'tdset' if self.kind == 'tdsets' else 'webserver'}-leader"

    @property
    def stats(self) -> ProcStats:
        assert self.op.proc is not None
        return ProcStats(self.op.proc.pid)

    @property
    def kcm(self) -> ProcStats:
        """kube-controller-manager: a local process of the control plane."""
        (comp,) = [c for c in self.cl.components if c.name == "kube-controller-manager"]
        assert comp.proc is not None
        return ProcStats(comp.proc.pid)

    @property
    def audit(self) -> AuditLog:
        return AuditLog(self.cl.audit_log)

    async def run(self, what: str, owners: int, replicas: int) -> float:
        """Create ``owners`` owners (``webservers``, ``replicasets`` or ``pods``) of ``replicas``
        pods each in a fresh namespace; seconds until all are Ready. Deletes the namespace."""
        ns = await self.api.namespace(f"bench-{what[:2]}")
        collection = {"webservers": WEBSERVERS, "replicasets": REPLICASETS, "pods": PODS}[what].format(ns=ns)
        tracker = Tracker(self.api, ns, None if what == "pods" else collection).start()
        if what == "webservers":
            bodies = [webserver(f"w{i}", replicas) for i in range(owners)]
        elif what == "replicasets":
            bodies = [replicaset(f"r{i}", replicas) for i in range(owners)]
        else:
            bodies = [pod(f"p{i}") for i in range(replicas)]
        mark, before, kcm_before = self.audit.mark(), self.stats.sample(), self.kcm.sample()
        say(f"{what}: creating {len(bodies)} in {ns}; {load()}")
        t0 = time.monotonic()
        posted = await self.api.create_all(collection, bodies, concurrency=64 if what == "pods" else 16)
        say(f"{what}: {len(bodies)} POSTed in {posted:.1f}s")
        done = await tracker.wait(owners * replicas, 0 if what == "pods" else owners)
        elapsed = done - t0
        after, kcm_after = self.stats.sample(), self.kcm.sample()
        if what != "pods":
            self.costs.setdefault(what, []).append(
                {"operator": (before, after), "kcm": (kcm_before, kcm_after)}
            )
            say(
                f"{what}: CPU s / RSS growth MiB: operator {after.cpu_s - before.cpu_s:.1f} / "
                f"{after.rss_mib - before.rss_mib:.1f}, kube-controller-manager "
                f"{kcm_after.cpu_s - kcm_before.cpu_s:.1f} / {kcm_after.rss_mib - kcm_before.rss_mib:.1f}"
            )
        line = f"{what}: {owners * replicas} pods Ready"
        if what != "pods":
            line += f" and {owners} owners report it"
        line += f" in {elapsed:.2f}s (first Ready after {(tracker.first_ready or done) - t0:.2f}s); {load()}"
        say(line)
        if what == "webservers":
            say(
                f"webservers: operator RSS {after.rss_mib:.0f} MiB "
                f"(peak {after.hwm_mib:.0f}); API writes "
                f"{describe_writes(self.audit.writes(self.user, mark))}"
            )
        await tracker.stop()
        gone = await self.api.delete_namespace(ns)
        say(f"{what}: namespace {ns} deleted in {gone:.0f}s")
        # Both phases start with a quiet operator: the namespace deletion's events are not
        # charged to the next phase.
        await self.stats.quiet()
        return elapsed

    async def measure_idle(self, seconds: float = 60.0) -> None:
        """Each controller's CPU rate with nothing to do (kube-controller-manager renews its
        Lease, resyncs and runs its periodic controllers), to set against a phase's length."""
        await self.stats.quiet()
        procs = {"operator": self.stats, "kcm": self.kcm}
        before = {name: st.sample() for name, st in procs.items()}
        await asyncio.sleep(seconds)
        for name, st in procs.items():
            after = st.sample()
            self.idle[name] = (after.cpu_s - before[name].cpu_s) / (after.at - before[name].at)
        say(
            f"idle for {seconds:.0f}s: operator {self.idle['operator'] * 1000:.1f} ms/s, "
            f"kube-controller-manager {self.idle['kcm'] * 1000:.1f} ms/s of CPU; {load()}"
        )

    @staticmethod
    def stats_of(op: OperatorProcess) -> ProcStats:
        assert op.proc is not None
        return ProcStats(op.proc.pid)

    async def peak(self, seconds: float, *ops: OperatorProcess) -> list[float]:
        """The largest RSS (MiB) of each of ``ops`` over ``seconds``, sampled every 0.5 s."""
        stats = [self.stats_of(op) for op in ops]
        peaks = [0.0] * len(ops)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for i, st in enumerate(stats):
                peaks[i] = max(peaks[i], st.sample().rss_mib)
            await asyncio.sleep(0.5)
        return peaks

    async def relist(self, period: float) -> None:
        """RSS peaks of leader and standby while every watch relists (every ``period`` s)."""
        ops = [self.op] + ([self.standby] if self.standby is not None else [])
        before = [self.stats_of(op).sample().rss_mib for op in ops]
        say(
            f"relist: RSS sampled for {1.2 * period:.0f}s; "
            f"watches relist every {period:.0f}-{1.1 * period:.0f}s"
        )
        peaks = await self.peak(1.2 * period, *ops)
        for name, b, p in zip(("leader", "standby"), before, peaks, strict=False):
            print(f"relist: {name} RSS {b:.1f} MiB before, peak {p:.1f} MiB while relisting (+{p - b:.1f})")

    @staticmethod
    def ready(op: OperatorProcess) -> bool:
        try:
            return op._ready()
        except OSError:  # its probe port is not listening yet
            return False

    async def leads(self, op: OperatorProcess) -> bool:
        """Whether ``op`` holds its operator's Lease (its identity starts with its POD_NAME)."""
        lease = await self.api.request(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{self.lease}"
        )
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        return holder.startswith(f"{op.extra_env.get('POD_NAME')}_")

    async def restart(self, start: Any) -> None:
        """SIGKILL the leader, start a new process: the peaks of the new process and the standby
        through start-up and takeover, whichever of them wins the Lease."""
        old = self.stats_of(self.op).sample()
        self.op.kill()
        t0 = time.monotonic()
        self.op = start("c", wait=False)
        ops = {"new process": self.op} | ({"standby": self.standby} if self.standby is not None else {})
        stats = {name: self.stats_of(op) for name, op in ops.items()}
        peaks = dict.fromkeys(ops, 0.0)

        def sample() -> None:
            for name, st in stats.items():
                peaks[name] = max(peaks[name], st.sample().rss_mib)

        while not self.ready(self.op):
            sample()
            await asyncio.sleep(0.5)
        ready = time.monotonic() - t0
        # Once the killed leader's Lease expires (LEADER_ELECTION_LEASE_DURATION) one of the two
        # takes it, whichever tries first: the new process as often as the standby. The winner's
        # takeover (a pass for every object) is sampled until it has gone quiet, then 30 s more.
        winner = None
        deadline = time.monotonic() + 900
        while winner is None and time.monotonic() < deadline:
            sample()
            for name, op in ops.items():
                if await self.leads(op):
                    winner = name
            await asyncio.sleep(0.5)
        took_over = time.monotonic() - t0
        for name, st in stats.items():
            peaks[name] = max(peaks[name], (await st.quiet()).hwm_mib)
        for name, p in zip(ops, await self.peak(30, *ops.values()), strict=True):
            peaks[name] = max(peaks[name], p)
        print(f"restart: killed the leader at RSS {old.rss_mib:.1f} MiB (peak {old.hwm_mib:.1f})")
        print(f"restart: new process ready in {ready:.0f}s")
        if winner is None:
            print("restart: no process held the Lease 900 s after the kill")
        else:
            print(f"restart: the {winner} held the Lease {took_over:.0f}s after the kill")
        for name, p in peaks.items():
            role = "leader" if name == winner else "standby"
            print(f"restart: {name} ({role} after the kill) peak {p:.1f} MiB (VmHWM: its largest ever)")
        print(f"restart: {load()}")

    async def dump_breakdown(self) -> dict[str, Any]:
        """Ask the operator for its breakdown (``tools.bench.memtrace``) and read it."""
        assert self.breakdown is not None and self.op.proc is not None
        self.breakdown.unlink(missing_ok=True)
        self.op.proc.send_signal(signal.SIGUSR2)
        await lib.until(self.breakdown.exists, 600, "the operator's memory breakdown", every=30)
        return memtrace.load(self.breakdown)

    async def memory(self, steps: list[int]) -> None:
        """Owners of one pod (WebServers, or TDSets with ``kind``) in steps up to each count:
        memory and CPU at each step."""
        ns = await self.api.namespace("bench-mem")
        tdsets = self.kind == "tdsets"
        collection = (TDSETS if tdsets else WEBSERVERS).format(ns=ns)
        owners = "TDSets" if tdsets else "WebServers"
        tracker = Tracker(self.api, ns, collection).start()
        base = await self.stats.quiet()
        rows = [(0, base, 0.0)]
        standby_rows: list[tuple[int, Sample]] = []
        if self.standby is not None:
            standby_rows.append((0, await self.stats_of(self.standby).quiet()))
        say(f"memory: 0 {owners}: RSS {base.rss_mib:.1f} MiB, peak {base.hwm_mib:.1f} MiB; {load()}")
        have = 0
        for count in steps:
            t0 = time.monotonic()
            bodies = [tdset(f"t{i}") if tdsets else webserver(f"w{i}", 1) for i in range(have, count)]
            await self.api.create_all(collection, bodies)
            await tracker.wait(count, count)
            took = time.monotonic() - t0
            have = count
            sample = await self.stats.quiet()
            rows.append((count, sample, took))
            say(
                f"memory: {count} {owners} Ready ({took:.0f}s): RSS {sample.rss_mib:.1f} MiB, "
                f"peak {sample.hwm_mib:.1f} MiB, CPU {sample.cpu_s - rows[-2][1].cpu_s:.1f}s for "
                f"{count - rows[-2][0]} more; {load()}"
            )
            if self.breakdown is not None:
                print(memtrace.describe(await self.dump_breakdown()), flush=True)
            if self.standby is not None:
                other = await self.stats_of(self.standby).quiet()
                say(f"memory: standby at {count}: RSS {other.rss_mib:.1f} MiB, peak {other.hwm_mib:.1f} MiB")
                standby_rows.append((count, other))
        await tracker.stop()
        if standby_rows:
            print(f"\nstandby: {owners} | RSS MiB | peak MiB | RSS per 1000 from 0")
            for n, sample in standby_rows:
                per = (sample.rss_mib - standby_rows[0][1].rss_mib) / n * 1000 if n else 0.0
                print(f"{n:>19} | {sample.rss_mib:7.1f} | {sample.hwm_mib:8.1f} | {per:.1f}")
        print(f"\n{owners} (1 pod each) | RSS MiB | peak MiB | +RSS per 1000 | CPU s per 1000 created")
        for (n0, s0, _), (n1, s1, _) in itertools.pairwise(rows):
            per = 1000 / (n1 - n0)
            print(
                f"{n1:>23} | {s1.rss_mib:7.1f} | {s1.hwm_mib:8.1f} | "
                f"{(s1.rss_mib - s0.rss_mib) * per:13.1f} | {(s1.cpu_s - s0.cpu_s) * per:.1f}"
            )
        slope = (rows[-1][1].rss_mib - base.rss_mib) / rows[-1][0] * 1000
        print(f"RSS from 0 to {rows[-1][0]}: {slope:.1f} MiB per 1000 {owners}; {load()}")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def cost_table(bench: Bench, owners: int) -> None:
    """CPU seconds and RSS growth of both controllers in each phase, median over the rounds; the
    CPU also net of what each spends idle over the phase's length (the phases differ in length:
    kube-controller-manager's client limits pace its ReplicaSet phase)."""

    def med(phase: str, proc: str, of: str) -> float:
        values = []
        for sample in bench.costs.get(phase, []):
            before, after = sample[proc]
            if of == "cpu":
                values.append(after.cpu_s - before.cpu_s)
            elif of == "net":
                values.append(after.cpu_s - before.cpu_s - bench.idle.get(proc, 0.0) * (after.at - before.at))
            else:
                values.append(after.rss_mib - before.rss_mib)
        return statistics.median(values) if values else float("nan")

    print(f"\n{owners} owners x 1 pod, first POST -> every pod Ready and every owner's status saying so")
    print("process                  | phase                  | CPU s | CPU s net of idle | RSS growth MiB")
    rows = [
        ("WebServer operator", "webservers", "operator"),
        ("kube-controller-manager", "replicasets", "kcm"),
        ("kube-controller-manager", "webservers", "kcm"),
        ("WebServer operator", "replicasets", "operator"),
    ]
    for name, phase, proc in rows:
        label = f"{owners} {'WebServers' if phase == 'webservers' else 'ReplicaSets'}"
        print(
            f"{name:24} | {label:22} | {med(phase, proc, 'cpu'):5.1f} | {med(phase, proc, 'net'):17.1f} "
            f"| {med(phase, proc, 'rss'):14.1f}"
        )
    op_cpu, kcm_cpu = med("webservers", "operator", "cpu"), med("replicasets", "kcm", "cpu")
    op_net, kcm_net = med("webservers", "operator", "net"), med("replicasets", "kcm", "net")
    op_rss, kcm_rss = med("webservers", "operator", "rss"), med("replicasets", "kcm", "rss")
    print(
        f"operator / kube-controller-manager, each in its own phase: CPU {ratio(op_cpu, kcm_cpu)} "
        f"({ratio(op_net, kcm_net)} net of idle), RSS growth {ratio(op_rss, kcm_rss)}; {load()}"
    )


async def scenarios(bench: Bench, args: argparse.Namespace, start: Any = None) -> None:
    async with bench.api:
        if args.memory:
            await bench.memory([int(n) for n in args.memory.split(",")])
            if args.relist:
                await bench.relist(args.relist)
            if args.restart:
                await bench.restart(start)
            return
        owners, replicas = (args.webservers, 1) if args.webservers else (1, args.replicas)
        times: dict[str, list[float]] = {"webservers": [], "replicasets": [], "pods": []}
        kinds = ["webservers", "replicasets"] + (["pods"] if args.raw_posts else [])
        if args.replicasets_first:  # kube-controller-manager's growth from its idle state
            kinds[:2] = ["replicasets", "webservers"]
        if args.cost:
            await bench.measure_idle()
        for i in range(args.rounds):
            for what in kinds:
                times[what].append(await bench.run(what, owners, replicas))
            say(f"round {i + 1}: " + ", ".join(f"{k} {times[k][-1]:.2f}s" for k in kinds))
        med = {k: statistics.median(v) for k, v in times.items() if v}
        shape = f"{owners} x {replicas}" if owners > 1 else f"1 x {replicas}"
        print(
            f"\n0 -> {owners * replicas} Ready pods ({shape}), median of {args.rounds}: "
            f"WebServer {med['webservers']:.2f}s, ReplicaSet {med['replicasets']:.2f}s "
            f"(WebServer/ReplicaSet {ratio(med['webservers'], med['replicasets'])})"
            + (
                f", plain POSTs {med['pods']:.2f}s (WebServer/POSTs {ratio(med['webservers'], med['pods'])})"
                if "pods" in med
                else ""
            )
        )
        if args.cost:
            cost_table(bench, owners)
        print(
            f"limits: {lib.operator_limits(args)}; "
            f"kube-controller-manager {kcm_limits(bench.cl)}; kube-scheduler QPS 50, burst 100; {load()}"
        )


def main() -> None:
    """Starts the local control plane (``tools.bench.lib.control_plane``: kwok nodes that take
    thousands of pods) and the WebServer operator as deployed (no debug log; its CSV's rules, as a
    user whose requests the API server audits), then per round, each in a fresh namespace and
    timed from the first POST until every pod is Ready and every owner's status says so:

    - ``--replicas N``: one WebServer of N replicas, then one ReplicaSet of N; with ``--raw-posts``
      also the physical limit: the same N pods POSTed by this process, 64 at once, with no
      controller and no client-side rate limit (the API server's and the scheduler's pace);
    - ``--webservers N``: N WebServers of one replica, then N ReplicaSets of one replica.

    Each namespace is deleted, and gone, before the next step starts. ``--cost`` also reports,
    for each phase (from the first POST until every pod is Ready and every owner's status says so),
    the CPU seconds and resident-memory growth of both controllers side by side: the WebServer
    operator in the WebServer phase against kube-controller-manager (a local process of the control
    plane, all its controllers and its garbage collector included) in the ReplicaSet phase, and what
    each spent during the other's phase; each controller's CPU rate at rest is measured for 60 s
    first, and the phases are also given net of it (kube-controller-manager's QPS paces its phase
    to several times the operator's). The operator's process is waited on to go quiet before each
    phase, so work left over from the previous one is not charged to it. kube-controller-manager
    watches every pod, so the WebServer phase grows it too, and memory it took then is reused, not
    grown again, in a later ReplicaSet phase: ``--replicasets-first`` runs that phase first, from
    its idle state. ``--memory`` instead
    creates WebServers of one replica in steps up to each count, waits for them to be Ready and
    the operator to go quiet, and reports its resident memory (VmRSS), peak (VmHWM) and the CPU
    seconds each step cost, so MiB per 1000 objects can be read off; with ``--breakdown`` also
    what each cache holds and tracemalloc's live bytes per source file at every step
    (``tools.bench.memtrace``; tracemalloc's own cost inflates RSS in such a run). With
    ``--standby`` the operator runs as deployed with two replicas (leader election on; the standby
    watches and holds the same caches) and both are measured. ``--relist S`` makes every watch
    relist every S seconds (``WATCH_RESYNC_PERIOD``; 600 as shipped) and, after the last step,
    samples both processes' RSS every 0.5 s for 1.2 S seconds: the peak while each watch relists
    its whole listing. ``--restart`` then kills the leader (SIGKILL) and starts a new process; the
    new process and the standby both campaign, and the bench reports which took the Lease and each
    one's peak (VmHWM) through the start-up listing and the takeover. Every figure comes with the
    load average; the operator's API writes are counted from the audit log. ``--kind tdsets``
    measures the TDSet operator the same way: TDSets that each run a container (so each owns a
    Deployment, whose ReplicaSet kube-controller-manager keeps at one pod) with one window and one
    replica in and out of it, Ready once each TDSet's status reports its pod ready; ``--kcm-qps``
    raises kube-controller-manager's client limits so that those pods do not wait on its QPS 20.

    The ratio depends on the client-side rate limits: the operator's (its defaults, no QPS limit
    and burst 100, unless ``--operator-qps``/``--operator-burst``) and
    kube-controller-manager's (its defaults, QPS 20, burst 30, per controller); both are printed.
    """
    parser = lib.parser(__doc__)
    parser.add_argument("--replicas", type=int, default=100, help="pods of the one owner")
    parser.add_argument("--webservers", type=int, default=0, help="instead: this many owners x 1 pod")
    parser.add_argument("--raw-posts", action="store_true", help="also the same pods as plain POSTs")
    parser.add_argument("--memory", default="", help="instead: RSS/CPU at these counts, e.g. 1000,2000")
    parser.add_argument("--breakdown", action="store_true", help="with --memory: what each cache holds")
    parser.add_argument(
        "--kind", choices=("webservers", "tdsets"), default="webservers", help="with --memory: which operator"
    )
    parser.add_argument("--standby", action="store_true", help="with --memory: two replicas, leader elected")
    parser.add_argument("--relist", type=float, default=0, help="with --memory: relist every S s, peak RSS")
    parser.add_argument(
        "--restart", action="store_true", help="with --memory: kill the leader, peak of a new one"
    )
    parser.add_argument(
        "--kcm-qps",
        type=float,
        default=None,
        help="with --memory: kube-controller-manager's QPS (burst 1.5x; its default 20), so that "
        "--kind tdsets does not wait on it for the Deployments' pods",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cost", action="store_true", help="also both controllers' CPU and RSS growth")
    parser.add_argument("--replicasets-first", action="store_true", help="the ReplicaSet phase first")
    args = parser.parse_args()
    env = lib.operator_env(args)
    workdir = Path(tempfile.mkdtemp())
    breakdown = workdir / "breakdown.json" if args.breakdown else None
    if breakdown is not None:
        env.update(memtrace.env(breakdown))
    if args.relist:
        env["WATCH_RESYNC_PERIOD"] = f"{args.relist:g}"
    if args.standby or args.restart:
        env.update(LEADER_ELECT="true", LEADER_ELECTION_NAMESPACE="default")
        # A leader that misses its renew deadline exits (by design): on a loaded 2-core machine
        # the shipped 15/10 s would end the run, and the benchmark measures memory, not failover.
        # 60/45 s ended a run at 4000 WebServers at load 25 (last renewal 58.5 s before).
        env.update(LEADER_ELECTION_LEASE_DURATION="150", LEADER_ELECTION_RENEW_DEADLINE="120")
    with control_plane(args.nodes, args.pods_per_node, args.kcm_qps) as cl:
        operator = "tdset" if args.kind == "tdsets" else "webserver"
        kubeconfig, user = operator_kubeconfig(cl, operator)
        started: list[OperatorProcess] = []

        def start(name: str, wait: bool = True) -> OperatorProcess:
            log = workdir / f"{operator}-{name}.log"
            proc = OperatorProcess(
                f"operators.{operator}", kubeconfig, log, env={**env, "POD_NAME": name}, verbose=False
            ).launch()
            if wait:
                proc.wait_ready()
            say(f"{operator} operator {name} running (pid {proc.proc.pid if proc.proc else '?'}, log {log})")
            started.append(proc)
            return proc

        op = start("a")
        standby = start("b") if args.standby else None
        try:
            asyncio.run(
                scenarios(
                    Bench(cl, Api(cl), op, user, breakdown=breakdown, standby=standby, kind=args.kind),
                    args,
                    start,
                )
            )
        finally:
            for proc in started:
                proc.stop()


if __name__ == "__main__":
    main()
