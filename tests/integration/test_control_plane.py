"""Proof that the control plane is real, independent of our operators.

Each test exercises a behaviour that a mock of the Kubernetes API would get wrong or not have:
schema + CEL admission, Deployment -> ReplicaSet -> Pods on kwok nodes, garbage collection
through ownerReferences, optimistic concurrency (409), and RBAC (403).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.framework.cluster import Cluster
from tests.framework.waits import wait_for

GROUP = "proof.localcluster.dev"


@pytest.fixture(scope="module")
def widget_crd(cluster: Cluster) -> Iterator[str]:
    """A CRD with a structural schema and a CEL rule, unique to this test run."""
    ext = client.ApiextensionsV1Api(cluster.api)
    plural = f"widgets{uuid.uuid4().hex[:6]}"
    name = f"{plural}.{GROUP}"
    ext.create_custom_resource_definition(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": GROUP,
                "scope": "Namespaced",
                "names": {"plural": plural, "singular": plural[:-1], "kind": "Widget" + plural[7:].upper()},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "schema": {
                            "openAPIV3Schema": {
                                "type": "object",
                                "properties": {
                                    "spec": {
                                        "type": "object",
                                        "required": ["min", "max"],
                                        "properties": {
                                            "min": {"type": "integer", "minimum": 0},
                                            "max": {"type": "integer", "minimum": 0},
                                        },
                                        "x-kubernetes-validations": [
                                            {
                                                "rule": "self.min <= self.max",
                                                "message": "min must not exceed max",
                                                "fieldPath": ".min",
                                            }
                                        ],
                                    }
                                },
                            }
                        },
                    }
                ],
            },
        }
    )

    def established() -> bool:
        crd = ext.read_custom_resource_definition(name)
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])

    wait_for(established, 60, f"CRD {name} Established")
    yield plural
    ext.delete_custom_resource_definition(name)


def test_crd_schema_and_cel_reject_bad_objects_with_field_messages(cluster, namespace, widget_crd):
    co = client.CustomObjectsApi(cluster.api)
    kind = "Widget" + widget_crd[7:].upper()

    def create(spec: dict) -> None:
        body = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": "w"}, "spec": spec}
        co.create_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, body)

    with pytest.raises(ApiException) as schema_err:
        create({"min": -1, "max": 3})
    assert schema_err.value.status == 422
    assert "spec.min" in schema_err.value.body
    assert "greater than or equal to 0" in schema_err.value.body

    with pytest.raises(ApiException) as cel_err:
        create({"min": 5, "max": 3})
    assert cel_err.value.status == 422
    assert "spec.min" in cel_err.value.body and "min must not exceed max" in cel_err.value.body

    create({"min": 1, "max": 3})  # a valid object is admitted
    got = co.get_namespaced_custom_object(GROUP, "v1", namespace, widget_crd, "w")
    assert got["spec"] == {"min": 1, "max": 3}


def _deployment(name: str, replicas: int) -> dict:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def test_deployment_becomes_replicaset_and_ready_pods_then_gc_removes_them(cluster, namespace):
    local = cluster.need_local()
    apps, core = client.AppsV1Api(cluster.api), client.CoreV1Api(cluster.api)
    dep = apps.create_namespaced_deployment(namespace, _deployment("web", 3))

    rs = wait_for(
        lambda: apps.list_namespaced_replica_set(namespace, label_selector="app=web").items,
        60,
        "a ReplicaSet",
    )[0]
    assert rs.metadata.owner_references[0].uid == dep.metadata.uid
    assert rs.metadata.owner_references[0].controller is True

    def ready_pods() -> list:
        pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
        ready = [
            p
            for p in pods
            if p.status.phase == "Running"
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]
        return ready if len(ready) == 3 else []

    pods = wait_for(ready_pods, 90, "3 Ready pods")
    assert {p.spec.node_name for p in pods} <= set(local.node_names())
    assert all(p.status.pod_ip for p in pods)
    assert all(p.metadata.owner_references[0].uid == rs.metadata.uid for p in pods)
    wait_for(
        lambda: (
            (apps.read_namespaced_deployment(namespace=namespace, name="web").status.ready_replicas or 0) == 3
        ),
        60,
        "Deployment status readyReplicas=3",
    )

    # Background deletion: the owner goes at once, the garbage collector removes the children.
    apps.delete_namespaced_deployment("web", namespace, propagation_policy="Background")
    wait_for(
        lambda: not apps.list_namespaced_replica_set(namespace, label_selector="app=web").items,
        90,
        "ReplicaSet garbage-collected",
    )
    wait_for(
        lambda: not core.list_namespaced_pod(namespace, label_selector="app=web").items,
        90,
        "pods garbage-collected",
    )


def test_update_with_stale_resource_version_conflicts(cluster, namespace):
    core = client.CoreV1Api(cluster.api)
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}, "data": {"k": "1"}})
    stale = cm.metadata.resource_version
    core.replace_namespaced_config_map(
        "c", namespace, {"metadata": {"name": "c", "resourceVersion": stale}, "data": {"k": "2"}}
    )
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map(
            "c", namespace, {"metadata": {"name": "c", "resourceVersion": stale}, "data": {"k": "3"}}
        )
    assert err.value.status == 409
    assert core.read_namespaced_config_map("c", namespace).data == {"k": "2"}


def test_rbac_limits_a_service_account(cluster, namespace):
    core, rbac = client.CoreV1Api(cluster.api), client.RbacAuthorizationV1Api(cluster.api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "limited"}})
    rbac.create_namespaced_role(
        namespace,
        {
            "metadata": {"name": "read-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        },
    )
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": "limited-reads-configmaps"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
            "subjects": [{"kind": "ServiceAccount", "name": "limited", "namespace": namespace}],
        },
    )
    token = core.create_namespaced_service_account_token(
        "limited", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token

    cfg = client.Configuration()
    cfg.host = cluster.api.configuration.host
    cfg.ssl_ca_cert = cluster.api.configuration.ssl_ca_cert
    cfg.verify_ssl = cluster.api.configuration.verify_ssl
    cfg.api_key = {"authorization": f"Bearer {token}"}
    limited = client.CoreV1Api(client.ApiClient(cfg))

    # RBAC is evaluated against a cache that the new binding may not have reached yet.
    wait_for(lambda: limited.list_namespaced_config_map(namespace) is not None, 30, "the Role to take effect")
    for forbidden in (
        lambda: limited.list_namespaced_secret(namespace),
        lambda: limited.create_namespaced_config_map(namespace, {"metadata": {"name": "x"}}),
        lambda: limited.list_namespaced_config_map("default"),
    ):
        with pytest.raises(ApiException) as err:
            forbidden()
        assert err.value.status == 403
        assert "system:serviceaccount:" + namespace + ":limited" in err.value.body
