"""The shared runtime on a real API server: probes, metrics, server-side filtered watches."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from kubernetes import client

from tests.helpers import wait_for
from tests.integration.operator_process import OperatorProcess


@pytest.fixture
def demo(cluster, namespace, tmp_path):
    op = OperatorProcess(
        "tests.integration.demo_operator", cluster.kubeconfig, tmp_path / "demo.log", namespace
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
