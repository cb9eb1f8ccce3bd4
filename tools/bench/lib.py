"""Shared parts of the scale benchmarks (the other modules of ``tools/bench/``); not run on its own.

- ``control_plane``: the local control plane with the bundle's CRDs and kwok nodes that
  each take ``pods_per_node`` pods (kwok's node stage gives 110), so thousands of pods schedule;
- ``Api``: an async client on one aiohttp session with the cluster's admin certificate:
  many requests at once and watches that call back per event, on plain dicts, so the benchmark
  process itself stays cheap next to what it measures on a 2-core machine;
- ``Tracker``: Ready pods and owners whose status reports all replicas ready, in one
  namespace, from two watches;
- ``operator_kubeconfig``: a kubeconfig for an operator holding exactly the CSV's rules,
  as a user the API server audits, so ``AuditLog`` counts the writes it made;
- ``ProcStats``: resident and peak memory and CPU seconds of a process, from ``/proc``;
- ``say``: progress lines with the elapsed time; ``load``: the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from localcluster import cluster as localcluster
from shared.client.kube import DEFAULT_BURST, DEFAULT_QPS

REPO = Path(__file__).resolve().parents[2]
CRDS = sorted((REPO / "bundle" / "manifests").glob("*.yaml"))
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# The group the local API server audits (localcluster.cluster.AUDIT_POLICY).
AUDITED_GROUP = f"system:serviceaccounts:{localcluster.AUDITED_NAMESPACE}"
_T0 = time.monotonic()


def say(msg: str) -> None:
    """A progress line with the seconds since the benchmark started."""
    print(f"[bench {time.monotonic() - _T0:7.1f}s] {msg}", flush=True)


def load() -> str:
    """The machine's 1/5/15-minute load averages, as ``uptime`` shows them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


def percentile(values: Iterable[float], p: float) -> float:
    """The ``p``-th percentile (0-100) by the nearest-rank method: a value that was measured."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = max(1, -(-len(ordered) * p // 100))  # ceil(n * p / 100), at least the first
    return ordered[int(rank) - 1]


def summary(values: Iterable[float]) -> str:
    vals = list(values)
    return (
        f"min {min(vals):.3f}s median {statistics.median(vals):.3f}s p99 {percentile(vals, 99):.3f}s "
        f"max {max(vals):.3f}s"
    )


# -- the control plane -------------------------------------------------------------------------


@contextlib.contextmanager
def control_plane(
    nodes: int = 4, pods_per_node: int = 2500, kcm_qps: float | None = None
) -> Iterator[localcluster.LocalCluster]:
    """The local control plane, its kwok nodes raised to ``pods_per_node`` pods each, and
    kube-controller-manager's client limits raised to ``kcm_qps`` (burst 1.5 times that) if given.

    kwok's ``node-initialize`` stage keeps a node's capacity once set and its heartbeat only
    renews conditions, so patching the status once is enough.
    """
    say(f"starting the control plane ({nodes} kwok nodes x {pods_per_node} pods); {load()}")
    kcm_args = []
    if kcm_qps is not None:
        kcm_args = [f"--kube-api-qps={kcm_qps:g}", f"--kube-api-burst={int(kcm_qps * 1.5)}"]
    with localcluster.running(crds=CRDS, nodes=nodes, controller_manager_args=kcm_args) as cl:
        from kubernetes import client, config

        core = client.CoreV1Api(config.new_client_from_config(config_file=str(cl.kubeconfig)))
        pods = {"pods": str(pods_per_node)}
        for name in cl.node_names():
            core.patch_node_status(name, {"status": {"capacity": pods, "allocatable": pods}})
        yield cl


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line, with the control plane's options (kwok nodes, pods each) and
    the operator's limits (its defaults unless given)."""
    p = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    p.add_argument("--nodes", type=int, default=4, help="kwok nodes")
    p.add_argument("--pods-per-node", type=int, default=2500, help="pods each kwok node takes")
    p.add_argument(
        "--operator-qps",
        type=float,
        default=None,
        help="the operator's KUBE_API_QPS (0: no client-side limit)",
    )
    p.add_argument("--operator-burst", type=int, default=0, help="the operator's KUBE_API_BURST")
    p.add_argument("--operator-workers", type=int, default=0, help="the operator's MAX_CONCURRENT_RECONCILES")
    return p


