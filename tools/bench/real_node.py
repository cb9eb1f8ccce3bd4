"""Benchmarks on the real node: pod start latency, and 0 -> N real pods, WebServer vs Deployment.

    sudo python -m tools.bench.real_node [--replicas 20] [--rounds 3] [--pods 10]

Starts a local control plane with this machine as its real node (root; ``localcluster.node``),
imports every image ``make images`` builds, installs the operators from ``deploy/install.yaml``
as pods from their images (what a user runs), then measures in one run:

- pod start latency: ``--pods`` single pods of the web image created one after the other,
  creation -> Ready (kubelet, containerd, CNI, the readiness probe);
- 0 -> N Ready pods for a WebServer and for a Deployment of the same image, one after the
  other in fresh namespaces, ``--rounds`` times; the ratio WebServer / Deployment.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kubernetes import client, config

from localcluster import cluster as localcluster
from localcluster.images import ensure_images

REPO = Path(__file__).resolve().parents[2]
CRDS = [
    REPO / "bundle" / "manifests" / f
    for f in ("app.example.com_netperfs.yaml", "schedule.rs_tdsets.yaml", "demo.k8s.io_webservers.yaml")
]
# The readiness probe WebServer pods get (operators/webserver/desired.py): the same for all.
PROBE = {"tcpSocket": {"port": 8080}, "periodSeconds": 5, "failureThreshold": 3}


def until(pred: Callable[[], bool], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark step did not finish")
        time.sleep(0.05)


def ready(pod: client.V1Pod) -> bool:
    return pod.metadata.deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True" for c in pod.status.conditions or []
    )


def namespace(core: client.CoreV1Api, prefix: str) -> str:
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    until(lambda: bool(core.list_namespaced_service_account(ns).items), 60)
    return ns


def pod_start(core: client.CoreV1Api, image: str, count: int) -> list[float]:
    ns = namespace(core, "bench-pod")
    times = []
    for i in range(count):
        t0 = time.monotonic()
        container = {"name": "web", "image": image, "readinessProbe": PROBE}
        core.create_namespaced_pod(ns, {"metadata": {"name": f"p{i}"}, "spec": {"containers": [container]}})
        until(lambda i=i: ready(core.read_namespaced_pod(f"p{i}", ns)))
        times.append(time.monotonic() - t0)
    core.delete_namespace(ns)
    return times


def all_ready(core: client.CoreV1Api, ns: str, n: int) -> bool:
    return sum(ready(p) for p in core.list_namespaced_pod(ns).items) == n


def webserver(api: client.ApiClient, image: str, n: int) -> float:
    core = client.CoreV1Api(api)
    ns = namespace(core, "bench-ws")
    body = {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": "b"},
        "spec": {"replicas": n, "image": image, "port": 8080, "runAsUser": 101},
    }
    t0 = time.monotonic()
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", ns, "webservers", body
    )
    until(lambda: all_ready(core, ns, n))
    took = time.monotonic() - t0
    core.delete_namespace(ns)
    return took


def deployment(api: client.ApiClient, image: str, n: int) -> float:
    core = client.CoreV1Api(api)
    ns = namespace(core, "bench-dep")
    labels = {"app": "b"}
    container = {"name": "web", "image": image, "ports": [{"containerPort": 8080}], "readinessProbe": PROBE}
    body = {
        "metadata": {"name": "b"},
        "spec": {
            "replicas": n,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    t0 = time.monotonic()
    client.AppsV1Api(api).create_namespaced_deployment(ns, body)
    until(lambda: all_ready(core, ns, n))
    took = time.monotonic() - t0
    core.delete_namespace(ns)
    return took


def summary(values: list[float]) -> str:
    return f"min {min(values):.2f}s median {statistics.median(values):.2f}s max {max(values):.2f}s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pods", type=int, default=10)
    args = parser.parse_args()
    archives = ensure_images()
    web = next(ref for ref in archives if ref.rsplit("/", 1)[-1].startswith("web:"))
    with localcluster.running(nodes=0, real_node=True) as cl:
        assert cl.node is not None
        cl.node.import_images(archives.values())
        kubectl = ["kubectl", f"--kubeconfig={cl.kubeconfig}"]
        subprocess.run([*kubectl, "apply", "--server-side", *(f"-f={c}" for c in CRDS)], check=True)
        subprocess.run(
            [*kubectl, "wait", "--for=condition=Established", *(f"-f={c}" for c in CRDS)], check=True
        )
        subprocess.run([*kubectl, "apply", "-f", str(REPO / "deploy" / "install.yaml")], check=True)
        subprocess.run(
            [*kubectl, "-n", "k8s-operators-py", "wait", "--for=condition=Available", "--timeout=300s",
             "deployment", "--all"],
            check=True,
        )  # fmt: skip
        api = config.new_client_from_config(config_file=str(cl.kubeconfig))
        core = client.CoreV1Api(api)
        starts = pod_start(core, web, args.pods)
        print(f"[bench] pod start (create -> Ready), {args.pods} pods: {summary(starts)}", flush=True)
        ws, dep = [], []
        for r in range(args.rounds):
            ws.append(webserver(api, web, args.replicas))
            dep.append(deployment(api, web, args.replicas))
            print(f"[bench] round {r + 1}: WebServer {ws[-1]:.2f}s, Deployment {dep[-1]:.2f}s", flush=True)
    print(f"pod start latency on the real node ({args.pods} pods): {summary(starts)}")
    print(
        f"0 -> {args.replicas} Ready real pods, {args.rounds} rounds: "
        f"WebServer {summary(ws)}; Deployment {summary(dep)}"
    )
    print(f"ratio of medians WebServer / Deployment: {statistics.median(ws) / statistics.median(dep):.2f}")


if __name__ == "__main__":
    main()
