"""localcluster.olmv1's pure parts: the installer RBAC, registries.conf, the Deployment patches.

The installer ServiceAccount of OLM <= 1.10 must be able to create every object operator-controller
renders for the bundle and to grant every rule those objects grant; the integration test proves
it against the API server (server-side dry run as that ServiceAccount), these pin the shape.
"""

from __future__ import annotations

import copy
import tomllib
from typing import Any

import pytest

from localcluster import olmv1, signing

RENDERED: list[dict[str, Any]] = [
    {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "a.b"},
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "op"},
        "rules": [{"apiGroups": ["demo.k8s.io"], "resources": ["webservers"], "verbs": ["get", "list"]}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "op", "namespace": "ns"},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "update"]}
        ],
    },
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op", "namespace": "ns"}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "op", "namespace": "ns"}},
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "op", "namespace": "ns"}},
]


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


def test_installer_rbac_covers_each_kind_in_its_scope_and_every_granted_rule():
    objs = by_kind(olmv1.installer_rbac("ext", "ns", "installer", RENDERED))
    cluster_rules = objs["ClusterRole"]["rules"]
    role_rules = objs["Role"]["rules"]
    assert {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": olmv1.MANAGE,
    } in cluster_rules
    assert {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterroles"],
        "verbs": olmv1.MANAGE,
    } in cluster_rules
    assert {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": olmv1.MANAGE} in role_rules
    assert {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": olmv1.MANAGE} in role_rules
    assert {
        "apiGroups": ["policy"],
        "resources": ["poddisruptionbudgets"],
        "verbs": olmv1.MANAGE,
    } in role_rules
    assert {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterroles"],
        "verbs": ["bind", "escalate"],
    } in cluster_rules
    assert {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles"],
        "verbs": ["bind", "escalate"],
    } in role_rules
    assert RENDERED[1]["rules"][0] in cluster_rules  # escalation: holds what it grants
    assert RENDERED[2]["rules"][0] in role_rules
    finalizers = cluster_rules[0]
    assert finalizers["resources"] == ["clusterextensions/finalizers"] and finalizers["resourceNames"] == [
        "ext"
    ]
    for binding in ("ClusterRoleBinding", "RoleBinding"):
        assert objs[binding]["subjects"] == [
            {"kind": "ServiceAccount", "name": "installer", "namespace": "ns"}
        ]
    assert objs["ServiceAccount"]["metadata"] == {"name": "installer", "namespace": "ns"}


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Deployment", "deployments"),
        ("NetworkPolicy", "networkpolicies"),
        ("PrometheusRule", "prometheusrules"),
    ],
)
def test_plural_is_the_resource_name(kind, plural):
    assert olmv1._plural(kind) == plural


def test_registries_conf_mirrors_each_prefix():
    conf = tomllib.loads(olmv1.registries_conf({"ghcr.io": "10.0.0.1:5000/ghcr.io"}, insecure=False))
    assert conf["registry"] == [
        {
            "prefix": "ghcr.io",
            "location": "ghcr.io",
            "mirror": [{"location": "10.0.0.1:5000/ghcr.io", "insecure": False}],
        }
    ]


def deployment(name: str) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "manager", "volumeMounts": []}],
                    "volumes": [
                        {
                            "name": "ca-certs",
                            "secret": {
                                "secretName": "cert",
                                "items": [{"key": "ca.crt", "path": "olm-ca.crt"}],
                            },
                        }
                    ],
                }
            }
        },
    }


def test_operator_controller_gets_the_pull_config_the_ca_and_the_catalogd_name(tmp_path):
    ca = tmp_path / "ca.crt"
    ca.write_text("PEM")
    policy = tmp_path / "policy"
    (policy / "registries.d").mkdir(parents=True)
    for name in ("policy.json", f"registries.d/{signing.REGISTRIES_D_FILE}", "cosign.pub"):
        (policy / name).write_text("x")
    manager = olmv1.OLMv1(cluster=None, registries_conf="conf", registry_ca=ca, policy=policy)  # type: ignore[arg-type]
    dep = deployment(olmv1.OPERATOR_CONTROLLER)
    manager._patch_deployment(dep, "10.96.0.5")
    pod = dep["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["subPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {
        "/etc/containers/registries.conf": "registries.conf",
        "/etc/containers/policy.json": "policy.json",
        "/etc/containers/registries.d/k8s-operators-py.yaml": "k8s-operators-py.yaml",
        "/etc/containers/k8s-operators-py/cosign.pub": "cosign.pub",
    }
    sources = next(v for v in pod["volumes"] if v["name"] == "ca-certs")["projected"]["sources"]
    assert sources[0]["secret"]["name"] == "cert"
    assert sources[1]["configMap"]["items"] == [{"key": "registry-ca.crt", "path": "registry-ca.crt"}]
    assert pod["hostAliases"] == [{"ip": "10.96.0.5", "hostnames": ["catalogd-service.olmv1-system.svc"]}]


def test_nothing_is_mounted_that_was_not_given():
    manager = olmv1.OLMv1(cluster=None)  # type: ignore[arg-type]
    dep = deployment(olmv1.CATALOGD)
    before = copy.deepcopy(dep)
    manager._patch_deployment(dep, "10.96.0.5")
    pod = dep["spec"]["template"]["spec"]
    assert pod["containers"][0]["volumeMounts"] == []
    assert pod["volumes"][0] == before["spec"]["template"]["spec"]["volumes"][0]
    assert "hostAliases" not in pod
