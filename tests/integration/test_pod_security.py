"""PSA proof: in a namespace enforcing the ``restricted`` Pod Security Standard, the operator
Deployments' pod templates are admitted, and so are the pods the operators create.

(Netperf's pods are checked in test_netperf; WebServer pods need ``spec.runAsUser`` and TDSet
pods ``spec.container.runAsUser`` with a non-root image on a port >= 1024 there, and without it
they are refused with PSA's message.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.framework.cluster import CSV, Cluster
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for

ENFORCE = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}


@pytest.fixture
def restricted(cluster: Cluster, namespace: str) -> str:
    client.CoreV1Api(cluster.api).patch_namespace(namespace, {"metadata": {"labels": ENFORCE}})
    return namespace


@pytest.fixture
def webserver_operator(cluster: Cluster, restricted: str, tmp_path) -> Iterator[OperatorProcess]:
    op = OperatorProcess(
        "operators.webserver",
        cluster.operator_kubeconfig("webserver"),
        tmp_path / "op.log",
        namespaces=restricted,
    ).start()
    yield op
    op.stop()


def test_operator_pod_templates_are_admitted(cluster, restricted):
    core = client.CoreV1Api(cluster.api)
    deployments = yaml.safe_load(CSV.read_text())["spec"]["install"]["spec"]["deployments"]
    assert len(deployments) == 3
    for d in deployments:
        template = d["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": d["name"], **template["metadata"]},
            "spec": template["spec"],
        }
        pod["spec"] = {**pod["spec"], "serviceAccountName": "default"}  # the account is OLM's to create
        core.create_namespaced_pod(restricted, pod, dry_run="All")
    # The check bites: the same template with privilege escalation allowed is refused.
    bad = deployments[0]["spec"]["template"]
    container = {**bad["spec"]["containers"][0], "securityContext": {"allowPrivilegeEscalation": True}}
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(
            restricted,
            {
                "metadata": {"name": "bad"},
                "spec": {**bad["spec"], "serviceAccountName": "default", "containers": [container]},
            },
            dry_run="All",
        )
    assert err.value.status == 403 and "allowPrivilegeEscalation" in err.value.body


def webserver(cluster: Cluster, namespace: str, name: str, spec: dict) -> None:
    body = {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": name},
        "spec": spec,
    }
    client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", namespace, "webservers", body
    )


def status(cluster: Cluster, namespace: str, name: str) -> dict:
    obj = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", namespace, "webservers", name
    )
    return obj.get("status") or {}


def test_webserver_pods_with_run_as_user_are_admitted_and_without_are_refused(
    cluster, restricted, webserver_operator
):
    webserver(
        cluster,
        restricted,
        "unprivileged",
        {"replicas": 2, "image": "nginxinc/nginx-unprivileged:1.27", "port": 8080, "runAsUser": 101},
    )
    wait_for(
        lambda: status(cluster, restricted, "unprivileged").get("readyReplicas") == 2,
        90,
        "2 restricted pods ready",
    )

    webserver(cluster, restricted, "rooted", {"replicas": 1})

    def refused() -> dict | None:
        conds = {c["type"]: c for c in status(cluster, restricted, "rooted").get("conditions") or []}
        c = conds.get("ReplicaFailure")
        return c if c and c["status"] == "True" else None

    cond = wait_for(refused, 60, "ReplicaFailure from PodSecurity")
    assert "violates PodSecurity" in cond["message"] and "restricted" in cond["message"]


@pytest.fixture
def tdset_operator(cluster: Cluster, restricted: str, tmp_path) -> Iterator[OperatorProcess]:
    op = OperatorProcess(
        "operators.tdset", cluster.operator_kubeconfig("tdset"), tmp_path / "tdset.log", namespaces=restricted
    ).start()
    yield op
    op.stop()


def test_tdset_pods_with_run_as_user_are_admitted_and_without_are_refused(
    cluster, restricted, tdset_operator
):
    """The TDSet's Deployment makes restricted pods when ``container.runAsUser`` is set."""
    apps = client.AppsV1Api(cluster.api)

    def tdset(name: str, container: dict) -> None:
        body = {
            "apiVersion": "schedule.rs/v1",
            "kind": "TDSet",
            "metadata": {"name": name},
            "spec": {"container": container, "defaultReplica": 2, "schedulingConfig": []},
        }
        client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
            "schedule.rs", "v1", restricted, "tdsets", body
        )

    tdset("unprivileged", {"image": "nginxinc/nginx-unprivileged:1.27", "port": 8080, "runAsUser": 101})
    wait_for(
        lambda: apps.read_namespaced_deployment("unprivileged", restricted).status.ready_replicas == 2,
        90,
        "2 restricted pods ready",
    )
    tdset("rooted", {"image": "nginx:1.27", "port": 80})

    def refused() -> str | None:
        events = client.CoreV1Api(cluster.api).list_namespaced_event(restricted).items
        return next(
            (
                e.message
                for e in events
                if e.reason == "FailedCreate" and e.involved_object.name.startswith("rooted-")
            ),
            None,
        )

    # The ReplicaSet controller is refused by PodSecurity, as it would be for any Deployment.
    assert "violates PodSecurity" in wait_for(refused, 60, "the ReplicaSet's FailedCreate")
