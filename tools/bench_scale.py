"""Time 0 -> N Ready pods: a WebServer next to a ReplicaSet, on one local control plane.

    python -m tools.bench_scale [--replicas 100] [--rounds 3]

Starts the local control plane with the bundle's CRDs, runs the WebServer operator, then for
each round creates a WebServer and a ReplicaSet of N pods (one after the other, in fresh
namespaces) and reports the seconds until N pods are Ready and the owner's status says so.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kubernetes import client, config

from localcluster import cluster as localcluster
from tests.integration.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[1]


def _until(pred: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not finish")
        time.sleep(0.05)


def _ready_pods(core: client.CoreV1Api, ns: str) -> int:
    pods = core.list_namespaced_pod(ns).items
    return sum(
        1
        for p in pods
        if p.metadata.deletion_timestamp is None
        and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
    )


def bench_webserver(api: client.ApiClient, n: int) -> float:
    core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns = f"bench-ws-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    _until(lambda: bool(core.list_namespaced_service_account(ns).items), 60)
    t0 = time.monotonic()
    co.create_namespaced_custom_object(
        "demo.k8s.io",
        "v1alpha1",
        ns,
        "webservers",
        {
            "apiVersion": "demo.k8s.io/v1alpha1",
            "kind": "WebServer",
            "metadata": {"name": "b"},
            "spec": {"replicas": n},
        },
    )

    def done() -> bool:
        st = (
            co.get_namespaced_custom_object("demo.k8s.io", "v1alpha1", ns, "webservers", "b").get("status")
            or {}
        )
        return st.get("readyReplicas") == n and _ready_pods(core, ns) == n

    _until(done, 600)
    elapsed = time.monotonic() - t0
    core.delete_namespace(ns)
    return elapsed


def bench_replicaset(api: client.ApiClient, n: int) -> float:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns = f"bench-rs-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    _until(lambda: bool(core.list_namespaced_service_account(ns).items), 60)
    labels = {"app": "b"}
    t0 = time.monotonic()
    apps.create_namespaced_replica_set(
        ns,
        {
            "metadata": {"name": "b"},
            "spec": {
                "replicas": n,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "web", "image": "nginxdemos/hello"}]},
                },
            },
        },
    )
    _until(
        lambda: (
            (apps.read_namespaced_replica_set("b", ns).status.ready_replicas or 0) == n
            and _ready_pods(core, ns) == n
        ),
        600,
    )
    elapsed = time.monotonic() - t0
    core.delete_namespace(ns)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    crds = sorted((REPO / "bundle" / "manifests").glob("*.yaml"))
    with localcluster.running(crds=crds) as cl:
        api = config.new_client_from_config(config_file=str(cl.kubeconfig))
        log = Path(tempfile.mkdtemp()) / "webserver.log"
        op = OperatorProcess("operators.webserver", cl.kubeconfig, log).start()
        try:
            ws, rs = [], []
            for i in range(args.rounds):
                ws.append(bench_webserver(api, args.replicas))
                rs.append(bench_replicaset(api, args.replicas))
                print(f"round {i + 1}: WebServer {ws[-1]:.2f}s, ReplicaSet {rs[-1]:.2f}s", flush=True)
        finally:
            op.stop()
    print(
        f"0->{args.replicas} Ready, median of {args.rounds}: "
        f"WebServer {statistics.median(ws):.2f}s, ReplicaSet {statistics.median(rs):.2f}s"
    )


if __name__ == "__main__":
    main()
