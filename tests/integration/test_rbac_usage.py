"""RBAC proof, second half: every verb the CSV grants an operator is needed, and none is refused.

The operators' integration tests run each operator as its own ServiceAccount holding exactly
the CSV's rules, so a missing verb fails those tests with 403. This module proves the other
direction on its own, whatever else ran before it: per operator it starts the operator as a
ServiceAccount of its own (same rules, a unique name, so its requests can be picked out of the
local API server's audit log, ``localcluster.cluster.AUDIT_POLICY``) with leader election on,
drives a tour that makes every call the operator has a rule for (the rare paths included: a
stranger's object holding the name it wants), and compares the (API group,
resource[/subresource], verb) triples the log shows with the ones the CSV grants.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes import config as kconfig
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import AUDITED_NAMESPACE
from operators.netperf import schema as netperf_schema
from operators.tdset import schema as tdset_schema
from operators.webserver import desired as webserver_desired
from operators.webserver import schema as webserver_schema
from tests.framework import netperfs, tdsets
from tests.framework.cluster import Cluster, csv_cluster_permissions, csv_permissions
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for

Triple = tuple[str, str, str]


def config_client(kubeconfig: Path) -> client.ApiClient:
    return kconfig.new_client_from_config(
        config_file=str(kubeconfig)
    )  # (apiGroup, resource[/subresource], verb)


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


def admission_only(triple: Triple) -> bool:
    """Granted for OwnerReferencesPermissionEnforcement's checks, never called: ``update`` on
    ``<plural>/finalizers`` (blockOwnerDeletion) and ``delete`` on a Deployment (an owner
    reference set on an existing one, when a TDSet adopts it)."""
    return (triple[1].endswith("/finalizers") and triple[2] == "update") or triple[1:] == (
        "deployments",
        "delete",
    )


def recurs(cluster: Cluster, namespace: str, name: str, reason: str) -> None:
    """Wait until the Event ``reason`` about ``name`` was patched: counted twice (a pass that
    fails the same way on every retry reports it again)."""
    core = client.CoreV1Api(cluster.api)
    wait_for(
        lambda: any(
            e.reason == reason and (e.count or 1) >= 2
            for e in core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
        ),
        60,
        f"the {reason} Event about {name} patched",
    )


def webserver_tour(cluster: Cluster, namespace: str) -> None:
    co, core = client.CustomObjectsApi(cluster.api), client.CoreV1Api(cluster.api)
    args = ("demo.k8s.io", "v1alpha1", namespace, "webservers")
    body = {"apiVersion": "demo.k8s.io/v1alpha1", "kind": "WebServer", "metadata": {"name": "tour"}}
    # A referenced ConfigMap (no label): watched as metadata only, read with a get.
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "site"}, "data": {"k": "v"}})
    spec = {"replicas": 2, "service": {"enabled": True}, "envFrom": [{"configMapRef": {"name": "site"}}]}
    co.create_namespaced_custom_object(*args, {**body, "spec": spec})
    wait_for(lambda: core.read_namespaced_service("tour", namespace), 60, "Service created")
    co.patch_namespaced_custom_object(*args, "tour", {"spec": {"service": {"port": 8000}}})
    wait_for(
        lambda: core.read_namespaced_service("tour", namespace).spec.ports[0].port == 8000, 60, "patched"
    )
    # The PodDisruptionBudget (2 replicas): changed by someone, the operator puts it back (patch).
    pdbs = client.PolicyV1Api(cluster.api)
    wait_for(lambda: pdbs.list_namespaced_pod_disruption_budget(namespace).items, 60, "budget created")
    pdbs.patch_namespaced_pod_disruption_budget("tour", namespace, {"spec": {"maxUnavailable": 2}})
    wait_for(
        lambda: pdbs.read_namespaced_pod_disruption_budget("tour", namespace).spec.max_unavailable == 1,
        60,
        "budget put back",
    )
    co.patch_namespaced_custom_object(*args, "tour", {"spec": {"replicas": 0, "service": {"enabled": False}}})
    wait_for(lambda: not core.list_namespaced_service(namespace).items, 60, "Service deleted")
    wait_for(lambda: not pdbs.list_namespaced_pod_disruption_budget(namespace).items, 60, "budget deleted")
    wait_for(lambda: not core.list_namespaced_pod(namespace).items, 60, "pods deleted")
    # A stranger's Service with the name a WebServer wants: the operator reads it to tell.
    core.create_namespaced_service(namespace, STRANGER_SERVICE)
    taken = {**body, "metadata": {"name": "taken"}, "spec": {"replicas": 0, "service": {"enabled": True}}}
    co.create_namespaced_custom_object(*args, taken)
    status = lambda: co.get_namespaced_custom_object(*args, "taken").get("status") or {}  # noqa: E731
    wait_for(
        lambda: any(c["reason"] == "ServiceConflict" for c in status().get("conditions", [])),
        60,
        "ServiceConflict reported",
    )
    recurs(cluster, namespace, "taken", "ServiceConflict")  # its Event patched on every retry
    # A stranger's PodDisruptionBudget with the name: the operator reads it to tell.
    pdbs.create_namespaced_pod_disruption_budget(
        namespace,
        {
            "metadata": {"name": "pdbtaken"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"x": "y"}}},
        },
    )
    co.create_namespaced_custom_object(
        *args, {**body, "metadata": {"name": "pdbtaken"}, "spec": {"replicas": 2}}
    )
    pdb_status = lambda: co.get_namespaced_custom_object(*args, "pdbtaken").get("status") or {}  # noqa: E731
    wait_for(
        lambda: any(c["reason"] == "PodDisruptionBudgetConflict" for c in pdb_status().get("conditions", [])),
        60,
        "PodDisruptionBudgetConflict reported",
    )
    # Re-created after an orphaning delete: the pod is adopted (patch of its owner references).
    orphaned = {**body, "metadata": {"name": "orphaned"}, "spec": {"replicas": 1}}
    names = lambda: {i["metadata"]["name"] for i in co.list_namespaced_custom_object(*args)["items"]}  # noqa: E731

    def orphan_state() -> str | None:
        pods = core.list_namespaced_pod(namespace, label_selector="app=orphaned").items
        if not pods:
            return "gone"
        return "orphan" if all(not p.metadata.owner_references for p in pods) else None

    # The garbage collector orphans only the dependents its graph already holds: a pod it has
    # not seen yet when the orphaning delete ends keeps a dangling owner reference and is
    # deleted as such (seen once in a full run: no pod left to adopt). Try again until a pod
    # really is an orphan.
    for _ in range(3):
        co.create_namespaced_custom_object(*args, orphaned)
        wait_for(
            lambda: core.list_namespaced_pod(namespace, label_selector="app=orphaned").items, 60, "a pod"
        )
        co.delete_namespaced_custom_object(*args, "orphaned", body={"propagationPolicy": "Orphan"})
        wait_for(lambda: "orphaned" not in names(), 60, "WebServer deleted")
        if wait_for(orphan_state, 60, "the pod orphaned or collected") == "orphan":
            break
    else:
        pytest.fail("the garbage collector deleted the pod instead of orphaning it, three times")
    uid = co.create_namespaced_custom_object(*args, orphaned)["metadata"]["uid"]
    wait_for(
        lambda: (
            core.list_namespaced_pod(namespace, label_selector="app=orphaned")
            .items[0]
            .metadata.owner_references
        ),
        60,
        "the pod adopted",
    )
    (pod,) = core.list_namespaced_pod(namespace, label_selector="app=orphaned").items
    assert pod.metadata.owner_references[0].uid == uid
    # A stranger's pod with the name a WebServer's first pod gets: the operator reads it to tell.
    spec = {"replicas": 1}
    held = webserver_desired.pod_name("held", webserver_desired.template_hash(spec), 0)
    core.create_namespaced_pod(namespace, {"metadata": {"name": held}, "spec": STRANGER_POD_SPEC})
    co.create_namespaced_custom_object(*args, {**body, "metadata": {"name": "held"}, "spec": spec})
    held_status = lambda: co.get_namespaced_custom_object(*args, "held").get("status") or {}  # noqa: E731
    wait_for(
        lambda: any(held in c["message"] for c in held_status().get("conditions", [])),
        60,
        "the held name reported",
    )


STRANGER_POD_SPEC = {"containers": [{"name": "c", "image": "busybox"}]}


STRANGER_SERVICE = {
    "metadata": {"name": "taken"},
    "spec": {"selector": {"app": "mine"}, "ports": [{"port": 9000}]},
}


def tdset_tour(cluster: Cluster, namespace: str) -> None:
    core, autoscaling = client.CoreV1Api(cluster.api), client.AutoscalingV2Api(cluster.api)
    # A holidays ConfigMap (no label): watched as metadata only, read with a get.
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "days-off"}, "data": {"d": "2020-01-01"}}
    )
    spec = {
        **tdsets.steady(2, service={"port": 80}),
        "holidays": {"configMapRef": {"name": "days-off"}, "replicas": 1},
    }
    tdsets.create(cluster, namespace, "tour", spec)
    tdsets.replicas_become(cluster, namespace, "tour", 2, "Deployment created")
    wait_for(lambda: core.read_namespaced_service("tour", namespace), 60, "Service created")
    tdsets.patch_spec(cluster, namespace, "tour", {"service": {"port": 8000}})
    wait_for(
        lambda: core.read_namespaced_service("tour", namespace).spec.ports[0].port == 8000, 60, "patched"
    )
    tdsets.patch_spec(cluster, namespace, "tour", {"container": {"image": "nginx:1.28", "port": 80}})
    tdsets.wait_event(cluster, namespace, "tour", "UpdatedDeployment", "nginx:1.28")
    autoscaling.create_namespaced_horizontal_pod_autoscaler(namespace, tdsets.hpa("tour", "tour", 1, 10))
    floor = lambda: autoscaling.read_namespaced_horizontal_pod_autoscaler("tour", namespace).spec.min_replicas  # noqa: E731
    wait_for(lambda: floor() == 2, 60, "HPA floor patched")
    tdsets.patch_spec(cluster, namespace, "tour", {"service": None})
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
    tdsets.create(cluster, namespace, "taken", tdsets.steady(1))
    tdsets.wait_event(cluster, namespace, "taken", "DeploymentConflict")
    recurs(cluster, namespace, "taken", "DeploymentConflict")  # its Event patched on every retry
    # And a stranger's Service: read after AlreadyExists, reported, left alone.
    core.create_namespaced_service(namespace, {**STRANGER_SERVICE, "metadata": {"name": "svc-taken"}})
    tdsets.create(cluster, namespace, "svc-taken", tdsets.steady(1, service={"port": 80}))
    tdsets.wait_event(cluster, namespace, "svc-taken", "ServiceConflict")
    # A TDSet on a workload of each kind supported out of the box: the target and its /scale
    # read, the claim patched, /scale patched (the start-up sweep listed each kind already).
    apps, co = client.AppsV1Api(cluster.api), client.CustomObjectsApi(cluster.api)
    labels = {"app": "target"}
    workload = {
        "metadata": {"name": "target"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    apps.create_namespaced_deployment(namespace, workload)
    apps.create_namespaced_stateful_set(
        namespace, {**workload, "spec": {**workload["spec"], "serviceName": "t"}}
    )
    apps.create_namespaced_replica_set(namespace, workload)
    ws = {"apiVersion": "demo.k8s.io/v1alpha1", "kind": "WebServer", "metadata": {"name": "target"}}
    co.create_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", namespace, "webservers", {**ws, "spec": {"replicas": 1}}
    )
    kinds = {
        "Deployment": "apps/v1",
        "StatefulSet": "apps/v1",
        "ReplicaSet": "apps/v1",
        "WebServer": "demo.k8s.io/v1alpha1",
    }
    for kind, api_version in kinds.items():
        ref = {"apiVersion": api_version, "kind": kind, "name": "target"}
        spec = {"scaleTargetRef": ref, "schedulingConfig": [], "defaultReplica": 2}
        tdsets.create(cluster, namespace, f"on-{kind.lower()}", spec)
        tdsets.wait_event(cluster, namespace, f"on-{kind.lower()}", "ScaledTarget", "from 1 to 2")


def netperf_tour(cluster: Cluster, namespace: str) -> None:
    core = client.CoreV1Api(cluster.api)
    netperfs.create(cluster, namespace, "tour", {"samples": 3})
    s = netperfs.in_test(cluster, namespace, "tour")
    netperfs.finish_client(cluster, namespace, s["clientPod"], netperfs.fixture("tcp_stream"))
    netperfs.phase_is(cluster, namespace, "tour", "Done")
    netperfs.no_pods_left(cluster, namespace)
    # Re-created after an orphaning delete: the old run's pods are adopted (patch), then deleted.
    co, args = client.CustomObjectsApi(cluster.api), (netperfs.GROUP, netperfs.VERSION, namespace)
    netperfs.create(cluster, namespace, "orphaned", {"samples": 3})
    netperfs.in_test(cluster, namespace, "orphaned")
    co.delete_namespaced_custom_object(
        *args, netperfs.PLURAL, "orphaned", body={"propagationPolicy": "Orphan"}
    )
    wait_for(
        lambda: all(
            i["metadata"]["name"] != "orphaned"
            for i in co.list_namespaced_custom_object(*args, netperfs.PLURAL)["items"]
        ),
        60,
        "Netperf deleted",
    )
    uid = netperfs.create(cluster, namespace, "orphaned", {"samples": 3})["metadata"]["uid"]
    s = netperfs.in_test(cluster, namespace, "orphaned")
    refs = core.read_namespaced_pod(s["clientPod"], namespace).metadata.owner_references
    assert refs[0].uid == uid
    # A stranger's pod holding the server pod's name: the operator reads it after AlreadyExists.
    stranger = {
        "metadata": {"name": "taken-server-1"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "kwok-node-2"},
    }
    core.create_namespaced_pod(namespace, stranger)
    netperfs.create(cluster, namespace, "taken", {})
    assert netperfs.phase_is(cluster, namespace, "taken", "Error")["reason"] == "PodConflict"
    # The service path: its Service created, and deleted with the run.
    netperfs.create(cluster, namespace, "svc", {"path": "service", "samples": 1})
    s = netperfs.in_test(cluster, namespace, "svc")
    netperfs.finish_client(
        cluster, namespace, s["clientPod"], netperfs.fixture("tcp_stream").split("SAMPLE=1")[0]
    )
    netperfs.phase_is(cluster, namespace, "svc", "Done")
    # A stranger's Service holding the run's Service name: read after AlreadyExists, left alone.
    core.create_namespaced_service(
        namespace, {"metadata": {"name": "svc-taken-server-1"}, "spec": {"ports": [{"port": 80}]}}
    )
    netperfs.create(cluster, namespace, "svc-taken", {"path": "service"})
    assert netperfs.phase_is(cluster, namespace, "svc-taken", "Error")["reason"] == "ServiceConflict"
    # A pod holding the server pod's name, still controlled by a deleted Netperf of the same
    # name: the Netperf waits for it, reporting so on every retry (its Event patched). The pod
    # stays (a finalizer; never scheduled) until the tour lets it go.
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {
                "name": "waiting-server-1",
                "finalizers": ["test.k8s-operators-py.dev/hold"],
                "ownerReferences": [
                    {
                        "apiVersion": f"{netperfs.GROUP}/{netperfs.VERSION}",
                        "kind": "Netperf",
                        "name": "waiting",
                        "uid": str(uuid.uuid4()),
                        "controller": True,
                    }
                ],
            },
            "spec": {**STRANGER_POD_SPEC, "schedulingGates": [{"name": "test.k8s-operators-py.dev/hold"}]},
        },
    )
    netperfs.create(cluster, namespace, "waiting", {})
    recurs(cluster, namespace, "waiting", "WaitingForPodName")
    core.patch_namespaced_pod("waiting-server-1", namespace, {"metadata": {"finalizers": None}})
    with contextlib.suppress(ApiException):
        core.delete_namespaced_pod("waiting-server-1", namespace)
    # The host path reads the namespace's Pod Security label first (get on namespaces).
    core.patch_namespace(
        namespace, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}
    )
    netperfs.create(cluster, namespace, "host", {"path": "host"})
    assert netperfs.phase_is(cluster, namespace, "host", "Error")["reason"] == "HostNetworkForbidden"


TOURS: dict[str, Callable[[Cluster, str], None]] = {
    "netperf": netperf_tour,
    "tdset": tdset_tour,
    "webserver": webserver_tour,
}


@pytest.mark.parametrize("operator", sorted(TOURS))
def test_every_granted_verb_is_used_and_none_is_refused(cluster, namespace, operator, tmp_path: Path):
    account = f"rbac-{operator}-{uuid.uuid4().hex[:6]}"
    kubeconfig = cluster.operator_kubeconfig(operator, account=account)
    # Leader election on, as the bundle runs it: the Lease's create, get and update are used too
    # (in the watched namespace, the default on a host).
    process = OperatorProcess(
        f"operators.{operator}",
        kubeconfig,
        tmp_path / "operator.log",
        namespaces=namespace,
        env={"LEADER_ELECT": "true"},
        metrics_token=cluster.metrics_reader_token(),
    )
    process.start()
    try:
        TOURS[operator](cluster, namespace)
        # A scrape: the /metrics filter's TokenReview and SubjectAccessReview (cluster permissions).
        process.metrics()
        # ``<plural>/finalizers`` is never called: admission checks it (see the test below).
        rules = [
            *csv_permissions()[f"{operator}-operator"],
            *csv_cluster_permissions()[f"{operator}-operator"],
        ]
        want = {t for t in granted(rules) if not admission_only(t)}
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


SCHEMAS = {"netperf": netperf_schema, "tdset": tdset_schema, "webserver": webserver_schema}
EMPTY_SPECS: dict[str, dict[str, Any]] = {
    "netperf": {},
    "tdset": tdsets.steady(1),
    "webserver": {"replicas": 0},
}


@pytest.mark.parametrize("operator", sorted(TOURS))
def test_the_finalizers_rule_is_what_lets_children_block_owner_deletion(cluster, namespace, operator):
    """The local API server enforces owner references as OpenShift does.

    With OwnerReferencesPermissionEnforcement on, a child whose owner reference sets
    ``blockOwnerDeletion`` is admitted only when its creator may update the owner's
    ``finalizers``: the operator's rules without that one are refused, with it admitted.
    """
    schema = SCHEMAS[operator]
    rules = csv_permissions()[f"{operator}-operator"]
    (finalizers,) = [r for r in rules if r["resources"] == [f"{schema.PLURAL}/finalizers"]]
    owner = client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        schema.GROUP,
        schema.VERSION,
        namespace,
        schema.PLURAL,
        {
            "apiVersion": f"{schema.GROUP}/{schema.VERSION}",
            "kind": schema.KIND,
            "metadata": {"name": "owner"},
            "spec": EMPTY_SPECS[operator],
        },
    )
    ref = {
        "apiVersion": f"{schema.GROUP}/{schema.VERSION}",
        "kind": schema.KIND,
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }

    def create_child(api: client.CoreV1Api) -> tuple[int, str]:
        """A child of a kind the operator may create: a Service for TDSet, else a pod."""
        meta = {"name": f"child-{uuid.uuid4().hex[:6]}", "ownerReferences": [ref]}
        try:
            if operator == "tdset":
                api.create_namespaced_service(
                    namespace, {"metadata": meta, "spec": {"ports": [{"port": 80}]}}
                )
            else:
                api.create_namespaced_pod(
                    namespace, {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
                )
        except ApiException as exc:
            return exc.status, str(exc.body)
        return 201, ""

    rbac = client.RbacAuthorizationV1Api(cluster.api)
    stripped = f"nofin-{operator}-{uuid.uuid4().hex[:6]}"
    # The role exists, without the finalizers rule, before the account is bound to it.
    rbac.create_cluster_role(
        {"metadata": {"name": f"test:{stripped}"}, "rules": [r for r in rules if r is not finalizers]}
    )
    full = client.CoreV1Api(config_client(cluster.operator_kubeconfig(operator, account=f"fin-{stripped}")))
    without = client.CoreV1Api(config_client(cluster.operator_kubeconfig(operator, account=stripped)))
    # RBAC bindings reach the authorizer's cache shortly after they are made: poll.
    wait_for(lambda: create_child(full)[0] == 201, 30, "a child created with the CSV's rules")
    status, message = wait_for(
        lambda: r if "blockOwnerDeletion" in (r := create_child(without))[1] else None,
        30,
        "the child refused by admission",
    )
    assert status == 403 and "cannot set blockOwnerDeletion" in message, (status, message)
