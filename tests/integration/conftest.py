"""The control plane for integration tests: started once per session, tests isolated by namespace.

By default a local control plane is built/started (see ``localcluster``). Set
``USE_EXISTING_CLUSTER=1`` to run the same tests against the cluster of the current kubeconfig
(kind, minikube, ...) instead; tests that need the local cluster's fake kwok nodes are then
skipped, everything else runs unchanged.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from localcluster import cluster as localcluster
from tests.helpers import wait_for

REPO = Path(__file__).resolve().parents[2]


def bundle_crds() -> list[Path]:
    """The CRDs the operators ship (the bundle is their only copy)."""
    return sorted((REPO / "bundle" / "manifests").glob("*.yaml"))


@dataclass
class Cluster:
    kubeconfig: Path
    api: client.ApiClient
    local: localcluster.LocalCluster | None

    def need_local(self) -> localcluster.LocalCluster:
        if self.local is None:
            pytest.skip("needs the local control plane's kwok nodes (USE_EXISTING_CLUSTER is set)")
        return self.local


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


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test, with its default ServiceAccount present, deleted afterwards."""
    core = client.CoreV1Api(cluster.api)
    name = f"t-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"localcluster.dev/test": "true"}}})
    # Pods are rejected until the ServiceAccount controller has created "default".
    wait_for(lambda: core.read_namespaced_service_account("default", name), 60, "default ServiceAccount")
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
