"""Tenant cost: one namespace's worst, within the recommended quota, against a running WebServer operator.

    python -m tools.bench.tenant_cost [--configmaps 20] [--keys 20000] [--referenced 4]
                                      [--webservers 200] [--pause 1] [--relist 60]

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
from tests.framework.webservers import largest_spec
from tools.bench import lib
from tools.bench.lib import Api, ProcStats, control_plane, load, operator_kubeconfig, percentile, say
from tools.bench.noisy_neighbour import PROBE, Probe, probe, ready_probe
from tools.bench.scale import WEBSERVERS

LIMIT_MIB = 384
CONFIGMAPS = "/api/v1/namespaces/{ns}/configmaps"
# The recommended ResourceQuota of docs/operations/sizing.md ("Capping each tenant").
QUOTA = {
    "count/webservers.demo.k8s.io": "200",
    "count/tdsets.schedule.rs": "200",
    "count/netperfs.app.example.com": "50",
    "count/configmaps": "100",
    "pods": "1000",
}
OLD_LABELS = {"webserver.k8s-operators-py.dev/config": "true", "tdset.k8s-operators-py.dev/holidays": "true"}


# Characters of data in each ConfigMap (keys and values): near the 1 MiB a ConfigMap may hold.
DATA_CHARS = 1_000_000


def configmap(i: int, keys: int, labelled: bool, edit: int = 0) -> dict[str, Any]:
    value = str(edit) * max(1, DATA_CHARS // keys - 7)  # keys of 7 characters
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"big-{i}", "labels": OLD_LABELS if labelled else {}},
        "data": {f"k{j:06d}": value for j in range(keys)},
    }


def hostile_webserver(name: str, referenced: int) -> dict[str, Any]:
    spec = largest_spec(replicas=0)
    for i, ref in enumerate(spec["envFrom"][:referenced]):
        ref["configMapRef"]["name"] = f"big-{i}"
    return {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": name},
        "spec": spec,
    }


class Memory:
    """The operator's RSS sampled in the background; the largest sample and VmHWM."""

    def __init__(self, stats: ProcStats) -> None:
        self.stats = stats
        self.peak = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, self.stats.sample().rss_mib)
            await asyncio.sleep(0.25)

    def start(self) -> Memory:
        self._task = asyncio.create_task(self._run())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def dist(probes: list[Probe]) -> str:
    if not probes:
        return "no probes"
    values = [p.counted for p in probes]
    return (
        f"{len(values)} probes, p50 {sorted(values)[len(values) // 2]:.2f}s, "
        f"p99 {percentile(values, 99):.2f}s, max {max(values):.2f}s"
    )


async def bench(cl: localcluster.LocalCluster, op: OperatorProcess, args: argparse.Namespace) -> None:
    assert op.proc is not None
    stats = ProcStats(op.proc.pid)
    async with Api(cl) as api:
        quiet_ns, tenant_ns = await api.namespace("bench-quiet"), await api.namespace("bench-tenant")
        await api.request(
            "POST",
            f"/api/v1/namespaces/{tenant_ns}/resourcequotas",
            {"metadata": {"name": "operator-objects"}, "spec": {"hard": QUOTA}},
        )
        path, watched, watch = await ready_probe(api, quiet_ns)
        rest = await stats.quiet()
        say(f"{quiet_ns}/{PROBE} ready; operator RSS {rest.rss_mib:.0f} MiB at rest; {load()}")
        memory = Memory(stats).start()

        by_step: dict[str, list[Probe]] = {}
        # The API server's own part: a GET of the probe just before each probe, no operator in it.
        gets: dict[str, list[float]] = {}
        rss_after: dict[str, float] = {}
        replicas = 1

        async def probing(step: str, work: asyncio.Task[Any]) -> None:
            nonlocal replicas
            probes = by_step.setdefault(step, [])
            while True:
                replicas = 3 - replicas
                gets.setdefault(step, []).append(await timed_get(api, path))
                probes.append(await probe(api, path, watched, replicas, 0))
                if work.done():
                    break
                await asyncio.wait([work], timeout=args.pause)
            await work  # its exception, if any
            rss_after[step] = stats.sample().rss_mib
            say(f"{step}: {dist(probes)}; operator RSS {rss_after[step]:.0f} MiB, peak {memory.peak:.0f}")

        cms = CONFIGMAPS.format(ns=tenant_ns)
        wss = WEBSERVERS.format(ns=tenant_ns)

        async def create_configmaps() -> None:
            for i in range(args.configmaps):  # one at a time: each is ~1 MiB of JSON
                await api.request("POST", cms, configmap(i, args.keys, labelled=i % 2 == 1))

        async def create_webservers() -> None:
            await api.create_all(
                wss, [hostile_webserver(f"w{i}", args.referenced) for i in range(args.webservers)]
            )

        async def edit_configmaps() -> None:
            for i in range(args.configmaps):
                await api.request(
                    "PUT", f"{cms}/big-{i}", configmap(i, args.keys, labelled=i % 2 == 1, edit=1)
                )

        await probing(
            f"{args.configmaps} ConfigMaps of {args.keys} keys", asyncio.create_task(create_configmaps())
        )
        await probing(f"{args.webservers} WebServers at the maxima", asyncio.create_task(create_webservers()))
        await probing("every ConfigMap edited", asyncio.create_task(edit_configmaps()))
        await probing(
            f"a relist period ({args.relist:g}s)", asyncio.create_task(asyncio.sleep(args.relist * 1.1))
        )
        await memory.stop()
        hwm = stats.sample().hwm_mib
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    steps = "\n".join(
        f"  {step}: {dist(probes)}; RSS after {rss_after[step]:.0f} MiB; {api_part(gets[step])}"
        for step, probes in by_step.items()
    )
    every = [p for probes in by_step.values() for p in probes]
    print(
        f"\none namespace under the recommended quota ({', '.join(f'{k}={v}' for k, v in QUOTA.items())}):\n"
        f"{steps}\n"
        f"  operator RSS at rest {rest.rss_mib:.0f} MiB, peak sampled {memory.peak:.0f} MiB, "
        f"VmHWM {hwm:.0f} MiB (limit {LIMIT_MIB} MiB)\n"
        f"  another namespace's reconcile (PATCH -> status observed): {dist(every)}\n"
        f"  limits: {lib.operator_limits(args)}; {load()}"
    )


