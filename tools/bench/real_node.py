"""Benchmarks on the real node: pod start latency, 0 -> N real pods (WebServer vs Deployment), and
a bad rollout undone by ``autoRollback`` while a client keeps asking the Service.

    sudo python -m tools.bench.real_node [--replicas 20] [--rounds 3] [--pods 10]
                                         [--rollbacks 3] [--deadline 20] [--max-unavailable 0,1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config

from localcluster import cluster as localcluster
from localcluster.images import ensure_images
from tests.framework.traffic import Traffic

REPO = Path(__file__).resolve().parents[2]
CRDS = [
    REPO / "bundle" / "manifests" / f
    for f in ("app.example.com_netperfs.yaml", "schedule.rs_tdsets.yaml", "demo.k8s.io_webservers.yaml")
]
# The readiness probe WebServer pods get by default (operators/webserver/desired.py), which a
# user writing a Deployment of the web image would give it.
PROBE = {"tcpSocket": {"port": 8080}, "periodSeconds": 5, "failureThreshold": 3}
WS = ("demo.k8s.io", "v1alpha1")


def cpu_seconds(command: str) -> float:
    """CPU seconds (user + system) used so far by the processes whose command line contains
    ``command`` (both replicas of an operator; kube-controller-manager): the controllers' own
    work in an arm, which takes the node's two cores from the kubelet starting the pods."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and command in (proc / "cmdline").read_text():
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
        except (OSError, ValueError, IndexError):
            continue
    return total


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


def drop(core: client.CoreV1Api, ns: str) -> None:
    """Delete the namespace and wait until it is gone: the next measurement starts on a kubelet
    that is not still stopping the last one's pods (their preStop hooks, sandboxes, veths)."""
    core.delete_namespace(ns)

    def gone() -> bool:
        try:
            core.read_namespace(ns)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    until(gone, 300)


def pod_start(core: client.CoreV1Api, image: str, count: int) -> list[float]:
    ns = namespace(core, "bench-pod")
    times = []
    for i in range(count):
        t0 = time.monotonic()
        container = {"name": "web", "image": image, "readinessProbe": PROBE}
        core.create_namespaced_pod(ns, {"metadata": {"name": f"p{i}"}, "spec": {"containers": [container]}})
        until(lambda i=i: ready(core.read_namespaced_pod(f"p{i}", ns)))
        times.append(time.monotonic() - t0)
    drop(core, ns)
    return times


def all_ready(core: client.CoreV1Api, ns: str, n: int) -> bool:
    return sum(ready(p) for p in core.list_namespaced_pod(ns).items) == n


def until_all_ready(core: client.CoreV1Api, ns: str, n: int, t0: float) -> tuple[float, float, str]:
    """Polls until the n pods are Ready: seconds from t0 until the poll first saw n pods (the
    controller's part) and until all were Ready (the kubelet's, after it), and where the time
    between went (when the pods' containers ran and turned Ready: the first, the median, the
    last)."""
    created = None
    running: dict[str, float] = {}
    readied: dict[str, float] = {}
    deadline = t0 + 300
    while True:
        pods = core.list_namespaced_pod(ns).items
        now = time.monotonic()
        if created is None and len(pods) >= n:
            created = now - t0
        for p in pods:
            statuses = p.status.container_statuses or []
            if statuses and all(c.state.running is not None for c in statuses):
                running.setdefault(p.metadata.name, now - t0)
            if ready(p):
                readied.setdefault(p.metadata.name, now - t0)
        if sum(ready(p) for p in pods) == n:
            spread = (
                f"containers running {summary(list(running.values()))}; "
                f"pods Ready {summary(list(readied.values()))}"
            )
            return created if created is not None else now - t0, now - t0, spread
        if now > deadline:
            raise TimeoutError("benchmark step did not finish")
        time.sleep(0.05)


def arm(core: client.CoreV1Api, ns: str, n: int, what: str, create: Callable[[], object]) -> float:
    """One arm: ``create()`` the controller's object, then seconds until its n pods are Ready;
    prints where the time went and the controllers' CPU meanwhile."""
    before = cpu_seconds("operators.webserver"), cpu_seconds("kube-controller-manager")
    t0 = time.monotonic()
    create()
    created, took, spread = until_all_ready(core, ns, n, t0)
    print(
        f"[bench]   {what}: {n} pods created by {created:.2f}s, all Ready by {took:.2f}s ({spread}); CPU "
        f"operator {cpu_seconds('operators.webserver') - before[0]:.2f}s, "
        f"kube-controller-manager {cpu_seconds('kube-controller-manager') - before[1]:.2f}s",
        flush=True,
    )
    return took


