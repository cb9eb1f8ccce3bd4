"""The Netperf paths (spec.path: pod, service, host; spec.compare) against the real control plane.

As in ``test_netperf.py``, kwok runs the pods and a test finishes the client pod with output
captured from real netperf. The real API server allocates the Service's ClusterIP, enforces Pod
Security and garbage-collects; real traffic through a Service or the host network is in
``test_e2e.py`` (the real node).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.netperf import desired
from tests.framework import audit
from tests.framework.cluster import Cluster
from tests.framework.netperfs import (
    GROUP,
    PLURAL,
    VERSION,
    co,
    create,
    finish_client,
    fixture,
    in_test,
    mbits,
    no_pods_left,
    phase_is,
    pod,
    pods,
    reasons,
    scaled,
    st,
)
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for

ONE_SAMPLE = fixture("tcp_stream").split("SAMPLE=1")[0]


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("netperf-paths") / "operator.log"
    op = OperatorProcess("operators.netperf", cluster.operator_kubeconfig("netperf"), log).start()
    yield op
    op.stop()


def _services(cluster: Cluster, namespace: str) -> list[client.V1Service]:
    return (
        client.CoreV1Api(cluster.api)
        .list_namespaced_service(namespace, label_selector="app.kubernetes.io/name=netperf")
        .items
    )


def test_the_service_path_runs_through_an_owned_cluster_ip_service_removed_with_the_run(
    cluster, namespace, operator
):
    create(cluster, namespace, "svc", {"path": "service", "testType": "UDP_RR", "samples": 1})
    s = in_test(cluster, namespace, "svc")
    [svc] = _services(cluster, namespace)
    assert svc.metadata.name == "svc-server-1" and svc.spec.type == "ClusterIP"
    assert svc.metadata.owner_references[0].kind == "Netperf"
    assert svc.metadata.owner_references[0].controller is True
    assert [(p.port, p.protocol) for p in svc.spec.ports] == [(12865, "TCP"), (12866, "UDP")]
    server = pod(cluster, namespace, s["serverPod"])
    assert svc.spec.selector.items() <= server.metadata.labels.items()
    assert s["serviceIP"] == svc.spec.cluster_ip and s["serverIP"] == server.status.pod_ip
    command = pod(cluster, namespace, s["clientPod"]).spec.containers[0].command
    assert command[5:] == desired.netperf_argv({"testType": "UDP_RR"}, svc.spec.cluster_ip)
    # The Service existed before the server pod: kube-proxy can program it before the client starts.
    assert audit.created(cluster, namespace, "services") == ["svc-server-1"]
    finish_client(cluster, namespace, s["clientPod"], fixture("udp_rr").split("SAMPLE=1")[0])
    done = phase_is(cluster, namespace, "svc", "Done")
    assert done["path"] == "service" and done["transactionsPerSec"]["mean"] > 0
    no_pods_left(cluster, namespace)
    wait_for(lambda: not _services(cluster, namespace), 60, "the run's Service deleted")
    wait_for(lambda: "DeletedService" in reasons(cluster, namespace, "svc"), 30, "DeletedService Event")


def test_deleting_a_netperf_mid_run_garbage_collects_its_service(cluster, namespace, operator):
    create(cluster, namespace, "gcs", {"path": "service"})
    in_test(cluster, namespace, "gcs")
    assert _services(cluster, namespace)
    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gcs")
    wait_for(lambda: not _services(cluster, namespace) and not pods(cluster, namespace), 120, "collected")


def test_a_users_service_with_our_name_is_left_alone(cluster, namespace, operator):
    core = client.CoreV1Api(cluster.api)
    mine = core.create_namespaced_service(
        namespace,
        {"metadata": {"name": "taken-server-1"}, "spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}},
    )
    create(cluster, namespace, "taken", {"path": "service"})
    s = phase_is(cluster, namespace, "taken", "Error")
    assert s["reason"] == "ServiceConflict" and "taken-server-1" in s["message"]
    assert {c["type"]: c for c in s["conditions"]}["Degraded"]["status"] == "True"
    after = core.read_namespaced_service("taken-server-1", namespace)
    assert after.metadata.resource_version == mine.metadata.resource_version  # untouched
    assert after.metadata.owner_references is None
    assert not pods(cluster, namespace)


HOST_NODE, HOST_NODE_IP = "kwok-node-2", "10.99.7.2"


@pytest.fixture
def node_with_ip(cluster: Cluster) -> Iterator[str]:
    """A kwok node with an InternalIP, which kwok gives its hostNetwork pods as their IP (the
    local control plane's kwok nodes have none; a real node always has one). Restored after."""
    core = client.CoreV1Api(cluster.api)
    before = core.read_node(HOST_NODE).status.addresses
    core.patch_node_status(
        HOST_NODE, {"status": {"addresses": [{"type": "InternalIP", "address": HOST_NODE_IP}]}}
    )
    yield HOST_NODE
    restore = [{"type": a.type, "address": a.address} for a in before or []]
    core.patch_node_status(HOST_NODE, [{"op": "replace", "path": "/status/addresses", "value": restore}])


def test_the_host_path_runs_both_pods_host_network(cluster, namespace, operator, node_with_ip):
    create(
        cluster,
        namespace,
        "host",
        {"path": "host", "samples": 1, "serverNode": node_with_ip, "clientNode": node_with_ip},
    )
    s = in_test(cluster, namespace, "host")
    assert s["serverIP"] == HOST_NODE_IP  # the node's address: the server is on the host network
    server, client_pod = pod(cluster, namespace, s["serverPod"]), pod(cluster, namespace, s["clientPod"])
    for p in (server, client_pod):
        assert p.spec.host_network is True and p.spec.dns_policy == "ClusterFirstWithHostNet"
    assert [(p.container_port, p.host_port) for p in server.spec.containers[0].ports] == [
        (12865, 12865),
        (12866, 12866),
    ]
    env = {e.name: e.value for e in client_pod.spec.containers[0].env}
    assert env["NETPERF_DATA_PORT"] == "12866"
    finish_client(cluster, namespace, s["clientPod"], ONE_SAMPLE)
    assert phase_is(cluster, namespace, "host", "Done")["path"] == "host"
    no_pods_left(cluster, namespace)


@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_a_namespace_enforcing_baseline_or_restricted_gets_a_clear_reason_for_host(
    cluster, namespace, operator, level
):
    client.CoreV1Api(cluster.api).patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": level}}}
    )
    create(cluster, namespace, "hn", {"path": "host"})
    s = phase_is(cluster, namespace, "hn", "Error")
    assert s["reason"] == "HostNetworkForbidden" and level in s["message"], s
    conds = {c["type"]: c for c in s["conditions"]}
    assert conds["Degraded"]["status"] == "True" and conds["Degraded"]["reason"] == "HostNetworkForbidden"
    assert audit.created(cluster, namespace, "pods") == []  # refused before any pod


