"""The suite's fixtures: control planes, the real node, images, operator processes, namespaces.

Session fixtures are per pytest process: with ``pytest -n N`` (pytest-xdist) every worker starts
its own control plane, so the kwok tests of different workers never share one. By default a
local control plane is built/started (see ``localcluster``). Set ``USE_EXISTING_CLUSTER=1`` to
run the same tests against the cluster of the current kubeconfig (kind, minikube, ...) instead;
tests that need the local cluster's fake kwok nodes are then skipped, everything else runs
unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from localcluster import cluster as localcluster
from tests.framework.cluster import Cluster, apply_admission_policies, bundle_crds
from tests.framework.namespaces import delete_namespace, fresh_namespace
from tests.framework.operator_process import OperatorProcess
from tests.framework.tdsets import Operators as TDSetOperators


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
        api = config.new_client_from_config(config_file=str(local.kubeconfig))
        # What an install brings besides the CRDs and checks at admission: the policies.
        apply_admission_policies(api)
        yield Cluster(local.kubeconfig, api, local)
    finally:
        local.down()


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[localcluster.LocalCluster]:
    """A second control plane, with this machine as its one real worker node (no kwok nodes).

    Yields the ``LocalCluster``; ``.node`` is the ``localcluster.node.RealNode``
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

    Built from the Dockerfiles users build (``localcluster.images``: buildah, locally made stand-ins
    for public bases that cannot be pulled here), rebuilt only when their inputs changed.
    """
    from localcluster import images as image_tools

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
def start_tdset_operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[TDSetOperators]:
    """Start a TDSet operator watching only ``namespace`` (``at``: its clock shifted to that
    instant; ``account``: another ServiceAccount than the CSV's); all stopped after the test."""
    operators = TDSetOperators(cluster, namespace, tmp_path)
    yield operators
    operators.stop_all()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace per test, with its default ServiceAccount present, deleted afterwards."""
    core = client.CoreV1Api(cluster.api)
    name = fresh_namespace(core, "t", {"localcluster.dev/test": "true"})
    yield name
    delete_namespace(core, name)