def operator_env(args: argparse.Namespace) -> dict[str, str]:
    """The operator's environment for the limits given on the command line."""
    env = {}
    if args.operator_qps is not None:  # 0 is a value: no client-side limit
        env["KUBE_API_QPS"] = f"{args.operator_qps:g}"
    if args.operator_burst:
        env["KUBE_API_BURST"] = str(args.operator_burst)
    if args.operator_workers:
        env["MAX_CONCURRENT_RECONCILES"] = str(args.operator_workers)
    return env


def operator_limits(args: argparse.Namespace) -> str:
    qps = DEFAULT_QPS if args.operator_qps is None else args.operator_qps
    return (
        f"operator QPS {qps:g}, burst {args.operator_burst or DEFAULT_BURST}, "
        f"workers {args.operator_workers or 'the operator default'}"
    )


def kcm_limits(cl: localcluster.LocalCluster) -> str:
    """kube-controller-manager's client limits as started (its defaults unless flags set them)."""
    (kcm,) = [c for c in cl.components if c.name == "kube-controller-manager"]
    flags = dict(a.split("=", 1) for a in kcm.argv if a.startswith("--kube-api-"))
    return f"QPS {flags.get('--kube-api-qps', '20')}, burst {flags.get('--kube-api-burst', '30')}"


def operator_kubeconfig(cl: localcluster.LocalCluster, operator: str) -> tuple[Path, str]:
    """A kubeconfig for user ``bench-<operator>`` with the CSV's rules for that operator, bound
    cluster-wide, in the audited group; returns it and the user name."""
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    from tests.framework.cluster import csv_permissions

    user = f"bench-{operator}"
    rbac = client.RbacAuthorizationV1Api(config.new_client_from_config(config_file=str(cl.kubeconfig)))
    role = f"bench:{user}"
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}
    subject = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}
    for create in (
        lambda: rbac.create_cluster_role(
            {"metadata": {"name": role}, "rules": csv_permissions()[f"{operator}-operator"]}
        ),
        lambda: rbac.create_cluster_role_binding(
            {"metadata": {"name": role}, "roleRef": ref, "subjects": [subject]}
        ),
    ):
        try:
            create()
        except ApiException as exc:
            if exc.status != 409:
                raise
    path = cl.write_kubeconfig(cl.workdir / f"kubeconfig-{user}", user, (AUDITED_GROUP,))
    return path, user


# -- what a process costs ----------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    rss_mib: float  # VmRSS
    hwm_mib: float  # VmHWM: peak resident memory so far
    cpu_s: float  # user + system CPU seconds so far
    at: float  # time.monotonic() of the sample