async def timed_get(api: Api, path: str) -> float:
    t0 = time.monotonic()
    await api.request("GET", path)
    return time.monotonic() - t0


def api_part(gets: list[float]) -> str:
    """The API server's share of a step's delays: its answers to the GETs before the probes."""
    return f"the API server's GET p50 {sorted(gets)[len(gets) // 2]:.2f}s, max {max(gets):.2f}s"


def main() -> None:
    """Starts the local control plane (``tools.bench.lib.control_plane``) and the WebServer operator
    as deployed (no debug log; its CSV's rules, as a user the API server audits; every watch
    relisting every ``--relist`` seconds, so relists fall inside the run), and the WebServer
    ``probe`` of one replica in a quiet namespace. Then, in another namespace under the ResourceQuota
    that ``docs/operations/sizing.md`` recommends (``QUOTA``), it does the worst that page
    describes, one step after the other:

    1. ``--configmaps`` ConfigMaps of ``--keys`` keys each, values filling them to about 1 MB (the
       most a ConfigMap holds; 100,000 keys make the API server's own create time out on a busy
       2-core machine), every other one labelled with the labels the operators once watched, referenced by
       nothing but the first ``--referenced``;
    2. ``--webservers`` WebServers at the schema's maxima
       (``tests.framework.webservers.largest_spec``, ``replicas: 0``, so no pod quota binds),
       their ``envFrom`` naming the referenced ConfigMaps (and ConfigMaps that do not exist: each
       fails its pass and retries, posting Warnings);
    3. an edit of every ConfigMap (each referenced one rolls nothing, as replicas are 0, but is read
       again);
    4. a wait of one relist period, so every watch lists again with all of the above.

    All along, the probe is scaled between 1 and 2 replicas ``--pause`` seconds apart, each timed
    from just before its PATCH until the quiet namespace's watch shows a status with the patched
    ``observedGeneration`` and the new replica count (as ``tools.bench.noisy_neighbour``), and
    the operator's resident memory is sampled every 0.25 s. Before each probe, a GET of the probe
    times the API server alone: what of a probe's delay is not the operator's.

    Reported: the operator's RSS at rest, after each step, and its peak (VmHWM) against the 384 MiB
    limit; the probes' p50, p99 and max, in all and by step; the load average.
    """
    parser = lib.parser(__doc__)
    parser.add_argument("--configmaps", type=int, default=20, help="large ConfigMaps of the tenant")
    parser.add_argument("--keys", type=int, default=20_000, help="keys of each ConfigMap")
    parser.add_argument("--referenced", type=int, default=4, help="large ConfigMaps the WebServers name")
    parser.add_argument("--webservers", type=int, default=200, help="WebServers at the schema's maxima")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between probes")
    parser.add_argument("--relist", type=float, default=60.0, help="the operator's watch resync period")
    args = parser.parse_args()
    env = {**lib.operator_env(args), "WATCH_RESYNC_PERIOD": f"{args.relist:g}"}
    with control_plane(args.nodes, args.pods_per_node) as cl:
        kubeconfig, _ = operator_kubeconfig(cl, "webserver")
        log = Path(tempfile.mkdtemp()) / "webserver.log"
        op = OperatorProcess("operators.webserver", kubeconfig, log, env=env, verbose=False).start()
        say(f"WebServer operator running (pid {op.proc.pid if op.proc else '?'}, log {log})")
        t0 = time.monotonic()
        try:
            asyncio.run(bench(cl, op, args))
        finally:
            op.stop()
            say(f"done in {time.monotonic() - t0:.0f}s")


if __name__ == "__main__":
    main()