def test_the_host_pods_are_what_baseline_refuses(cluster, namespace):
    """The API server's own Pod Security check agrees with the operator's reading of the label."""
    core = client.CoreV1Api(cluster.api)
    core.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}
    )
    owner = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Netperf",
        "metadata": {"name": "psa", "namespace": namespace, "uid": "0d6c2e54-0000-4000-8000-000000000002"},
    }
    for manifest in (
        desired.server_pod(owner, {"path": "host"}),
        desired.client_pod(owner, {"path": "host"}, "10.0.0.1"),
    ):
        with pytest.raises(ApiException) as err:
            core.create_namespaced_pod(namespace, manifest, dry_run="All")
        assert err.value.status == 403 and "hostNetwork" in err.value.body
    for manifest in (
        desired.server_pod(owner, {"path": "service"}),
        desired.service(owner, {"path": "service"}),
    ):
        create_ = core.create_namespaced_pod if manifest["kind"] == "Pod" else core.create_namespaced_service
        create_(namespace, manifest, dry_run="All")  # the service path needs nothing beyond restricted


def test_compare_runs_each_path_once_in_order_and_reports_the_ratio(cluster, namespace, operator):
    create(cluster, namespace, "cmp", {"compare": ["pod", "service"], "samples": 1})
    first = in_test(cluster, namespace, "cmp")
    assert (first["path"], first["clientPod"]) == ("pod", "cmp-client-1-pod")
    assert not _services(cluster, namespace)
    finish_client(cluster, namespace, first["clientPod"], ONE_SAMPLE)

    wait_for(
        lambda: (s := st(cluster, namespace, "cmp")).get("path") == "service" and s.get("status") == "Test",
        60,
        "the service path in Test",
    )
    second = in_test(cluster, namespace, "cmp")
    assert second["clientPod"] == "cmp-client-1-service" and [e["path"] for e in second["paths"]] == ["pod"]
    [mbit] = mbits(ONE_SAMPLE)
    finish_client(cluster, namespace, second["clientPod"], scaled(ONE_SAMPLE, 0.5))
    done = phase_is(cluster, namespace, "cmp", "Done")
    assert [e["path"] for e in done["paths"]] == ["pod", "service"]
    assert done["ratios"]["serviceToPod"] == pytest.approx(0.5, rel=1e-3)  # (rounding to 0.01 Mbit/s)
    assert done["speedBitsPerSec"] == pytest.approx(mbit * 1e6)  # the first path's figure
    no_pods_left(cluster, namespace)
    assert audit.created(cluster, namespace, "pods") == [
        "cmp-server-1-pod",
        "cmp-client-1-pod",
        "cmp-server-1-service",
        "cmp-client-1-service",
    ]
    assert audit.created(cluster, namespace, "services") == ["cmp-server-1-service"]
    wait_for(lambda: not _services(cluster, namespace), 60, "the Service deleted")


@pytest.mark.parametrize(
    ("spec", "name", "fragments"),
    [
        ({"path": "tunnel"}, "bad", ["spec.path", "Unsupported value"]),
        (
            {"path": "pod", "compare": ["pod", "host"]},
            "bad",
            ["spec.compare", "path and compare are exclusive"],
        ),
        ({"compare": ["pod", "pod"]}, "bad", ["spec.compare", "each path at most once"]),
        ({"compare": ["pod"]}, "bad", ["spec.compare", "at least 2 items"]),
        ({"compare": ["pod", "host", "service", "pod"]}, "bad", ["spec.compare", "at most 3 items"]),
        ({"path": "service"}, "a.b", ["metadata.name"]),  # a Service's name has no dots
    ],
)
def test_invalid_paths_are_rejected_with_the_field(cluster, namespace, spec, name, fragments):
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, name, spec)
    assert err.value.status == 422
    for fragment in fragments:
        assert fragment in err.value.body, err.value.body
