"""The documented kwok pod stages of the local control plane (localcluster/kwok-stages.yaml)."""

from __future__ import annotations

from kubernetes import client

from tests.framework.waits import wait_for


def _pod(name: str, node: str, annotations: dict[str, str] | None = None) -> dict:
    return {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


def _ready(pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_nodes_are_ready_and_labelled(cluster):
    local = cluster.need_local()
    nodes = client.CoreV1Api(cluster.api).list_node(label_selector="type=kwok").items
    assert sorted(n.metadata.name for n in nodes) == local.node_names()
    for n in nodes:
        assert n.metadata.labels["localcluster.dev/node"] == n.metadata.name
        assert n.metadata.labels["topology.kubernetes.io/zone"].startswith("zone-")
        assert any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)
        assert n.status.allocatable["pods"] == "110"


def test_pod_ready_unready_finish_and_delete(cluster, namespace):
    local = cluster.need_local()
    core = client.CoreV1Api(cluster.api)
    node = local.node_names()[1]
    core.create_namespaced_pod(namespace, _pod("p", node))
    pod = wait_for(
        lambda: (p := core.read_namespaced_pod("p", namespace)) and _ready(p) and p, 60, "pod Ready"
    )
    assert pod.status.phase == "Running" and pod.status.pod_ip

    # pod-unready: a failing readiness probe, on request.
    core.patch_namespaced_pod(
        "p", namespace, {"metadata": {"annotations": {"localcluster.dev/ready": "false"}}}
    )
    wait_for(lambda: not _ready(core.read_namespaced_pod("p", namespace)), 60, "pod not Ready")

    # pod-finish: exit code and termination message from annotations.
    core.patch_namespaced_pod(
        "p",
        namespace,
        {
            "metadata": {
                "annotations": {
                    "localcluster.dev/exit-code": "3",
                    "localcluster.dev/termination-message": "THROUGHPUT=1.5",
                }
            }
        },
    )
    pod = wait_for(
        lambda: (p := core.read_namespaced_pod("p", namespace)).status.phase == "Failed" and p,
        60,
        "pod Failed",
    )
    term = pod.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.message, term.reason) == (3, "THROUGHPUT=1.5", "Error")

    core.create_namespaced_pod(namespace, _pod("ok", node, {"localcluster.dev/exit-code": "0"}))
    pod = wait_for(
        lambda: (p := core.read_namespaced_pod("ok", namespace)).status.phase == "Succeeded" and p,
        60,
        "pod Succeeded",
    )
    assert pod.status.container_statuses[0].state.terminated.exit_code == 0

    # pod-delete: finalizers are cleared and the pod disappears.
    core.patch_namespaced_pod("ok", namespace, {"metadata": {"finalizers": ["example.com/hold"]}})
    core.delete_namespaced_pod("ok", namespace)
    wait_for(
        lambda: "ok" not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items},
        60,
        "pod deleted",
    )


def test_job_pods_complete(cluster, namespace):
    cluster.need_local()
    batch = client.BatchV1Api(cluster.api)
    batch.create_namespaced_job(
        namespace,
        {
            "metadata": {"name": "j"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                    }
                }
            },
        },
    )
    wait_for(
        lambda: (batch.read_namespaced_job("j", namespace).status.succeeded or 0) == 1, 90, "Job succeeded"
    )


def test_hold_finalizer_keeps_a_pod_terminating_until_released(cluster, namespace):
    local = cluster.need_local()
    core = client.CoreV1Api(cluster.api)
    body = _pod("held", local.node_names()[0])
    body["metadata"]["finalizers"] = ["localcluster.dev/hold"]
    core.create_namespaced_pod(namespace, body)
    wait_for(lambda: _ready(core.read_namespaced_pod("held", namespace)), 60, "pod Ready")
    core.delete_namespaced_pod("held", namespace)
    held = wait_for(
        lambda: (p := core.read_namespaced_pod("held", namespace)).metadata.deletion_timestamp and p,
        30,
        "terminating",
    )
    assert held.metadata.finalizers == ["localcluster.dev/hold"]
    core.patch_namespaced_pod("held", namespace, {"metadata": {"finalizers": None}})
    wait_for(
        lambda: "held" not in {p.metadata.name for p in core.list_namespaced_pod(namespace).items},
        60,
        "pod removed",
    )
