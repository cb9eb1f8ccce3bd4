"""The entry point's namespace handling: WATCH_NAMESPACE empty (all), one, several.

In the CSV, WATCH_NAMESPACE comes from OLM's ``olm.targetNamespaces`` pod annotation (downward
API): a comma list, empty for all namespaces. Each case runs the WebServer operator as its own
ServiceAccount and checks both what it reconciles and, in the API server's audit log, which
namespaces it listed and watched (so "not watched" is observed, not inferred from a timeout).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

from localcluster.cluster import AUDITED_NAMESPACE
from tests.framework.cluster import Cluster
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for


@pytest.fixture
def three_namespaces(cluster: Cluster) -> Iterator[list[str]]:
    core = client.CoreV1Api(cluster.api)
    names = [f"t-ns-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    for name in names:
        core.create_namespace({"metadata": {"name": name}})
    yield names
    for name in names:
        core.delete_namespace(name)


def reconciled(cluster: Cluster, namespace: str) -> bool:
    obj = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "demo.k8s.io", "v1alpha1", namespace, "webservers", "w"
    )
    return (obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"]


def watched_namespaces(cluster: Cluster, account: str) -> set[str]:
    """Namespaces the account listed/watched WebServers in ("" = cluster-wide)."""
    user = f"system:serviceaccount:{AUDITED_NAMESPACE}:{account}"
    seen = set()
    for line in cluster.need_local().audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if (
            event["user"]["username"] == user
            and ref.get("resource") == "webservers"
            and event["verb"] in ("list", "watch")
        ):
            seen.add(ref.get("namespace", ""))
    return seen


@pytest.mark.parametrize("mode", ["one", "several", "all"])
def test_watch_namespace(cluster, three_namespaces, tmp_path, mode):
    watched = {"one": three_namespaces[:1], "several": three_namespaces[:2], "all": []}[mode]
    account = f"webserver-ns-{mode}-{uuid.uuid4().hex[:6]}"
    kubeconfig = cluster.operator_kubeconfig("webserver", account=account)
    op = OperatorProcess(
        "operators.webserver", kubeconfig, tmp_path / "op.log", namespaces=",".join(watched)
    ).start()
    try:
        for ns in three_namespaces:
            body = {
                "apiVersion": "demo.k8s.io/v1alpha1",
                "kind": "WebServer",
                "metadata": {"name": "w"},
                "spec": {"replicas": 0},
            }
            client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
                "demo.k8s.io", "v1alpha1", ns, "webservers", body
            )
        expected = watched or three_namespaces
        wait_for(
            lambda: all(reconciled(cluster, ns) for ns in expected),
            60,
            f"WebServers reconciled in {expected}",
        )
        assert watched_namespaces(cluster, account) == (set(watched) if watched else {""})
        for ns in set(three_namespaces) - set(expected):
            assert not reconciled(cluster, ns)
    finally:
        op.stop()
