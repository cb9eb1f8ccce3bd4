"""The control plane for integration tests: started once per session, tests isolated by namespace.

By default a local control plane is built/started (see ``localcluster``). Set
``USE_EXISTING_CLUSTER=1`` to run the same tests against the cluster of the current kubeconfig
(kind, minikube, ...) instead; tests that need the local cluster's fake kwok nodes are then
skipped, everything else runs unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from localcluster import cluster as localcluster
from tests.helpers import delete_namespace, fresh_namespace
from tests.integration.operator_process import OperatorProcess

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


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if os.environ.get("USE_EXISTING_CLUSTER") == "1":
        path = localcluster.in_use_kubeconfig()
        if not path:
            pytest.fail("USE_EXISTING_CLUSTER=1 but no kubeconfig found ($KUBECONFIG or ~/.kube/config)")
        yield Cluster(Path(path), config.new_client_from_config(config_file=path), None)
        return
    local = localcluster.start(crds=bundle_crds())
    try:
        yield Cluster(
            local.kubeconfig, config.new_client_from_config(config_file=str(local.kubeconfig)), local
        )
    finally:
        local.down()


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[localcluster.LocalCluster]:
    """A second control plane, with this machine as its one real worker node (no kwok nodes).

    Yields the :class:`LocalCluster`; ``.node`` is the :class:`localcluster.node.RealNode`
    (containerd, kubelet, kube-proxy), with the busybox image imported. Separate from
    ``cluster``: only one real node can run per host (kube-proxy's chains are global), and the
    kwok tests need none. Skipped, with the reason, where a real node cannot run (not root, or
    packages missing) and with ``USE_EXISTING_CLUSTER=1``.
    """
    from localcluster import node

    if os.environ.get("USE_EXISTING_CLUSTER") == "1":
        pytest.skip("the real node joins the local control plane only (USE_EXISTING_CLUSTER is set)")
    if reason := node.unavailable_reason():
        # Without root a real node is impossible: say so and skip. As root (CI), a missing
        # package is a set-up bug, never a reason to run less.
        (pytest.skip if os.geteuid() != 0 else pytest.fail)(f"no real node on this machine: {reason}")
    # Traffic into each pod is shaped to 2 Gbit/s: throughput is then bound by that link, not by
    # the CPU a 2-core VM with steal happens to have, so Netperf results are repeatable.
    local = localcluster.start(nodes=0, real_node=True, pod_ingress_rate=2_000_000_000)
    try:
        assert local.node is not None
        local.node.busybox_image()
        yield local
    finally:
        local.down()


@pytest.fixture(scope="session")
def images(real_cluster: localcluster.LocalCluster) -> dict[str, str]:
    """Every image ``make images`` builds, imported into the real node: short name -> reference.

    Built from the Dockerfiles users build (``tools.images``: buildah, locally made stand-ins
    for public bases that cannot be pulled here), rebuilt only when their inputs changed.
    """
    from tools import images as image_tools

    assert real_cluster.node is not None
    archives = image_tools.ensure_images()
    real_cluster.node.import_images(archives.values())
    return {ref.rsplit("/", 1)[-1].rsplit(":", 1)[0]: ref for ref in archives}


Start = Callable[..., OperatorProcess]


@pytest.fixture
def start(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[Start]:
    """Start ``operators.<name>`` watching only ``namespace``; stopped after the test."""
    started: list[OperatorProcess] = []

    def run(name: str, env: dict[str, str] | None = None) -> OperatorProcess:
        op = OperatorProcess(
            f"operators.{name}",
            cluster.operator_kubeconfig(name),
            tmp_path / f"{name}.log",
            namespaces=namespace,
            env=env,
        )
        started.append(op.start())
        return op

    yield run
    for op in started:
        op.stop()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test, with its default ServiceAccount present, deleted afterwards."""
    core = client.CoreV1Api(cluster.api)
    name = fresh_namespace(core, "t", {"localcluster.dev/test": "true"})
    yield name
    delete_namespace(core, name)
