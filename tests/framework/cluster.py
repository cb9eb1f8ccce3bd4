"""The cluster a test talks to, and what the bundle grants the operators running against it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from localcluster import cluster as localcluster

REPO = Path(__file__).resolve().parents[2]


def bundle_crds() -> list[Path]:
    """The CRDs the operators ship (the bundle is their only copy)."""
    return sorted((REPO / "bundle" / "manifests").glob("*.yaml"))


CSV = REPO / "bundle" / "manifests" / "k8s-operators-py.clusterserviceversion.yaml"
# The admission policies as users apply them (an OLM install; install.yaml has the same ones).
ADMISSION_POLICIES = REPO / "deploy" / "admission-policies.yaml"


def apply_admission_policies(api: client.ApiClient, path: Path = ADMISSION_POLICIES) -> list[str]:
    """Create or replace every ValidatingAdmissionPolicy and binding of ``path``; their names.

    The API server enforces a new policy once its informer has it (within about a second):
    a test that needs one enforced waits for it (tests/integration/test_access.py)."""
    adm = client.AdmissionregistrationV1Api(api)
    calls = {
        "ValidatingAdmissionPolicy": (
            adm.read_validating_admission_policy,
            adm.replace_validating_admission_policy,
            adm.create_validating_admission_policy,
        ),
        "ValidatingAdmissionPolicyBinding": (
            adm.read_validating_admission_policy_binding,
            adm.replace_validating_admission_policy_binding,
            adm.create_validating_admission_policy_binding,
        ),
    }
    names = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        read, replace, create = calls[doc["kind"]]
        name = doc["metadata"]["name"]
        try:
            doc["metadata"]["resourceVersion"] = read(name).metadata.resource_version
            replace(name, doc)
        except ApiException as exc:
            if exc.status != 404:
                raise
            doc["metadata"].pop("resourceVersion", None)
            create(doc)
        names.append(f"{doc['kind']}/{name}")
    return names


def csv_permissions() -> dict[str, list[dict[str, Any]]]:
    """The rules the bundle's CSV grants each operator's ServiceAccount where it works."""
    spec = yaml.safe_load(CSV.read_text())["spec"]["install"]["spec"]
    return {p["serviceAccountName"]: p["rules"] for p in spec["permissions"]}


def csv_cluster_permissions() -> dict[str, list[dict[str, Any]]]:
    """The rules the bundle's CSV grants each operator's ServiceAccount cluster-wide (the
    reviews of its ``/metrics`` filter)."""
    spec = yaml.safe_load(CSV.read_text())["spec"]["install"]["spec"]
    return {p["serviceAccountName"]: p["rules"] for p in spec.get("clusterPermissions", [])}


METRICS_READER = (
    REPO
    / "bundle"
    / "manifests"
    / "k8s-operators-py-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml"
)
SCRAPERS_NAMESPACE = "monitoring"  # where the tests' scrapers' ServiceAccounts live


def _create(*creates: Any) -> None:
    """Run each create, an object that already exists being as good as a new one."""
    for create in creates:
        try:
            create()
        except ApiException as exc:
            if exc.status != 409:
                raise


def service_account_token(
    api: client.ApiClient, account: str, namespace: str = SCRAPERS_NAMESPACE, cluster_role: str | None = None
) -> str:
    """A TokenRequest token of ``namespace/account`` (both made if missing), bound to
    ``cluster_role`` when one is named."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    _create(
        lambda: core.create_namespace({"metadata": {"name": namespace}}),
        lambda: core.create_namespaced_service_account(namespace, {"metadata": {"name": account}}),
    )
    if cluster_role:
        binding = f"test:{namespace}:{account}:{cluster_role}"
        _create(
            lambda: rbac.create_cluster_role_binding(
                {
                    "metadata": {"name": binding},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": cluster_role,
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
                }
            )
        )
    return str(
        core.create_namespaced_service_account_token(
            account, namespace, {"spec": {"expirationSeconds": 24 * 3600}}
        ).status.token
    )


def metrics_reader_token(api: client.ApiClient, account: str = "metrics-scraper") -> str:
    """A token of a ServiceAccount bound to the bundle's metrics-reader ClusterRole, as a user
    binds Prometheus' (docs/operations/monitoring.md). The ClusterRole is created from the
    bundle's own manifest when the cluster lacks it (an install brings it)."""
    role = yaml.safe_load(METRICS_READER.read_text())
    _create(lambda: client.RbacAuthorizationV1Api(api).create_cluster_role(role))
    return service_account_token(api, account, cluster_role=role["metadata"]["name"])


@dataclass
class Cluster:
    kubeconfig: Path
    api: client.ApiClient
    local: localcluster.LocalCluster | None

    def need_local(self) -> localcluster.LocalCluster:
        if self.local is None:
            pytest.skip("needs the local control plane's kwok nodes (USE_EXISTING_CLUSTER is set)")
        return self.local

    def operator_kubeconfig(self, operator: str, account: str | None = None) -> Path:
        """A kubeconfig for ``<operator>-operator``'s ServiceAccount holding exactly the CSV's rules.

        The rules are bound cluster-wide (a ClusterRole), as OLM does for the AllNamespaces
        install mode; the token comes from the TokenRequest API. Operators under test run with
        it, so a verb missing from the CSV fails their tests with 403s. ``account`` names another
        ServiceAccount with the same rules (its requests can then be told apart in the audit log).
        The CSV's cluster permissions (the ``/metrics`` filter's reviews) are in the same role.
        """
        rules = [
            *csv_permissions()[f"{operator}-operator"],
            *csv_cluster_permissions().get(f"{operator}-operator", []),
        ]
        account = account or f"{operator}-operator"
        namespace = localcluster.AUDITED_NAMESPACE
        core, rbac = client.CoreV1Api(self.api), client.RbacAuthorizationV1Api(self.api)
        role = f"test:{account}"
        _create(
            lambda: core.create_namespace({"metadata": {"name": namespace}}),
            lambda: core.create_namespaced_service_account(namespace, {"metadata": {"name": account}}),
            lambda: rbac.create_cluster_role({"metadata": {"name": role}, "rules": rules}),
            lambda: rbac.create_cluster_role_binding(
                {
                    "metadata": {"name": role},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
                }
            ),
        )
        token = core.create_namespaced_service_account_token(
            account, namespace, {"spec": {"expirationSeconds": 24 * 3600}}
        ).status.token
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"] = [{"name": account, "user": {"token": token}}]
        for ctx in config["contexts"]:
            ctx["context"]["user"] = account
        path = self.kubeconfig.with_name(f"kubeconfig-{account}")
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    def metrics_reader_token(self, account: str = "metrics-scraper") -> str:
        """A token allowed to read the operators' ``/metrics`` (``metrics_reader_token``)."""
        return metrics_reader_token(self.api, account)
