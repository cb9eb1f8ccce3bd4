"""TDSet's ``spec.scaleTargetRef`` against the real API server.

Each test runs a TDSet operator watching only its namespace, as the ServiceAccount holding
exactly the CSV's rules (``tests.framework.cluster.Cluster.operator_kubeconfig``), so the
RBAC of the scale targets is the bundle's: Deployments, StatefulSets, ReplicaSets and WebServers
out of the box; another kind (a CRD with a scale subresource made by the test) only once a
ClusterRole carrying the aggregation label is added, as docs/operators/tdset-targets.md tells a cluster
admin to.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from localcluster.cluster import AUDITED_NAMESPACE
from operators.tdset import target
from operators.tdset.description import DESCRIPTION
from tests.framework.cluster import REPO, Cluster
from tests.framework.tdsets import (
    GROUP,
    PLURAL,
    VERSION,
    co,
    condition,
    create,
    events,
    get,
    patch_spec,
    wait_event,
)
from tests.framework.waits import wait_for


def spec(ref: dict[str, str], replicas: int = 4, **extra: Any) -> dict[str, Any]:
    """A TDSet spec without windows: ``replicas`` at every instant, on ``ref``."""
    return {"scaleTargetRef": ref, "schedulingConfig": [], "defaultReplica": replicas, **extra}


def ref(kind: str, name: str, api_version: str = "apps/v1") -> dict[str, str]:
    return {"apiVersion": api_version, "kind": kind, "name": name}


def workload_body(kind: str, name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
            },
        },
    }
    if kind == "StatefulSet":
        body["spec"]["serviceName"] = name
    return body


class Target:
    """One scale target in the test's namespace: made, read (replicas and claim), by kind."""

    def __init__(self, cluster: Cluster, namespace: str, kind: str, name: str = "app") -> None:
        self.cluster, self.namespace, self.kind, self.name = cluster, namespace, kind, name
        self.apps = client.AppsV1Api(cluster.api)
        self.co = client.CustomObjectsApi(cluster.api)

    @property
    def ref(self) -> dict[str, str]:
        if self.kind == "WebServer":
            return ref("WebServer", self.name, "demo.k8s.io/v1alpha1")
        return ref(self.kind, self.name)

    def create(self, replicas: int) -> Target:
        if self.kind == "WebServer":
            body = {
                "apiVersion": "demo.k8s.io/v1alpha1",
                "kind": "WebServer",
                "metadata": {"name": self.name},
            }
            self.co.create_namespaced_custom_object(
                "demo.k8s.io",
                "v1alpha1",
                self.namespace,
                "webservers",
                {**body, "spec": {"replicas": replicas}},
            )
        elif self.kind == "StatefulSet":
            self.apps.create_namespaced_stateful_set(
                self.namespace, workload_body(self.kind, self.name, replicas)
            )
        else:
            self.apps.create_namespaced_deployment(
                self.namespace, workload_body(self.kind, self.name, replicas)
            )
        return self

    def read(self) -> dict[str, Any]:
        if self.kind == "WebServer":
            return self.co.get_namespaced_custom_object(
                "demo.k8s.io", "v1alpha1", self.namespace, "webservers", self.name
            )
        read = (
            self.apps.read_namespaced_stateful_set
            if self.kind == "StatefulSet"
            else self.apps.read_namespaced_deployment
        )
        return self.apps.api_client.sanitize_for_serialization(read(self.name, self.namespace))

    def replicas(self) -> int:
        return int(self.read()["spec"].get("replicas") or 0)

    def claim(self) -> target.Claim:
        return target.claim_of(self.read())

    def becomes(self, replicas: int, what: str) -> None:
        wait_for(lambda: self.replicas() == replicas, 60, what)


@pytest.mark.parametrize("kind", ["Deployment", "StatefulSet", "WebServer"])
def test_a_target_is_claimed_scaled_and_given_back_when_the_tdset_is_deleted(
    cluster, namespace, start_tdset_operator, kind
):
    start_tdset_operator()
    app = Target(cluster, namespace, kind).create(replicas=2)
    tds = create(cluster, namespace, "sched", spec(app.ref, 4))

    app.becomes(4, f"the {kind} scaled to the schedule's 4 through /scale")
    claim = app.claim()
    assert (claim.holder, claim.holder_name, claim.original) == (tds["metadata"]["uid"], "sched", 2)
    assert not app.read()["metadata"].get("ownerReferences")  # never owned
    wait_event(cluster, namespace, "sched", "ClaimedTarget", "(2)")
    wait_event(cluster, namespace, "sched", "ScaledTarget", "from 2 to 4")
    wait_for(
        lambda: (get(cluster, namespace, "sched").get("status") or {}).get("desiredReplicas") == 4,
        60,
        "status.desiredReplicas",
    )

    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "sched")
    app.becomes(2, "the replicas given back when the TDSet is deleted")
    wait_for(lambda: app.claim().holder is None, 60, "the claim dropped")
    assert app.read()["metadata"].get("uid")  # the target itself is still there


