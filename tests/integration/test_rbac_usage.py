"""RBAC proof, second half: every verb the CSV grants an operator is needed, and none is refused.

The operators' integration tests run each operator as its own ServiceAccount holding exactly
the CSV's rules, so a missing verb fails those tests with 403. This module proves the other
direction on its own, whatever else ran before it: per operator it starts the operator as a
ServiceAccount of its own (same rules, a unique name, so its requests can be picked out of the
local API server's audit log, ``localcluster.cluster.AUDIT_POLICY``), drives a tour that makes
every call the operator has a rule for (the rare paths included: a stranger's object holding
the name it wants), and compares the (API group, resource[/subresource], verb) triples the log
shows with the ones the CSV grants.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from localcluster.cluster import AUDITED_NAMESPACE
from tests.helpers import wait_for
from tests.integration import test_netperf, test_tdset
from tests.integration.conftest import Cluster, csv_permissions
from tests.integration.operator_process import OperatorProcess

Triple = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def granted(rules: list[dict[str, Any]]) -> set[Triple]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def observed(cluster: Cluster, account: str) -> tuple[set[Triple], list[dict[str, Any]]]:
    """Triples ``account`` used, and its requests RBAC refused."""
    used: set[Triple] = set()
    refused = []
    user = f"system:serviceaccount:{AUDITED_NAMESPACE}:{account}"
    for line in cluster.need_local().audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef")
        if event.get("user", {}).get("username") != user or ref is None:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        # RBAC's own verdict; a 403 can also mean "namespace is being terminated" (test teardown).
        if event.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid":
            refused.append(event)
            continue
        used.add((ref.get("apiGroup", ""), resource, event["verb"]))
    return used, refused


def webserver_tour(cluster: Cluster, namespace: str) -> None:
    co, core = client.CustomObjectsApi(cluster.api), client.CoreV1Api(cluster.api)
    args = ("demo.k8s.io", "v1alpha1", namespace, "webservers")
    body = {"apiVersion": "demo.k8s.io/v1alpha1", "kind": "WebServer", "metadata": {"name": "tour"}}
    co.create_namespaced_custom_object(*args, {**body, "spec": {"replicas": 2, "service": {"enabled": True}}})
    wait_for(lambda: core.read_namespaced_service("tour", namespace), 60, "Service created")
    co.patch_namespaced_custom_object(*args, "tour", {"spec": {"service": {"port": 8000}}})
    wait_for(
        lambda: core.read_namespaced_service("tour", namespace).spec.ports[0].port == 8000, 60, "patched"
    )
    co.patch_namespaced_custom_object(*args, "tour", {"spec": {"replicas": 0, "service": {"enabled": False}}})
    wait_for(lambda: not core.list_namespaced_service(namespace).items, 60, "Service deleted")
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, 60, "pods deleted")


def tdset_tour(cluster: Cluster, namespace: str) -> None:
    core, autoscaling = client.CoreV1Api(cluster.api), client.AutoscalingV2Api(cluster.api)
    test_tdset.create(cluster, namespace, "tour", test_tdset.steady(2, service={"port": 80}))
    test_tdset.replicas_become(cluster, namespace, "tour", 2, "Deployment created")
    wait_for(lambda: core.read_namespaced_service("tour", namespace), 60, "Service created")
    test_tdset.patch_spec(cluster, namespace, "tour", {"service": {"port": 8000}})
    wait_for(
        lambda: core.read_namespaced_service("tour", namespace).spec.ports[0].port == 8000, 60, "patched"
    )
    test_tdset.patch_spec(cluster, namespace, "tour", {"container": {"image": "nginx:1.28", "port": 80}})
    test_tdset.wait_event(cluster, namespace, "tour", "UpdatedDeployment", "nginx:1.28")
    autoscaling.create_namespaced_horizontal_pod_autoscaler(namespace, test_tdset.hpa("tour", "tour", 1, 10))
    floor = lambda: autoscaling.read_namespaced_horizontal_pod_autoscaler("tour", namespace).spec.min_replicas  # noqa: E731
    wait_for(lambda: floor() == 2, 60, "HPA floor patched")
    test_tdset.patch_spec(cluster, namespace, "tour", {"service": None})
    wait_for(lambda: not core.list_namespaced_service(namespace).items, 60, "Service deleted")
    # A stranger's Deployment with the name a TDSet wants: the operator reads it to tell.
    client.AppsV1Api(cluster.api).create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "taken"},
            "spec": {
                "selector": {"matchLabels": {"app": "mine"}},
                "template": {
                    "metadata": {"labels": {"app": "mine"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        },
    )
    test_tdset.create(cluster, namespace, "taken", test_tdset.steady(1))
    test_tdset.wait_event(cluster, namespace, "taken", "DeploymentConflict")


def netperf_tour(cluster: Cluster, namespace: str) -> None:
    core = client.CoreV1Api(cluster.api)
    test_netperf.create(cluster, namespace, "tour", {"samples": 3})
    s = test_netperf.in_test(cluster, namespace, "tour")
    test_netperf.finish_client(cluster, namespace, s["clientPod"], test_netperf.fixture("tcp_stream"))
    test_netperf.phase_is(cluster, namespace, "tour", "Done")
    test_netperf.no_pods_left(cluster, namespace)
    # A stranger's pod holding the server pod's name: the operator reads it after AlreadyExists.
    stranger = {
        "metadata": {"name": "taken-server-1"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "kwok-node-2"},
    }
    core.create_namespaced_pod(namespace, stranger)
    test_netperf.create(cluster, namespace, "taken", {})
    assert test_netperf.phase_is(cluster, namespace, "taken", "Error")["reason"] == "PodConflict"


TOURS: dict[str, Callable[[Cluster, str], None]] = {
    "netperf": netperf_tour,
    "tdset": tdset_tour,
    "webserver": webserver_tour,
}


@pytest.mark.parametrize("operator", sorted(TOURS))
def test_every_granted_verb_is_used_and_none_is_refused(cluster, namespace, operator, tmp_path: Path):
    account = f"rbac-{operator}-{uuid.uuid4().hex[:6]}"
    kubeconfig = cluster.operator_kubeconfig(operator, account=account)
    process = OperatorProcess(
        f"operators.{operator}", kubeconfig, tmp_path / "operator.log", namespaces=namespace
    )
    process.start()
    try:
        TOURS[operator](cluster, namespace)
        want = granted(csv_permissions()[f"{operator}-operator"])
        # The audit log is written as requests complete: poll until every grant shows up.
        try:
            wait_for(lambda: observed(cluster, account)[0] >= want, 30, "every granted verb used")
        except AssertionError:
            pytest.fail(f"{operator}: granted but never used: {sorted(want - observed(cluster, account)[0])}")
    finally:
        process.stop()
    used, refused = observed(cluster, account)
    assert not refused, [(e["verb"], e["objectRef"]) for e in refused[:5]]
    assert used == want, f"used but not granted: {sorted(used - want)}"
