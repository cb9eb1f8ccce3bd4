"""Netperfs in a test cluster: create, read, their pods, and finishing a client pod as kwok's kubelet."""

from __future__ import annotations

import re
from typing import Any

from kubernetes import client

from tests.framework.cluster import REPO, Cluster
from tests.framework.resources import Kind
from tests.framework.waits import wait_for

GROUP, VERSION, PLURAL = "app.example.com", "v1alpha1", "netperfs"
KIND = Kind(GROUP, VERSION, PLURAL, "Netperf")
create, get, patch_spec = KIND.create, KIND.get, KIND.patch_spec
# Client output captured from real netperf runs (the parser's unit tests use the same files).
FIXTURES = REPO / "tests" / "unit" / "netperf" / "fixtures"


def co(cluster: Cluster) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(cluster.api)


def st(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    return get(cluster, namespace, name).get("status") or {}


def pods(cluster: Cluster, namespace: str) -> list[client.V1Pod]:
    return (
        client.CoreV1Api(cluster.api)
        .list_namespaced_pod(namespace, label_selector="app.kubernetes.io/name=netperf")
        .items
    )


def pod(cluster: Cluster, namespace: str, name: str) -> client.V1Pod:
    return client.CoreV1Api(cluster.api).read_namespaced_pod(name, namespace)


def finish_client(cluster: Cluster, namespace: str, name: str, message: str, exit_code: int = 0) -> None:
    """Act as the kubelet: terminate the client container with this exit code and message."""
    annotations = {
        "localcluster.dev/exit-code": str(exit_code),
        "localcluster.dev/termination-message": message,
    }
    client.CoreV1Api(cluster.api).patch_namespaced_pod(
        name, namespace, {"metadata": {"annotations": annotations}}
    )


def phase_is(
    cluster: Cluster, namespace: str, name: str, *phases: str, timeout: float = 60
) -> dict[str, Any]:
    return wait_for(
        lambda: (s := st(cluster, namespace, name)).get("status") in phases and s,
        timeout,
        f"{name} in phase {'/'.join(phases)}",
    )


def in_test(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """Wait for phase Test and the client pod, Running with an IP (kwok)."""
    s = phase_is(cluster, namespace, name, "Test")
    wait_for(
        lambda: pod(cluster, namespace, s["clientPod"]).status.phase == "Running", 60, "client pod Running"
    )
    return s


def no_pods_left(cluster: Cluster, namespace: str) -> None:
    wait_for(lambda: not pods(cluster, namespace), 60, "both pods deleted")


def reasons(cluster: Cluster, namespace: str, name: str) -> list[str]:
    events = client.CoreV1Api(cluster.api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},involvedObject.kind=Netperf"
    )
    return [e.reason for e in events.items for _ in range(e.count or 1)]


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text()


def mbits(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"^THROUGHPUT=(.*)$", text, re.M)]


def resampled(text: str, samples: int) -> str:
    """Client output of one stream with ``samples`` samples: the samples of ``text`` in turn,
    numbered from 0 (a run of the samples a spec's default asks for, from a 3-sample fixture)."""
    blocks = [b for b in re.split(r"^SAMPLE=\d+\n", text, flags=re.M) if b]
    return "".join(f"SAMPLE={i}\n{blocks[i % len(blocks)]}" for i in range(samples))


def scaled(text: str, factor: float) -> str:
    """Client output with every throughput multiplied by ``factor`` (a slower or faster link)."""
    return re.sub(
        r"^THROUGHPUT=(.*)$", lambda m: f"THROUGHPUT={float(m.group(1)) * factor:.2f}", text, flags=re.M
    )