def test_a_target_is_given_back_when_its_tdset_was_deleted_while_the_operator_was_down(
    cluster, namespace, start_tdset_operator
):
    first = start_tdset_operator()
    app = Target(cluster, namespace, "Deployment").create(replicas=1)
    create(cluster, namespace, "gone", spec(app.ref, 3))
    app.becomes(3, "scaled by the TDSet")
    first.stop()

    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gone")
    wait_for(
        lambda: not co(cluster).list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"],
        60,
        "the TDSet deleted while no operator runs",
    )
    assert app.replicas() == 3 and app.claim().holder is not None
    start_tdset_operator()
    app.becomes(1, "the restarted operator's start-up sweep gives the replicas back")
    wait_for(lambda: app.claim().holder is None, 60, "the claim dropped")


def test_pointing_at_another_target_gives_the_first_back(cluster, namespace, start_tdset_operator):
    start_tdset_operator()
    a = Target(cluster, namespace, "Deployment", "a").create(replicas=1)
    b = Target(cluster, namespace, "Deployment", "b").create(replicas=1)
    create(cluster, namespace, "mover", spec(a.ref, 3))
    a.becomes(3, "the first target scaled")
    patch_spec(cluster, namespace, "mover", {"scaleTargetRef": b.ref})
    b.becomes(3, "the second target scaled")
    a.becomes(1, "the first one given back")
    assert a.claim().holder is None


def test_a_second_tdset_on_the_same_target_is_a_conflict_not_a_tug_of_war(
    cluster, namespace, start_tdset_operator
):
    start_tdset_operator()
    app = Target(cluster, namespace, "Deployment").create(replicas=1)
    first = create(cluster, namespace, "first", spec(app.ref, 3))
    app.becomes(3, "the first TDSet scaled it")
    create(cluster, namespace, "second", spec(app.ref, 6))

    stalled = wait_for(
        lambda: (c := condition(get(cluster, namespace, "second"), "Stalled")).get("status") == "True" and c,
        60,
        "the second TDSet stalled",
    )
    assert stalled["reason"] == "TargetConflict" and "TDSet first" in stalled["message"]
    assert condition(get(cluster, namespace, "second"), "Degraded")["reason"] == "TargetConflict"
    event = wait_event(cluster, namespace, "second", "TargetConflict", "TDSet first")
    assert event.type == "Warning"
    assert app.replicas() == 3 and app.claim().holder == first["metadata"]["uid"]

    # The first lets go: the second takes the target, with the user's own replicas remembered.
    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "first")
    app.becomes(6, "the second TDSet scales it once the first is gone")
    assert app.claim().original == 1


def test_an_hpa_on_the_target_gets_the_floor_and_it_goes_back_with_the_tdset(
    cluster, namespace, start_tdset_operator
):
    start_tdset_operator()
    autoscaling = client.AutoscalingV2Api(cluster.api)
    app = Target(cluster, namespace, "StatefulSet").create(replicas=1)
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "app-hpa"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "app"},
            "minReplicas": 1,
            "maxReplicas": 10,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
                }
            ],
        },
    }
    autoscaling.create_namespaced_horizontal_pod_autoscaler(namespace, hpa)
    create(cluster, namespace, "floor", spec(app.ref, 4))

    def min_replicas() -> int:
        return int(
            autoscaling.read_namespaced_horizontal_pod_autoscaler("app-hpa", namespace).spec.min_replicas
        )

    wait_for(lambda: min_replicas() == 4, 60, "the HPA's minReplicas set to the schedule's 4")
    wait_event(cluster, namespace, "floor", "SetAutoscalerFloor", "from 1 to 4")
    wait_for(
        lambda: (get(cluster, namespace, "floor").get("status") or {}).get("autoscaler") == "app-hpa",
        60,
        "status.autoscaler",
    )
    assert not [e for e in events(cluster, namespace, "floor") if e.reason == "ScaledTarget"]

    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "floor")
    wait_for(lambda: min_replicas() == 1, 60, "the HPA's own minReplicas back")
    wait_for(lambda: app.claim().holder is None, 60, "the claim on the StatefulSet dropped")


