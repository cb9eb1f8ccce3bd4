"""WebServers in a test cluster: create, read, change, and wait for them to converge."""

from __future__ import annotations

from kubernetes import client

from tests.framework.cluster import Cluster
from tests.framework.resources import Kind
from tests.framework.waits import wait_for

GROUP, VERSION, PLURAL = "demo.k8s.io", "v1alpha1", "webservers"
KIND = Kind(GROUP, VERSION, PLURAL, "WebServer")
create, get, patch_spec = KIND.create, KIND.get, KIND.patch_spec


def active_pods(cluster: Cluster, namespace: str, name: str) -> list:
    pods = client.CoreV1Api(cluster.api).list_namespaced_pod(namespace, label_selector=f"app={name}").items
    return [
        p
        for p in pods
        if p.metadata.deletion_timestamp is None
        and p.status.phase not in ("Succeeded", "Failed")
        and any(r.controller for r in p.metadata.owner_references or [])
    ]


def ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def converged(cluster: Cluster, namespace: str, name: str, replicas: int, timeout: float = 120) -> dict:
    """Wait for exactly ``replicas`` Ready pods and a status that says so."""

    def check() -> dict | None:
        ws = get(cluster, namespace, name)
        pods = active_pods(cluster, namespace, name)
        st = ws.get("status") or {}
        if (
            len(pods) == replicas
            and all(ready(p) for p in pods)
            and st.get("replicas") == replicas
            and st.get("readyReplicas") == replicas
            and st.get("updatedReplicas") == replicas
            and st.get("observedGeneration") == ws["metadata"]["generation"]
        ):
            return ws
        return None

    return wait_for(check, timeout, f"{name}: {replicas} ready pods and matching status")


def conditions(ws: dict) -> dict:
    return {c["type"]: c for c in ws["status"]["conditions"]}