class ProcStats:
    """Memory and CPU time of one process (Linux ``/proc``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._tick = os.sysconf("SC_CLK_TCK")

    def sample(self) -> Sample:
        fields: dict[str, float] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024  # kB -> MiB
        # Fields after the parenthesised command name; utime and stime are the 14th and 15th.
        stat = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        cpu = (int(stat[11]) + int(stat[12])) / self._tick
        return Sample(fields["VmRSS"], fields["VmHWM"], cpu, time.monotonic())

    async def quiet(self, cpu_below: float = 0.05, window: float = 5.0, timeout: float = 300.0) -> Sample:
        """Wait until the process used less than ``cpu_below`` of a core over ``window`` seconds."""
        deadline = time.monotonic() + timeout
        last = self.sample()
        while time.monotonic() < deadline:
            await asyncio.sleep(window)
            now = self.sample()
            if (now.cpu_s - last.cpu_s) / (now.at - last.at) < cpu_below:
                return now
            last = now
        return last


# -- API writes, from the audit log ------------------------------------------------------------


class AuditLog:
    """The local API server's audit log (JSON lines), read from a mark on."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def writes(self, user: str, since: int = 0) -> Counter[str]:
        """Completed write requests ``user`` made after ``since``, counted by "verb resource"."""
        return self.requests(user, since, verbs=WRITE_VERBS)

    def requests(
        self, user: str, since: int = 0, until: int | None = None, verbs: frozenset[str] | None = None
    ) -> Counter[str]:
        """Completed requests ``user`` made between the marks ``since`` and ``until`` (None: the
        end), of ``verbs`` (None: all, reads and watches too), counted by "verb resource"."""
        counts: Counter[str] = Counter()
        with self.path.open("rb") as f:
            f.seek(since)
            for line in f:
                if until is not None and f.tell() > until:
                    break
                event = json.loads(line)
                ref = event.get("objectRef") or {}
                if (
                    event.get("stage") != "ResponseComplete"
                    or (verbs is not None and event.get("verb") not in verbs)
                    or (event.get("user") or {}).get("username") != user
                ):
                    continue
                sub = ref.get("subresource")
                resource = ref.get("resource", "?") + (f"/{sub}" if sub else "")
                counts[f"{event['verb']} {resource}"] += 1
        return counts


def describe_writes(counts: Counter[str]) -> str:
    total = sum(counts.values())
    parts = ", ".join(f"{n} {what}" for what, n in counts.most_common())
    return f"{total} ({parts})" if total else "0"


# -- the API -----------------------------------------------------------------------------------


class ApiError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status}: {text[:300]}")
        self.status = status