def test_a_kind_without_scale_is_degraded_with_the_reason(cluster, namespace, start_tdset_operator):
    start_tdset_operator()
    client.CoreV1Api(cluster.api).create_namespaced_config_map(namespace, {"metadata": {"name": "cfg"}})
    create(cluster, namespace, "cm", spec(ref("ConfigMap", "cfg", "v1")))
    degraded = wait_for(
        lambda: (c := condition(get(cluster, namespace, "cm"), "Degraded")).get("status") == "True" and c,
        60,
        "Degraded",
    )
    assert degraded["reason"] == "TargetNotScalable" and "no scale subresource" in degraded["message"]
    wait_event(cluster, namespace, "cm", "TargetNotScalable")
    cm = client.CoreV1Api(cluster.api).read_namespaced_config_map("cfg", namespace)
    assert not (cm.metadata.labels or {}).get(target.HOLDER)


def test_container_and_scale_target_ref_are_exclusive_at_admission(cluster, namespace):
    both = spec(ref("Deployment", "x"), 1, container={"image": "nginx:1.27", "port": 80})
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "both", both)
    assert err.value.status == 422 and "exactly one of container" in err.value.body
    neither = {"schedulingConfig": [], "defaultReplica": 1}
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "neither", neither)
    assert err.value.status == 422 and "exactly one of container" in err.value.body


# -- a kind beyond the four: a CRD with a scale subresource, allowed through the aggregated role --


def widget_crd(group: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
            "status": {
                "type": "object",
                "properties": {"size": {"type": "integer"}, "selector": {"type": "string"}},
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.size",
                            "statusReplicasPath": ".status.size",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                }
            ],
        },
    }


def aggregated_role_of_the_install() -> dict[str, Any]:
    """deploy/install.yaml's aggregated ClusterRole, as a plain install creates it."""
    docs = yaml.safe_load_all((REPO / "deploy" / "install.yaml").read_text())
    (role,) = [
        d
        for d in docs
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == DESCRIPTION.aggregated_role
    ]
    return role


def test_a_cluster_admin_allows_another_kind_with_a_labelled_cluster_role(
    cluster, namespace, start_tdset_operator
):
    suffix = uuid.uuid4().hex[:8]
    group = f"t{suffix}.example.com"
    ext, rbac = client.ApiextensionsV1Api(cluster.api), client.RbacAuthorizationV1Api(cluster.api)
    ext.create_custom_resource_definition(widget_crd(group))
    account = f"tdset-agg-{suffix}"
    role = {**aggregated_role_of_the_install()}
    role["metadata"] = {"name": f"test:{DESCRIPTION.aggregated_role}-{suffix}"}
    # The install's role, selecting only this test's labelled roles (other tests' stay out).
    label = f"{DESCRIPTION.aggregate_label}-{suffix}"
    role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]}
    made: list[Callable[[], Any]] = []
    try:
        rbac.create_cluster_role(role)
        made.append(lambda: rbac.delete_cluster_role(role["metadata"]["name"]))
        binding = {
            "metadata": {"name": role["metadata"]["name"]},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": AUDITED_NAMESPACE}],
        }
        rbac.create_cluster_role_binding(binding)
        made.append(lambda: rbac.delete_cluster_role_binding(binding["metadata"]["name"]))
        wait_for(
            lambda: (
                any(
                    r.name == "widgets/scale"
                    for r in client.CustomObjectsApi(cluster.api).get_api_resources(group, "v1").resources
                )
                if _served(cluster, group)
                else False
            ),
            60,
            "the CRD served with its scale subresource",
        )
        start_tdset_operator(account=account)
        widgets = client.CustomObjectsApi(cluster.api)
        widgets.create_namespaced_custom_object(
            group,
            "v1",
            namespace,
            "widgets",
            {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}},
        )
        create(cluster, namespace, "wid", spec(ref("Widget", "w", f"{group}/v1"), 3))

        # Without a labelled role: refused by RBAC, and the condition says how to allow it.
        degraded = wait_for(
            lambda: (
                (c := condition(get(cluster, namespace, "wid"), "Degraded")).get("reason")
                == "TargetForbidden"
                and c
            ),
            60,
            "Degraded TargetForbidden",
        )
        assert DESCRIPTION.aggregate_label in degraded["message"]

        # What docs/operators/tdset-targets.md asks of a cluster admin: a ClusterRole with the label.
        extra = {
            "metadata": {"name": f"test:widgets-{suffix}", "labels": {label: "true"}},
            "rules": [
                {"apiGroups": [group], "resources": ["widgets"], "verbs": ["get", "patch"]},
                {"apiGroups": [group], "resources": ["widgets/scale"], "verbs": ["get", "patch"]},
            ],
        }
        rbac.create_cluster_role(extra)
        made.append(lambda: rbac.delete_cluster_role(extra["metadata"]["name"]))
        wait_for(
            lambda: (
                widgets.get_namespaced_custom_object(group, "v1", namespace, "widgets", "w")["spec"]["size"]
                == 3
            ),
            120,
            "the Widget scaled through /scale once the labelled role is aggregated",
        )
        w = widgets.get_namespaced_custom_object(group, "v1", namespace, "widgets", "w")
        assert target.claim_of(w).original == 1
    finally:
        for undo in reversed(made):
            undo()
        ext.delete_custom_resource_definition(f"widgets.{group}")


