"""Failover time: the leading WebServer operator SIGKILLed mid-scale-up, until the standby acts.

    python -m tools.bench.failover [--trials 10] [--replicas 30]

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from kubernetes import client, config

from localcluster import cluster as localcluster
from tests.framework import webservers
from tests.framework.cluster import Cluster
from tests.framework.namespaces import hold_pods_at
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for

REPO = Path(__file__).resolve().parents[2]
UTC = datetime.UTC


def audit_writes(cl: Cluster, account: str) -> list[tuple[datetime.datetime, str, int]]:
    """(received, resource, code) of every write ``account`` sent, in order."""
    user = f"system:serviceaccount:{localcluster.AUDITED_NAMESPACE}:{account}"
    found = []
    for line in cl.need_local().audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != user or not event.get("objectRef"):
            continue
        if event["verb"] in ("create", "update", "patch", "delete"):
            received = datetime.datetime.fromisoformat(
                event["requestReceivedTimestamp"].replace("Z", "+00:00")
            )
            status = int((event.get("responseStatus") or {}).get("code") or 0)
            found.append((received, event["objectRef"]["resource"], status))
    return sorted(found)


def converged(cl: Cluster, namespace: str, name: str, replicas: int) -> bool:
    """``webservers.converged``'s check, once: exactly the Ready pods, and a status saying so."""
    ws = webservers.get(cl, namespace, name)
    pods = webservers.active_pods(cl, namespace, name)
    st = ws.get("status") or {}
    return (
        len(pods) == replicas
        and all(webservers.ready(p) for p in pods)
        and st.get("readyReplicas") == replicas
        and st.get("observedGeneration") == ws["metadata"]["generation"]
    )


def leader_of(cl: Cluster, namespace: str) -> str:
    try:
        lease = client.CoordinationV1Api(cl.api).read_namespaced_lease("webserver-leader", namespace)
    except client.exceptions.ApiException:
        return ""
    return (lease.spec.holder_identity or "").split("_", 1)[0]


def trial(cl: Cluster, replicas: int, workdir: Path) -> dict[str, float]:
    core = client.CoreV1Api(cl.api)
    namespace = f"bench-fo-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    wait_for(lambda: core.read_namespaced_service_account("default", namespace), 60, "default SA")
    procs: dict[str, OperatorProcess] = {}
    accounts = {name: f"fo-{name}-{namespace[-6:]}" for name in ("a", "b")}
    try:
        for name in ("a", "b"):
            procs[name] = OperatorProcess(
                "operators.webserver",
                cl.operator_kubeconfig("webserver", account=accounts[name]),
                workdir / f"{namespace}-{name}.log",
                namespaces=namespace,
                env={"LEADER_ELECT": "true", "POD_NAME": name},
            ).start()
            if name == "a":
                wait_for(lambda: leader_of(cl, namespace) == "a", 60, "a leading")
        hold_pods_at(core, namespace, replicas // 3)
        webservers.create(cl, namespace, "web", {"replicas": replicas})
        wait_for(lambda: len(webservers.active_pods(cl, namespace, "web")) == replicas // 3, 60, "held")
        killed = datetime.datetime.now(UTC)
        procs["a"].kill()
        core.delete_namespaced_resource_quota("hold", namespace)
        deadline = time.monotonic() + 300
        while not converged(cl, namespace, "web", replicas):
            if time.monotonic() > deadline:
                raise TimeoutError(f"not converged: {procs['b'].log_tail()}")
            time.sleep(0.1)
        done = datetime.datetime.now(UTC)
        sent = [w for w in audit_writes(cl, accounts["b"]) if w[0] > killed and w[2] < 400]
        lease = next(t for t, resource, _ in sent if resource == "leases")
        first = next(t for t, resource, _ in sent if resource != "leases")
        return {
            "lease": (lease - killed).total_seconds(),
            "first write": (first - killed).total_seconds(),
            "converged": (done - killed).total_seconds(),
        }
    finally:
        for proc in procs.values():
            proc.stop()
        core.delete_namespace(namespace)


def main() -> None:
    """Starts the local control plane, then per trial, in a fresh namespace: two instances of the
    WebServer operator with leader election at controller-runtime's default durations (15/10/2 s,
    as deployed), each as a ServiceAccount of its own so the API server's audit log tells their
    requests apart; ``a`` leads, ``b`` is ready. A WebServer of N replicas is created with a quota
    holding it at a third of N (so the kill lands mid-scale-up every time), ``a`` is SIGKILLed and
    the quota removed. Measured from the kill (host clock; the API server runs on the same host):

    - ``lease``: b's first successful Lease write (it took the Lease over);
    - ``first write``: b's first other write the API server accepted (a pod, the status);
    - ``converged``: N Ready pods and a status that says so (polled every 0.1 s).

    Each trial is printed, then min / median / max over the trials.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=30)
    args = parser.parse_args()
    crds = sorted((REPO / "bundle" / "manifests").glob("*.yaml"))
    results: list[dict[str, float]] = []
    with localcluster.running(crds=crds) as local:
        cl = Cluster(
            local.kubeconfig, config.new_client_from_config(config_file=str(local.kubeconfig)), local
        )
        workdir = Path(tempfile.mkdtemp(prefix="bench-failover-"))
        for i in range(args.trials):
            results.append(trial(cl, args.replicas, workdir))
            print(f"trial {i + 1}: " + ", ".join(f"{k} {v:.2f}s" for k, v in results[-1].items()), flush=True)
    print(f"leader SIGKILLed mid-scale-up (0 -> {args.replicas}), {args.trials} trials, min / median / max:")
    for key in results[0]:
        values = [r[key] for r in results]
        print(f"  -> {key}: {min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f} s")


if __name__ == "__main__":
    main()
