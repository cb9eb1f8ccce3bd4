"""Events on the real API server: a failing object's Warning is one Event whose count grows,
and one namespace's flood of Events does not push out another namespace's.

The recorder runs as the operators' ServiceAccount (the CSV's rules), so these tests also prove
that the rules let it patch the Events it posted.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from shared.client import kube as kube_module
from shared.client.events import EventRecorder
from shared.client.kube import KubeClient
from tests.framework.cluster import Cluster
from tests.framework.namespaces import delete_namespace, fresh_namespace
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for
from tests.framework.webservers import create, get


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("events") / "operator.log"
    op = OperatorProcess("operators.webserver", cluster.operator_kubeconfig("webserver"), log).start()
    yield op
    op.stop()


def events_about(cluster: Cluster, namespace: str, uid: str) -> list[client.CoreV1Event]:
    core = client.CoreV1Api(cluster.api)
    return core.list_namespaced_event(namespace, field_selector=f"involvedObject.uid={uid}").items


def test_a_webserver_failing_on_every_retry_has_one_event_whose_count_grows(cluster, namespace, operator):
    """A stranger's Service holds the name the WebServer wants: every retry fails the same
    way and reports it; the Event is patched, not posted again."""
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_service(
        namespace,
        {"metadata": {"name": "taken"}, "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}},
    )
    create(cluster, namespace, "taken", {"replicas": 0, "service": {"enabled": True}})
    uid = get(cluster, namespace, "taken")["metadata"]["uid"]

    def conflicts() -> list[client.CoreV1Event]:
        return [e for e in events_about(cluster, namespace, uid) if e.reason == "ServiceConflict"]

    wait_for(
        lambda: any((e.count or 1) >= 3 for e in conflicts()),
        120,
        "the ServiceConflict Event counted 3 times",
    )
    (event,) = conflicts()
    assert event.type == "Warning" and event.count >= 3
    assert event.last_timestamp >= event.first_timestamp


def recorder_client(cluster: Cluster) -> KubeClient:
    """Our client as the WebServer operator's ServiceAccount (the CSV's rules)."""
    cfg = client.Configuration()
    config.load_kube_config(
        config_file=str(cluster.operator_kubeconfig("webserver")), client_configuration=cfg
    )
    return KubeClient(cfg)


def about(namespace: str, name: str) -> dict[str, Any]:
    """An object to report on (Events do not need it to exist)."""
    return {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
    }


def ours(core: client.CoreV1Api, namespace: str) -> list[client.CoreV1Event]:
    return [e for e in core.list_namespaced_event(namespace).items if e.source.component == "events-test"]


@pytest.fixture
def quiet(cluster: Cluster) -> Iterator[str]:
    core = client.CoreV1Api(cluster.api)
    name = fresh_namespace(core, "quiet", {"localcluster.dev/test": "true"})
    yield name
    delete_namespace(core, name)


def test_a_namespace_flooding_events_does_not_push_out_another_namespaces(
    cluster, namespace, quiet, monkeypatch
):
    """The quiet namespace's Event is recorded first, then 50 of another namespace overflow the
    bound (20) before anything is posted: the flood drops its own oldest. The quiet Event then
    recurs (a PATCH of its count), and once deleted is posted anew."""
    monkeypatch.setattr(kube_module, "_forget_credential_files", lambda cfg: None)
    core = client.CoreV1Api(cluster.api)
    web = about(quiet, "web")
    flood = [about(namespace, f"w{i}") for i in range(50)]

    async def scenario() -> tuple[int, list[client.CoreV1Event]]:
        kube = recorder_client(cluster)
        recorder = EventRecorder(kube, "events-test", max_queued=20)
        try:
            recorder.record(web, type="Warning", reason="Failed", message="quota")
            for body in flood:  # all filed before the poster runs once
                recorder.record(body, type="Warning", reason="Failed", message="quota")
            await recorder.flush()
            dropped = recorder.dropped
            recorder.record(web, type="Warning", reason="Failed", message="quota")
            await recorder.flush()
            (posted,) = ours(core, quiet)
            core.delete_namespaced_event(posted.metadata.name, quiet)
            recorder.record(web, type="Warning", reason="Failed", message="quota")
            await recorder.flush()
            return dropped, [posted]
        finally:
            await recorder.close()
            await kube.close()

    dropped, (patched,) = asyncio.run(scenario())
    assert dropped == 31
    noisy = sorted(int(e.involved_object.name[1:]) for e in ours(core, namespace))
    assert noisy == list(range(31, 50))  # its newest, as many as fit beside the quiet one
    assert patched.count == 2 and patched.involved_object.uid == web["metadata"]["uid"]
    (again,) = ours(core, quiet)
    assert again.metadata.name != patched.metadata.name
    assert again.count == 3 and again.first_timestamp == patched.first_timestamp