def _served(cluster: Cluster, group: str) -> bool:
    try:
        client.CustomObjectsApi(cluster.api).get_api_resources(group, "v1")
    except ApiException:
        return False
    return True


def _replica_set_of(cluster: Cluster, namespace: str, deployment: str) -> dict[str, Any]:
    """The ReplicaSet kube-controller-manager made for ``deployment`` (controller: true)."""
    apps = client.AppsV1Api(cluster.api)

    def found() -> dict[str, Any] | None:
        for rs in apps.list_namespaced_replica_set(namespace).items:
            refs = rs.metadata.owner_references or []
            if any(r.controller and r.kind == "Deployment" and r.name == deployment for r in refs):
                return apps.api_client.sanitize_for_serialization(rs)
        return None

    return wait_for(found, 60, f"the ReplicaSet of Deployment {deployment}")


def test_a_target_another_controller_holds_is_a_target_conflict_until_it_lets_go(
    cluster, namespace, start_tdset_operator
):
    """A Deployment's ReplicaSet is its Deployment's to scale: TargetConflict naming it, one
    Event, no claim and no write on the ReplicaSet; once the Deployment is deleted orphaning it
    (the garbage collector drops the owner reference) the TDSet takes it by itself."""
    start_tdset_operator()
    apps = client.AppsV1Api(cluster.api)
    apps.create_namespaced_deployment(namespace, workload_body("Deployment", "web", 2))
    rs = _replica_set_of(cluster, namespace, "web")
    rs_name = rs["metadata"]["name"]
    create(cluster, namespace, "rs", spec(ref("ReplicaSet", rs_name), 4))

    degraded = wait_for(
        lambda: (
            (c := condition(get(cluster, namespace, "rs"), "Degraded")).get("reason") == "TargetConflict"
            and c
        ),
        60,
        "TargetConflict on the ReplicaSet",
    )
    assert "Deployment web" in degraded["message"] and degraded["status"] == "True"
    event = wait_event(cluster, namespace, "rs", "TargetConflict", "Deployment web")
    assert event.type == "Warning"
    held = apps.read_namespaced_replica_set(rs_name, namespace)
    assert target.HOLDER not in (held.metadata.labels or {}) and held.spec.replicas == 2
    assert not [e for e in events(cluster, namespace, "rs") if e.reason in ("ClaimedTarget", "ScaledTarget")]
    assert [e.reason for e in events(cluster, namespace, "rs")].count("TargetConflict") == 1

    apps.delete_namespaced_deployment("web", namespace, propagation_policy="Orphan")
    wait_for(
        lambda: not apps.read_namespaced_replica_set(rs_name, namespace).metadata.owner_references,
        60,
        "the garbage collector orphans the ReplicaSet",
    )
    wait_for(
        lambda: apps.read_namespaced_replica_set(rs_name, namespace).spec.replicas == 4,
        120,
        "the TDSet scales the ReplicaSet once nothing else controls it",
    )
    assert (
        target.claim_of(
            apps.api_client.sanitize_for_serialization(apps.read_namespaced_replica_set(rs_name, namespace))
        ).original
        == 2
    )


