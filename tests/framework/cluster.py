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


def csv_permissions() -> dict[str, list[dict[str, Any]]]:
    """The rules the bundle's CSV grants each operator's ServiceAccount."""
    spec = yaml.safe_load(CSV.read_text())["spec"]["install"]["spec"]
    return {p["serviceAccountName"]: p["rules"] for p in spec["permissions"]}


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
        """
        rules = csv_permissions()[f"{operator}-operator"]
        account = account or f"{operator}-operator"
        namespace = localcluster.AUDITED_NAMESPACE
        core, rbac = client.CoreV1Api(self.api), client.RbacAuthorizationV1Api(self.api)
        role = f"test:{account}"
        for create in (
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
        ):
            try:
                create()
            except ApiException as exc:
                if exc.status != 409:
                    raise
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