def webserver_body(image: str, n: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": "b"},
        "spec": {"replicas": n, "image": image, "port": 8080, "runAsUser": 101, **spec},
    }


def webserver(api: client.ApiClient, image: str, n: int) -> tuple[float, dict[str, Any]]:
    """0 -> n Ready pods of a WebServer; also the pod spec the operator gave them."""
    core = client.CoreV1Api(api)
    ns = namespace(core, "bench-ws")
    co = client.CustomObjectsApi(api)
    took = arm(
        core,
        ns,
        n,
        "WebServer",
        lambda: co.create_namespaced_custom_object(*WS, ns, "webservers", webserver_body(image, n)),
    )
    pod = api.sanitize_for_serialization(core.list_namespaced_pod(ns).items[0])
    drop(core, ns)
    keep = ("containers", "securityContext", "automountServiceAccountToken")
    return took, {key: pod["spec"][key] for key in keep if key in pod["spec"]}


def plain_pod(image: str) -> dict[str, Any]:
    return {
        "containers": [
            {"name": "web", "image": image, "ports": [{"containerPort": 8080}], "readinessProbe": PROBE}
        ]
    }


def deployment(api: client.ApiClient, pod_spec: dict[str, Any], n: int) -> float:
    core = client.CoreV1Api(api)
    ns = namespace(core, "bench-dep")
    labels = {"app": "b"}
    body = {
        "metadata": {"name": "b"},
        "spec": {
            "replicas": n,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }
    took = arm(
        core, ns, n, "Deployment", lambda: client.AppsV1Api(api).create_namespaced_deployment(ns, body)
    )
    drop(core, ns)
    return took


def rollback(
    api: client.ApiClient, image: str, deadline: int, max_unavailable: int
) -> tuple[float, int, list[str]]:
    """A bad rollout undone by autoRollback: seconds from the PATCH to the rollback done with
    both pods of the old template Ready again, and the client's answered and failed requests
    from that PATCH on. With ``maxUnavailable: 1`` one old pod goes at once and the rollback
    makes it again (same name: pods are named by template and slot)."""
    core = client.CoreV1Api(api)
    co = client.CustomObjectsApi(api)
    ns = namespace(core, "bench-rb")
    rollout = {"maxSurge": 1, "maxUnavailable": max_unavailable, "autoRollback": True}
    body = webserver_body(
        image, 2, rollout=rollout, progressDeadlineSeconds=deadline, service={"enabled": True, "port": 80}
    )
    co.create_namespaced_custom_object(*WS, ns, "webservers", body)
    until(lambda: all_ready(core, ns, 2))

    def service_ip() -> str | None:
        try:
            return str(core.read_namespaced_service("b", ns).spec.cluster_ip)
        except client.ApiException:
            return None

    until(lambda: service_ip() is not None, 60)
    old = {p.metadata.name for p in core.list_namespaced_pod(ns).items}
    ip = service_ip()
    assert ip is not None
    # kube-proxy refuses a new Service's connections until it has its endpoints: wait for 10
    # answers in a row before the clock starts.
    with Traffic({"b": ip}, limit=6000) as warm:
        until(lambda: warm.answering(10), 120)
    with Traffic({"b": ip}, limit=6000) as traffic:
        t0 = time.monotonic()
        co.patch_namespaced_custom_object(
            *WS, ns, "webservers", "b", {"spec": {"image": "localcluster.dev/unpullable:latest"}}
        )

        def done() -> bool:
            st = co.get_namespaced_custom_object(*WS, ns, "webservers", "b").get("status") or {}
            pods = core.list_namespaced_pod(ns).items
            back = {p.metadata.name for p in pods} == old and all(ready(p) for p in pods)
            return bool(st.get("rollback")) and st.get("lastRolloutOutcome") == "Available" and back

        until(done, 300)
        took = time.monotonic() - t0
    drop(core, ns)
    return took, traffic.ok["b"], traffic.failed["b"]


def summary(values: list[float], unit: str = "s") -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"min {low:.2f}{unit} median {mid:.2f}{unit} max {high:.2f}{unit}"


def main() -> None:
    """Starts a local control plane with this machine as its real node (root; ``localcluster.node``),
    imports every image ``make images`` builds, installs the operators from ``deploy/install.yaml``
    as pods from their images (what a user runs), then measures in one run:

    - pod start latency: ``--pods`` single pods of the web image created one after the other,
      creation -> Ready (kubelet, containerd, CNI, the readiness probe);
    - 0 -> N Ready pods for a WebServer and for two Deployments of the same image, one after the
      other in fresh namespaces, ``--rounds`` times: one Deployment whose pods are exactly the
      WebServer's (their container and pod security read back from a pod the operator made: the
      controllers compared, nothing else), one as a user writes it (the image, its port, the TCP
      readiness probe every 5 s that WebServer pods have); the ratios WebServer / Deployment;
    - a bad rollout, ``--rollbacks`` times for each ``--max-unavailable``: a WebServer of 2 Ready
      pods behind its Service (``maxSurge: 1``, that ``maxUnavailable``, ``autoRollback``,
      ``progressDeadlineSeconds: --deadline``) is pointed at an image that cannot be pulled; the
      time from that PATCH to the status saying the rollback is done with both old pods Ready, and
      the requests a client on the host sent to the Service's cluster IP meanwhile (one after
      another, 0.1 s apart), answered and failed.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--rollbacks", type=int, default=3)
    parser.add_argument("--deadline", type=int, default=20, help="progressDeadlineSeconds of the bad rollout")
    parser.add_argument(
        "--max-unavailable", default="0,1", help="rollout.maxUnavailable of the bad rollouts, each measured"
    )
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
        ws: list[float] = []
        same: list[float] = []
        plain: list[float] = []
        # The arms take turns going first (the WebServer's own, whose pod spec the other arm
        # copies, in round 1): whatever the order costs (a kubelet still busy, a cache warm)
        # falls on each arm alike.
        pod_spec: dict[str, Any] = {}
        for r in range(args.rounds):
            arms = ["ws", "same", "plain"]
            for arm in arms[r % 3 :] + arms[: r % 3]:
                if arm == "ws":
                    took, pod_spec = webserver(api, web, args.replicas)
                    ws.append(took)
                elif arm == "same":
                    same.append(deployment(api, pod_spec, args.replicas))
                else:
                    plain.append(deployment(api, plain_pod(web), args.replicas))
            print(
                f"[bench] round {r + 1}: WebServer {ws[-1]:.2f}s, Deployment of the same pods "
                f"{same[-1]:.2f}s, Deployment as a user writes it {plain[-1]:.2f}s",
                flush=True,
            )
        rollbacks: dict[int, list[tuple[float, int, list[str]]]] = {}
        for unavailable in (int(v) for v in args.max_unavailable.split(",")):
            for r in range(args.rollbacks):
                rollbacks.setdefault(unavailable, []).append(rollback(api, web, args.deadline, unavailable))
                took, ok, failed = rollbacks[unavailable][-1]
                print(
                    f"[bench] rollback {r + 1}, maxUnavailable {unavailable}: {took:.2f}s, "
                    f"{ok} answered, {len(failed)} failed {failed[:3]}",
                    flush=True,
                )
    print(f"pod start latency on the real node ({args.pods} pods): {summary(starts)}")
    print(
        f"0 -> {args.replicas} Ready real pods, {args.rounds} rounds: WebServer {summary(ws)}; "
        f"Deployment of the same pods {summary(same)}; Deployment as a user writes it {summary(plain)}"
    )
    print(
        "ratio of medians WebServer / Deployment: "
        f"same pods {statistics.median(ws) / statistics.median(same):.2f}, "
        f"as a user writes it {statistics.median(ws) / statistics.median(plain):.2f}"
    )
    print(
        "ratios round by round, WebServer / Deployment: "
        f"same pods {summary([w / d for w, d in zip(ws, same, strict=True)], 'x')}, "
        f"as a user writes it {summary([w / d for w, d in zip(ws, plain, strict=True)], 'x')}"
    )
    for unavailable, runs in rollbacks.items():
        print(
            f"bad rollout -> rollback done, both old pods Ready (progressDeadlineSeconds {args.deadline}, "
            f"maxUnavailable {unavailable}), {len(runs)} runs: {summary([r[0] for r in runs])}; "
            f"requests answered {sum(r[1] for r in runs)}, failed {sum(len(r[2]) for r in runs)}"
        )


if __name__ == "__main__":
    main()