def test_another_tdsets_own_deployment_is_a_target_conflict_and_keeps_its_replicas(
    cluster, namespace, start_tdset_operator
):
    start_tdset_operator()
    own = {"container": {"image": "nginx:1.27", "port": 80}, "schedulingConfig": [], "defaultReplica": 2}
    create(cluster, namespace, "own", own)
    apps = client.AppsV1Api(cluster.api)
    wait_for(
        lambda: apps.read_namespaced_deployment("own", namespace).spec.replicas == 2, 60, "its Deployment"
    )
    create(cluster, namespace, "thief", spec(ref("Deployment", "own"), 5))

    wait_event(cluster, namespace, "thief", "TargetConflict", "TDSet own")
    assert condition(get(cluster, namespace, "thief"), "Degraded")["reason"] == "TargetConflict"
    dep = apps.read_namespaced_deployment("own", namespace)
    assert dep.spec.replicas == 2 and target.HOLDER not in (dep.metadata.labels or {})


def test_a_tdset_replaced_under_its_name_keeps_the_users_original_replicas(
    cluster, namespace, start_tdset_operator
):
    """Deleted and re-created at once under the same name: the new TDSet finds the old claim
    (or the give-back racing it, with preconditions) and records the user's 2, not the 4 the
    first one scaled the Deployment to; deleting it gives back 2."""
    start_tdset_operator()
    app = Target(cluster, namespace, "Deployment").create(replicas=2)
    first = create(cluster, namespace, "sched", spec(app.ref, 4))
    app.becomes(4, "scaled by the first TDSet")
    api = co(cluster)
    api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "sched")
    second = wait_for(
        lambda: _create_if_gone(cluster, namespace, "sched", spec(app.ref, 4)), 60, "the TDSet re-created"
    )
    assert second["metadata"]["uid"] != first["metadata"]["uid"]

    wait_for(lambda: app.claim().holder == second["metadata"]["uid"], 60, "the new TDSet holds the target")
    assert app.claim().original == 2
    app.becomes(4, "scaled by the new TDSet (its claim and its scale are two writes)")
    api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "sched")
    app.becomes(2, "the user's original replicas given back")
    wait_for(lambda: app.claim().holder is None, 60, "the claim dropped")


def _create_if_gone(
    cluster: Cluster, namespace: str, name: str, body: dict[str, Any]
) -> dict[str, Any] | None:
    try:
        return create(cluster, namespace, name, body)
    except ApiException as exc:
        if exc.status == 409:  # the old one is still being deleted
            return None
        raise


def test_a_date_at_the_calendars_limits_is_refused_or_degraded_with_an_event(
    cluster, namespace, start_tdset_operator
):
    """Admission refuses an override past the calendar's years; the override annotation (no
    schema) ending 9999-12-31T23:00 west of UTC, which left a TDSet without any status, is
    Degraded with the reason and a Warning Event, and the calendar runs on without it."""
    start_tdset_operator()
    app = Target(cluster, namespace, "Deployment").create(replicas=1)
    far = {"name": "far", "start": "2026-01-01T00:00", "end": "9999-12-31T23:00", "replicas": 3}
    with pytest.raises(ApiException) as refused:
        create(cluster, namespace, "far", spec(app.ref, 2, timeZone="America/New_York", overrides=[far]))
    assert refused.value.status == 422 and "1970 to 2999" in refused.value.body

    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TDSet",
        "metadata": {
            "name": "edge",
            "annotations": {"tdset.k8s-operators-py.dev/override": "replicas=3,until=9999-12-31T23:00"},
        },
        "spec": spec(app.ref, 2, timeZone="America/New_York"),
    }
    co(cluster).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    # (A first pass may report a claim refused while the new Deployment's controller writes it.)
    degraded = wait_for(
        lambda: (
            (c := condition(get(cluster, namespace, "edge"), "Degraded")).get("reason")
            == "InvalidOverrideAnnotation"
            and c
        ),
        60,
        "the TDSet Degraded with InvalidOverrideAnnotation",
    )
    assert degraded["status"] == "True" and "1970 to 2999" in degraded["message"]
    assert (
        wait_event(cluster, namespace, "edge", "InvalidOverrideAnnotation", "9999-12-31T23:00").type
        == "Warning"
    )
    app.becomes(2, "the calendar runs without the annotation")
