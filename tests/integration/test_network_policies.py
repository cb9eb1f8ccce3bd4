"""The operators' NetworkPolicies on the real API server: accepted, and selecting the operator pods.

What is checked is what an API server can prove: the policies ``make bundle`` renders are valid
objects, stored as written, their pod selectors pick exactly the pods the operator
Deployments make (and none of the pods the operators create for their users), and the
namespace selector of the metrics port picks exactly the monitoring namespace, by a label no
other namespace can be given. Enforcement is
the CNI's: the local real node's bridge plugin does not enforce NetworkPolicy at all, so no test
here can show a connection refused (docs/operations/install.md says so).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from localcluster.kube import kubectl
from operators.webserver import desired as webserver_desired
from tests.framework.cluster import REPO, SCRAPERS_NAMESPACE, Cluster
from tests.framework.waits import wait_for
from tools.generate import bundle
from tools.generate.bundle import OPERATOR_REPLICAS

INSTALL = REPO / "deploy" / "install.yaml"
POLICIES = REPO / "deploy" / "network-policies.yaml"


def install_docs(*kinds: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(INSTALL.read_text()) if d and d["kind"] in kinds]


def into(namespace: str, docs: list[dict[str, Any]], path: Path) -> Path:
    """``docs`` moved from install.yaml's namespace into ``namespace``, written to ``path``."""
    moved = copy.deepcopy(docs)
    for d in moved:
        d["metadata"]["namespace"] = namespace
    path.write_text(yaml.safe_dump_all(moved))
    return path


def stored_policies(cluster: Cluster, namespace: str) -> dict[str, dict[str, Any]]:
    items = client.NetworkingV1Api(cluster.api).list_namespaced_network_policy(namespace).items
    return {p.metadata.name: cluster.api.sanitize_for_serialization(p) for p in items}


def selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def deployment_of(cluster: Cluster, namespace: str, pod: client.V1Pod) -> str | None:
    """The Deployment whose ReplicaSet controls ``pod``, as the controllers recorded it."""
    refs = [r for r in pod.metadata.owner_references or [] if r.controller and r.kind == "ReplicaSet"]
    if not refs:
        return None
    rs = client.AppsV1Api(cluster.api).read_namespaced_replica_set(refs[0].name, namespace)
    (dep_ref,) = [r for r in rs.metadata.owner_references or [] if r.controller]
    return str(dep_ref.name)


def test_install_yaml_policies_are_accepted_and_select_exactly_the_operator_pods(
    cluster, namespace, tmp_path
):
    policies = install_docs("NetworkPolicy")
    assert len(policies) == 3
    # The operators as install.yaml makes them (their pods run on the kwok nodes), their
    # NetworkPolicies applied server-side, not dry-run, and a WebServer pod beside them.
    kubectl(
        cluster.kubeconfig,
        "apply",
        "--server-side",
        "-f",
        str(
            into(
                namespace, install_docs("ServiceAccount", "Deployment", "NetworkPolicy"), tmp_path / "x.yaml"
            )
        ),
    )
    owner = {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": "web", "uid": "u"},
    }
    web_pod = webserver_desired.pod_manifest(owner, {"replicas": 1}, 0)
    web_pod["metadata"].pop("ownerReferences")  # no such WebServer: only its labels matter here
    client.CoreV1Api(cluster.api).create_namespaced_pod(namespace, web_pod)

    stored = stored_policies(cluster, namespace)
    assert set(stored) == {p["metadata"]["name"] for p in policies}
    for policy in policies:
        assert stored[policy["metadata"]["name"]]["spec"] == policy["spec"]

    core = client.CoreV1Api(cluster.api)

    def operator_pods() -> dict[str, set[str]] | None:
        by_deployment: dict[str, set[str]] = {}
        for pod in core.list_namespaced_pod(namespace).items:
            if pod.metadata.deletion_timestamp is None and (dep := deployment_of(cluster, namespace, pod)):
                by_deployment.setdefault(dep, set()).add(pod.metadata.name)
        complete = len(by_deployment) == 3 and all(
            len(p) == OPERATOR_REPLICAS for p in by_deployment.values()
        )
        return by_deployment if complete else None

    pods = wait_for(operator_pods, 60, "two pods of each operator Deployment")
    for name, policy in stored.items():
        # The API server's own label selection: this Deployment's pods, nobody else's.
        chosen = core.list_namespaced_pod(
            namespace, label_selector=selector(policy["spec"]["podSelector"]["matchLabels"])
        )
        assert {p.metadata.name for p in chosen.items} == pods[name], name