class Api:
    """Requests and watches as the cluster's admin, many at once, on plain dicts."""

    def __init__(self, cl: localcluster.LocalCluster, connections: int = 64) -> None:
        self.server = cl.server
        self._ssl = ssl.create_default_context(cafile=str(cl.pki_dir / "ca.crt"))
        self._ssl.load_cert_chain(str(cl.pki_dir / "probe.pem"))
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=self._connections, ssl=self._ssl),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "use Api as an async context manager"
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        data = json.dumps(body) if body is not None else None
        headers = {"Content-Type": content_type, "Accept": JSON}
        for attempt in range(10):
            async with self.session.request(
                method, self.server + path, data=data, headers=headers, params=params
            ) as resp:
                text = await resp.text()
                if resp.status == 429 and attempt < 9:  # priority and fairness: come back
                    await asyncio.sleep(float(resp.headers.get("Retry-After") or 1))
                    continue
                if resp.status >= 400:
                    raise ApiError(resp.status, text)
                return json.loads(text) if text else {}
        raise AssertionError("unreachable")

    async def create_all(
        self, path: str, bodies: Iterable[Mapping[str, Any]], concurrency: int = 32
    ) -> float:
        """POST every body to ``path``, ``concurrency`` at once; returns the seconds it took."""
        t0 = time.monotonic()
        queue = list(bodies)
        queue.reverse()

        async def worker() -> None:
            while queue:
                await self.request("POST", path, queue.pop())

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.monotonic() - t0

    async def namespace(self, prefix: str) -> str:
        """A fresh namespace, once pods can be created in it (its default ServiceAccount exists)."""
        name = f"{prefix}-{os.urandom(3).hex()}"
        await self.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        await until(lambda: self.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"), 120, "SA")
        return name

    async def exists(self, path: str) -> bool:
        try:
            await self.request("GET", path)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def delete_namespace(self, name: str, timeout: float = 900) -> float:
        """Delete a namespace and wait until it is gone; returns the seconds it took."""
        t0 = time.monotonic()
        await self.request("DELETE", f"/api/v1/namespaces/{name}")

        async def gone() -> bool:
            return not await self.exists(f"/api/v1/namespaces/{name}")

        await until(gone, timeout, f"namespace {name} deleted", every=30)
        return time.monotonic() - t0

    async def watch(
        self,
        path: str,
        on_event: Callable[[str, dict[str, Any]], None],
        params: Mapping[str, str] | None = None,
    ) -> None:
        """List ``path``, then watch it for ever, calling ``on_event(type, object)``; run as a task."""
        while True:
            listing = await self.request("GET", path, params=params)
            for item in listing.get("items") or []:
                on_event("ADDED", item)
            rv = listing["metadata"]["resourceVersion"]
            relist = False
            while not relist:
                query = {**(params or {}), "watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "1"}
                query["timeoutSeconds"] = "1800"
                async with self.session.get(self.server + path, params=query) as resp:
                    if resp.status == 410:
                        break
                    resp.raise_for_status()
                    async for line in resp.content:
                        event = json.loads(line)
                        obj = event["object"]
                        if event["type"] == "ERROR":
                            relist = obj.get("code") == 410
                            break
                        rv = obj["metadata"]["resourceVersion"]
                        if event["type"] != "BOOKMARK":
                            on_event(event["type"], obj)


async def until(
    probe: Callable[[], Awaitable[bool] | bool], timeout: float, what: str, every: float = 0.0
) -> None:
    """Poll ``probe`` every 0.2 s until it is true; ``every`` > 0 prints progress that often."""
    t0 = time.monotonic()
    last_said = t0
    while True:
        result = probe()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        now = time.monotonic()
        if now - t0 > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        if every and now - last_said >= every:
            say(f"waiting for {what} ({now - t0:.0f}s)")
            last_said = now
        await asyncio.sleep(0.2)


def ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass
class Tracker:
    """Ready pods and owners whose status reports every replica ready, in one namespace.

    ``owners`` is the owners' collection path (None: pods only). Start with ``start``;
    ``wait`` returns when ``pods`` pods are Ready and ``owners_expected`` owners say so.
    """

    api: Api
    namespace: str
    owners: str | None = None
    pods_ready: dict[str, bool] = field(default_factory=dict)
    owners_ready: dict[str, bool] = field(default_factory=dict)
    first_ready: float | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> Tracker:
        pods = f"/api/v1/namespaces/{self.namespace}/pods"
        self._tasks.append(asyncio.create_task(self.api.watch(pods, self._pod)))
        if self.owners is not None:
            self._tasks.append(asyncio.create_task(self.api.watch(self.owners, self._owner)))
        return self

    def _pod(self, kind: str, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if kind == "DELETED" or pod["metadata"].get("deletionTimestamp"):
            self.pods_ready.pop(name, None)
            return
        self.pods_ready[name] = ready(pod)
        if self.first_ready is None and self.pods_ready[name]:
            self.first_ready = time.monotonic()

    def _owner(self, kind: str, owner: dict[str, Any]) -> None:
        name = owner["metadata"]["name"]
        if kind == "DELETED":
            self.owners_ready.pop(name, None)
            return
        spec = owner.get("spec") or {}
        # A TDSet of one replica all day (tools.bench.scale --kind tdsets) has no spec.replicas.
        want = spec.get("replicas", spec.get("defaultReplica"))
        self.owners_ready[name] = (owner.get("status") or {}).get("readyReplicas") == want

    def ready_pods(self) -> int:
        return sum(self.pods_ready.values())

    def ready_owners(self) -> int:
        return sum(self.owners_ready.values())

    async def wait(self, pods: int, owners: int = 0, timeout: float = 3600, every: float = 15) -> float:
        """Until ``pods`` pods are Ready and ``owners`` owners report it; returns that instant."""
        t0 = last = time.monotonic()
        while self.ready_pods() < pods or self.ready_owners() < owners:
            for task in self._tasks:
                if task.done():
                    task.result()  # a failed watch: raise its error
            now = time.monotonic()
            if now - t0 > timeout:
                raise TimeoutError(
                    f"{self.namespace}: {self.ready_pods()}/{pods} pods Ready, "
                    f"{self.ready_owners()}/{owners} owners ready after {timeout:.0f}s"
                )
            if now - last >= every:
                say(
                    f"{self.namespace}: {self.ready_pods()}/{pods} pods Ready"
                    + (f", {self.ready_owners()}/{owners} owners report it" if owners else "")
                )
                last = now
            await asyncio.sleep(0.05)
        return time.monotonic()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
