"""What the admission policies (deploy/admission-policies.yaml) add to a write of our kinds.

    python -m tools.bench.admission [--requests 300]

On the local control plane, as an impersonated user holding the editor roles and ``get`` on
the Secrets and ConfigMaps the specs name (so every check is made and passes), times one create
after another (``dryRun=All``: through admission, nothing stored) of: a plain WebServer, a
WebServer naming 24 distinct Secrets and 24 distinct ConfigMaps (the most one policy checks:
48 authorizer checks), and a TDSet with a ``scaleTargetRef``; first with the policies applied,
then after deleting them. Prints each case's latency (min, median, p99, max) both ways.
"""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tools.bench.lib import REPO, control_plane, load, say, summary

POLICIES = REPO / "deploy" / "admission-policies.yaml"
ROLES = REPO / "bundle" / "manifests"
USER = "bench-tenant"
KINDS = {
    "webserver": ("demo.k8s.io", "v1alpha1", "webservers", "WebServer"),
    "tdset": ("schedule.rs", "v1", "tdsets", "TDSet"),
}


def cases() -> dict[str, tuple[str, dict[str, Any]]]:
    many = {
        "replicas": 1,
        "envFrom": [{"secretRef": {"name": f"s{i}"}} for i in range(8)]
        + [{"configMapRef": {"name": f"c{i}"}} for i in range(8)],
        "volumes": [
            {"name": f"v{i}", "mountPath": f"/v{i}", "secret": {"name": f"s{8 + i}"}} for i in range(8)
        ]
        + [{"name": f"w{i}", "mountPath": f"/w{i}", "configMap": {"name": f"c{8 + i}"}} for i in range(8)],
        "env": [
            {"name": f"S{i}", "valueFrom": {"secretKeyRef": {"name": f"s{16 + i}", "key": "k"}}}
            for i in range(8)
        ]
        + [
            {"name": f"C{i}", "valueFrom": {"configMapKeyRef": {"name": f"c{16 + i}", "key": "k"}}}
            for i in range(8)
        ],
    }
    target = {
        "schedulingConfig": [],
        "defaultReplica": 1,
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
    }
    return {
        "plain WebServer": ("webserver", {"replicas": 1}),
        "WebServer naming 24 Secrets + 24 ConfigMaps": ("webserver", many),
        "TDSet with scaleTargetRef": ("tdset", target),
    }


def grant(admin: client.ApiClient, namespace: str) -> None:
    rbac = client.RbacAuthorizationV1Api(admin)
    for kind in ("webserver", "tdset"):
        name = f"k8s-operators-py-{kind}-editor-role"
        role = yaml.safe_load((ROLES / f"{name}_rbac.authorization.k8s.io_v1_clusterrole.yaml").read_text())
        rbac.create_cluster_role(role)
        bind(rbac, namespace, "ClusterRole", name)
    names = [f"s{i}" for i in range(24)] + [f"c{i}" for i in range(24)]
    rules = [
        {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["get"], "resourceNames": names},
        {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["update"]},
    ]
    rbac.create_namespaced_role(namespace, {"metadata": {"name": "bench"}, "rules": rules})
    bind(rbac, namespace, "Role", "bench")


def bind(rbac: client.RbacAuthorizationV1Api, namespace: str, kind: str, name: str) -> None:
    rbac.create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
        },
    )


def create(api: client.CustomObjectsApi, namespace: str, kind: str, spec: dict[str, Any]) -> None:
    group, version, plural, kind_name = KINDS[kind]
    body = {"apiVersion": f"{group}/{version}", "kind": kind_name, "metadata": {"name": "x"}, "spec": spec}
    api.create_namespaced_custom_object(group, version, namespace, plural, body, dry_run="All")


def enforced(api: client.CustomObjectsApi, namespace: str) -> bool:
    """Whether a spec naming a Secret the user may not read ("nope") is refused."""
    try:
        create(api, namespace, "webserver", {"replicas": 0, "envFrom": [{"secretRef": {"name": "nope"}}]})
    except ApiException as exc:
        return exc.status in (403, 422) and "secrets" in str(exc.body)
    return False


def until(predicate: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def measure(api: client.CustomObjectsApi, namespace: str, requests: int) -> dict[str, list[float]]:
    out = {}
    for name, (kind, spec) in cases().items():
        for _ in range(10):  # warm connections and caches
            create(api, namespace, kind, spec)
        times = []
        for _ in range(requests):
            t0 = time.perf_counter()
            create(api, namespace, kind, spec)
            times.append(time.perf_counter() - t0)
        out[name] = times
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=300, help="creates per case and setting")
    args = p.parse_args(argv)
    with control_plane(nodes=1, pods_per_node=110) as cl:
        admin = config.new_client_from_config(config_file=str(cl.kubeconfig))
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        client.CoreV1Api(admin).create_namespace({"metadata": {"name": namespace}})
        grant(admin, namespace)
        tenant = config.new_client_from_config(config_file=str(cl.kubeconfig))
        tenant.set_default_header("Impersonate-User", USER)
        api = client.CustomObjectsApi(tenant)
        until(lambda: create(api, namespace, "webserver", {"replicas": 1}) is None, "the roles")
        docs = [d for d in yaml.safe_load_all(POLICIES.read_text()) if d]
        adm = client.AdmissionregistrationV1Api(admin)
        for doc in docs:
            if doc["kind"] == "ValidatingAdmissionPolicy":
                adm.create_validating_admission_policy(doc)
            else:
                adm.create_validating_admission_policy_binding(doc)
        until(lambda: enforced(api, namespace), "the policies enforced")
        say(f"with the policies ({args.requests} dry-run creates per case); {load()}")
        with_policies = measure(api, namespace, args.requests)
        for doc in docs:
            if doc["kind"] == "ValidatingAdmissionPolicyBinding":
                adm.delete_validating_admission_policy_binding(doc["metadata"]["name"])
            else:
                adm.delete_validating_admission_policy(doc["metadata"]["name"])
        until(lambda: not enforced(api, namespace), "the policies gone")
        say(f"without them; {load()}")
        without = measure(api, namespace, args.requests)
        for name in with_policies:
            say(f"{name}: with {summary(with_policies[name])}")
            say(f"{name}: without {summary(without[name])}")


if __name__ == "__main__":
    main()