def test_the_olm_users_command_creates_the_same_policies(cluster, namespace):
    """``kubectl apply -n <namespace> -f deploy/network-policies.yaml``, as
    docs/operations/install.md tells OLM users (whose bundle does not carry the policies)."""
    kubectl(cluster.kubeconfig, "apply", "-n", namespace, "-f", str(POLICIES))
    stored = stored_policies(cluster, namespace)
    rendered = {p["metadata"]["name"]: p for p in install_docs("NetworkPolicy")}
    assert set(stored) == set(rendered)
    for name, policy in rendered.items():
        assert stored[name]["spec"] == policy["spec"]
        assert stored[name]["metadata"]["namespace"] == namespace


def namespaces_selected(cluster: Cluster, policy: dict[str, Any]) -> set[str]:
    """The namespaces whose pods the policy's metrics rule admits, as the API server selects them."""
    core = client.CoreV1Api(cluster.api)
    metrics_rule = policy["spec"]["ingress"][0]
    assert [p["port"] for p in metrics_rule["ports"]] == [bundle.DEFAULT_METRICS_PORT]
    chosen: set[str] = set()
    for peer in metrics_rule["from"]:
        assert set(peer) == {"namespaceSelector"}  # whole namespaces: no pod selector
        labels = peer["namespaceSelector"]["matchLabels"]
        chosen |= {n.metadata.name for n in core.list_namespace(label_selector=selector(labels)).items}
    return chosen


def test_metrics_are_admitted_from_the_monitoring_namespace_alone_and_probes_from_anywhere(
    cluster, namespace
):
    """Of every namespace of the cluster (the tests' tenants', the operators' own, kube-system),
    the shipped policies' metrics rule selects the monitoring namespace only; the probe rule
    names no source (the kubelet connects from the node's address)."""
    core = client.CoreV1Api(cluster.api)
    for name in (SCRAPERS_NAMESPACE, "openshift-monitoring", "openshift-user-workload-monitoring"):
        try:
            core.create_namespace({"metadata": {"name": name}})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    everything = {n.metadata.name for n in core.list_namespace().items}
    assert {namespace, "kube-system", SCRAPERS_NAMESPACE} <= everything
    for policy in install_docs("NetworkPolicy"):
        assert namespaces_selected(cluster, policy) == {SCRAPERS_NAMESPACE}
        assert policy["spec"]["ingress"][1] == {
            "ports": [{"port": bundle.DEFAULT_PROBE_PORT, "protocol": "TCP"}]
        }
    # OpenShift's two monitoring stacks, with the generator's option: exactly those two.
    openshift = ("openshift-monitoring", "openshift-user-workload-monitoring")
    for op in bundle.descriptions():
        policy = bundle.network_policy(op, openshift)
        created = client.NetworkingV1Api(cluster.api).create_namespaced_network_policy(namespace, policy)
        assert cluster.api.sanitize_for_serialization(created)["spec"] == policy["spec"]
        assert namespaces_selected(cluster, policy) == set(openshift)


def test_no_tenant_namespace_can_be_made_to_look_like_the_monitoring_namespace(cluster, namespace):
    """The selector's label, ``kubernetes.io/metadata.name``, is the API server's: written as
    the namespace's name on every create and update, whatever the request says. A namespace
    labelled ``metrics: enabled`` (kubebuilder's sample policy) would be anyone's with
    ``patch`` on namespaces."""
    core = client.CoreV1Api(cluster.api)
    try:  # the namespace the policy selects, as in any test order
        core.create_namespace({"metadata": {"name": SCRAPERS_NAMESPACE}})
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    label = {bundle.NAMESPACE_NAME_LABEL: SCRAPERS_NAMESPACE}
    impostor = f"{namespace}-impostor"
    core.create_namespace({"metadata": {"name": impostor, "labels": label}})
    try:
        stored = core.read_namespace(impostor).metadata.labels
        assert stored[bundle.NAMESPACE_NAME_LABEL] == impostor
        core.patch_namespace(impostor, {"metadata": {"labels": label}})
        assert core.read_namespace(impostor).metadata.labels[bundle.NAMESPACE_NAME_LABEL] == impostor
        core.patch_namespace(namespace, {"metadata": {"labels": label}})
        assert core.read_namespace(namespace).metadata.labels[bundle.NAMESPACE_NAME_LABEL] == namespace
        (policy, *_) = install_docs("NetworkPolicy")
        assert namespaces_selected(cluster, policy) == {SCRAPERS_NAMESPACE}
    finally:
        core.delete_namespace(impostor)
