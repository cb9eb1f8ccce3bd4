"""The shared runtime on a real API server: probes, metrics, server-side filtered watches."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client

from localcluster.cluster import free_port
from tests.helpers import wait_for

REPO = Path(__file__).resolve().parents[2]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.fixture
def demo(cluster, namespace, tmp_path):
    mport, pport = free_port(), free_port()
    log_path = tmp_path / "demo.log"
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "WATCH_NAMESPACE": namespace,
        "METRICS_PORT": str(mport),
        "HEALTH_PORT": str(pport),
    }
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.demo_operator", "--verbose"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    yield proc, mport, pport, log_path
    proc.terminate()
    proc.wait(30)


def test_probes_metrics_and_filtered_watch(cluster, namespace, demo):
    proc, mport, pport, log_path = demo
    logs = lambda: log_path.read_text(errors="replace")  # noqa: E731

    def ready() -> bool:
        assert proc.poll() is None, f"demo operator exited:\n{logs()[-3000:]}"
        return _get(f"http://127.0.0.1:{pport}/readyz")[0] == 200

    wait_for(ready, 90, "/readyz 200 after the initial listing")
    assert _get(f"http://127.0.0.1:{pport}/healthz") == (200, "ok")

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
    wait_for(lambda: "SEEN pod one-child" in logs(), 60, "operator saw its own pod")
    # Watch events arrive in resourceVersion order: the foreign pod was created first, so had
    # it passed the selector it would have been seen before our child.
    assert "SEEN pod foreign" not in logs()

    def metric_moved() -> str | None:
        status, text = _get(f"http://127.0.0.1:{mport}/metrics")
        line = 'controller_runtime_reconcile_total{controller="demo",result="success"} 1.0'
        return text if status == 200 and line in text else None

    text = wait_for(metric_moved, 60, "reconcile_total success=1")
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: `make test` installs Debian's prometheus package"
    check = subprocess.run(
        [promtool, "check", "metrics"], check=False, input=text.encode(), capture_output=True
    )
    assert check.returncode == 0 and not check.stdout.strip(), check.stdout + check.stderr
