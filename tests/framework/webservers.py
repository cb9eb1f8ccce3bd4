"""WebServers in a test cluster: create, read, change, and wait for them to converge."""

from __future__ import annotations

from kubernetes import client

from operators.webserver.schema import MAX_PART_CHARS
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


def largest_spec(replicas: int = 0, total: int = MAX_PART_CHARS) -> dict:
    """A WebServer spec at the schema's maxima: every list and map at its most items, every
    string at its longest, the parts with a character budget (env, command, args, pod
    annotations) filled to ``total`` each: the worst case of what one object may cost the
    operator (``docs/operations/sizing.md``). ``replicas: 0`` by default: no pod quota binds."""

    def subdomain(i: int, length: int = 253) -> str:
        head = f"n{i:03d}."
        return head + "a" * (length - len(head))

    def qualified(i: int) -> str:  # a prefix of 253 characters, "/", a name of 63
        return subdomain(i) + "/" + "k" * 63

    # 64 variables, their names half the budget, the other half the values of 32 of them.
    name_length = min(253, total // 2 // 64)
    env_names = [f"E{i:02d}" + "x" * (name_length - 3) for i in range(64)]
    env: list[dict] = [
        # 16 Secrets here and 8 more for the volumes: the most distinct ones admission checks.
        {"name": name, "valueFrom": {"secretKeyRef": {"name": subdomain(i % 16), "key": "k" * 253}}}
        for i, name in enumerate(env_names[:32])
    ]
    values = total - sum(len(n) for n in env_names)
    per = values // 32
    env += [{"name": name, "value": "v" * per} for name in env_names[32:]]
    strings = [f"{i:02d}" + "s" * (4096 - 2) for i in range(total // 4096)]
    # As many of the longest annotation keys as leave room for values of the rest of the budget.
    keys = [qualified(i) for i in range(min(32, total // 2 // len(qualified(0))))]
    per_value = min(4096, (total - sum(len(k) for k in keys)) // len(keys))
    labels = [qualified(i) for i in range(32)]
    return {
        "replicas": replicas,
        "image": "r" * 512,
        "env": env,
        "envFrom": [{"configMapRef": {"name": subdomain(i)}, "prefix": "P" * 253} for i in range(16)],
        "volumes": [
            {
                "name": f"v{i:02d}" + "a" * 60,
                "mountPath": f"/m{i:02d}" + "p" * 1020,
                "secret": {"name": subdomain(16 + i % 8)},
            }
            for i in range(16)
        ],
        "command": strings,
        "args": strings,
        "podMetadata": {
            "labels": {k: "l" * 63 for k in labels},
            "annotations": {k: "a" * per_value for k in keys},
        },
        "restartedAt": "2026-11-26T00:00:00Z",
        "readinessPath": "/" + "r" * 1023,
        "liveness": {"path": "/" + "l" * 1023},
    }
