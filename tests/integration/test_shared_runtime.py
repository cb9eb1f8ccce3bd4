"""The shared runtime on a real API server: probes, metrics, server-side filtered watches."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from kubernetes import client

from shared.api import ownership
from shared.api.ownership import managed_selector
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for


@pytest.fixture
def demo(cluster, namespace, tmp_path):
    op = OperatorProcess(
        "tests.framework.demo_operator", cluster.kubeconfig, tmp_path / "demo.log", namespace
    )
    yield op.start()  # start() waits for /readyz: 200 only after the initial listing
    op.stop()


def test_probes_metrics_and_filtered_watch(cluster, namespace, demo):
    assert demo.get(demo.probe_port, "/healthz") == (200, "ok")
    assert demo.get(demo.metrics_port, "/readyz")[0] == 404  # probes live on their own port

    core = client.CoreV1Api(cluster.api)
    # A foreign pod with the same app label as ours: the API server must never send it to us.
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": "foreign", "labels": {"app.kubernetes.io/name": "demo"}},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        },
    )
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "one", "labels": {"demo": "yes"}}})
    child = wait_for(lambda: core.read_namespaced_pod("one-child", namespace), 60, "child pod created")
    assert child.metadata.owner_references[0].kind == "ConfigMap"
    assert child.metadata.labels["app.kubernetes.io/managed-by"] == "k8s-operators-py"
    wait_for(lambda: "SEEN pod one-child" in demo.log_tail(100_000), 60, "operator saw its own pod")
    # Watch events arrive in resourceVersion order: the foreign pod was created first, so had
    # it passed the selector it would have been seen before our child.
    assert "SEEN pod foreign" not in demo.log_tail(100_000)

    wait_for(
        lambda: demo.metric("controller_runtime_reconcile_total", controller="demo", result="success") == 1,
        60,
        "reconcile_total success=1",
    )
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: `make test` installs Debian's prometheus package"
    check = subprocess.run(
        [promtool, "check", "metrics"], check=False, input=demo.metrics().encode(), capture_output=True
    )
    assert check.returncode == 0 and not check.stdout.strip(), check.stdout + check.stderr


def test_no_pass_plans_before_every_listed_child_reached_the_cache(cluster, namespace, tmp_path):
    """The controllers' gate opened once the watches had *listed*, while kopf's workers
    were still handing the listed children to the handlers: a pass that found its child not
    yet in the cache created a second one (a WebServer, a surplus pod). The test operator's
    child handler blocks (a synchronous client's call), so its handlers lag the listing."""
    n = 300
    core = client.CoreV1Api(cluster.api)
    for i in range(n):
        cm = core.create_namespaced_config_map(
            namespace, {"metadata": {"name": f"p{i}", "labels": {"listing": "yes"}}}
        )
        owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm.to_dict()["metadata"]}
        child = {"metadata": {"name": f"p{i}-child"}}
        core.create_namespaced_secret(namespace, ownership.adopt(child, owner, "listing", "child"))
    op = OperatorProcess(
        "tests.framework.listing_operator", cluster.kubeconfig, tmp_path / "listing.log", namespace
    )
    op.start()
    try:
        wait_for(
            lambda: (
                op.metric("controller_runtime_reconcile_total", controller="listing", result="success") >= n
            ),
            120,
            f"a first pass over each of the {n} ConfigMaps",
        )
    finally:
        op.stop()
    children = core.list_namespaced_secret(namespace, label_selector=managed_selector("listing")).items
    surplus = sorted(s.metadata.name for s in children if s.metadata.generate_name)
    assert not surplus, f"{len(surplus)} surplus children created by passes that ran too early: {surplus}"
    assert len(children) == n
