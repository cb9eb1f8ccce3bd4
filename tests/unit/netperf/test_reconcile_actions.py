"""One Netperf run, pass by pass, tested as kubernetes/sample-controller tests its controller:
objects in a fake API server (``tests.framework.fakekube.FakeKube``), one pass, the exact
writes and Events.

The reconciler is built as the operator runs it (``tests.framework.passes.OnePass``), with
the fake client and a fixed clock injected.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from operators.netperf import desired
from operators.netperf.description import DESCRIPTION
from operators.netperf.reconciler import NetperfReconciler
from shared.api import conditions
from shared.api.clock import Clock
from shared.api.errors import ReconcileError
from shared.client.kube import namespaced
from tests.framework.fakekube import FakeKube, fail
from tests.framework.netperfs import fixture
from tests.framework.passes import OnePass

NS = "ns"
NP = "app.example.com/v1alpha1"
NP_PATH = namespaced(NS, "netperfs", "np", NP)
NOW = datetime.datetime(2026, 1, 5, 12, 0, tzinfo=datetime.UTC)


def netperf() -> dict[str, Any]:
    return {"apiVersion": NP, "kind": "Netperf", "metadata": {"name": "np", "namespace": NS}, "spec": {}}


class Pass(OnePass):
    """The Netperf operator on one FakeKube, one pass at a time, at ``NOW``."""

    def __init__(self, kube: FakeKube) -> None:
        clock = Clock(NOW - datetime.datetime.now(datetime.UTC))
        super().__init__(DESCRIPTION, NetperfReconciler, kube, NP_PATH, clock)
        assert isinstance(self.reconciler, NetperfReconciler)
        self.np = self.reconciler

    def kubelet(self, name: str, status: dict[str, Any]) -> None:
        """The kubelet reports ``status`` for pod ``name``, and the pod watch delivers it."""
        asyncio.run(self.kube.merge_patch(namespaced(NS, "pods", name) + "/status", {"status": status}))
        self.np.pods.observe("MODIFIED", self.kube.object(namespaced(NS, "pods", name)))


def test_a_run_from_start_to_result():
    kube = FakeKube(netperf())
    p = Pass(kube)

    p.run()  # the run is claimed in the status first, then the server pod is created
    [server] = [pod["metadata"]["name"] for pod in kube.objects("pods", NS)]
    assert kube.keys() == [
        ("patch", "netperfs", NS, "np", "status"),
        ("create", "pods", NS, server, ""),
        ("patch", "netperfs", NS, "np", "status"),
    ]
    assert kube.object(NP_PATH)["status"]["status"] == "Server"
    assert [reason for _, reason, _ in p.events] == ["TestStarted", "CreatedPod"]

    p.kubelet(
        server, {"phase": "Running", "podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}]}
    )
    p.run()
    client = next(
        pod["metadata"]["name"] for pod in kube.objects("pods", NS) if pod["metadata"]["name"] != server
    )
    assert kube.keys() == [("create", "pods", NS, client, ""), ("patch", "netperfs", NS, "np", "status")]
    assert kube.object(NP_PATH)["status"]["status"] == "Test"

    terminated = {"exitCode": 0, "message": fixture("tcp_stream")}
    p.kubelet(
        client,
        {
            "phase": "Succeeded",
            "containerStatuses": [{"name": "netperf", "state": {"terminated": terminated}}],
        },
    )
    p.run()  # the result first, then the pods go
    assert kube.keys() == [
        ("patch", "netperfs", NS, "np", "status"),
        ("delete", "pods", NS, server, ""),
        ("delete", "pods", NS, client, ""),
    ]
    assert kube.object(NP_PATH)["status"]["status"] == "Done"
    assert kube.objects("pods", NS) == []
    assert [reason for _, reason, _ in p.events] == ["TestFinished", "DeletedPod", "DeletedPod"]


def test_a_server_pod_refused_by_a_quota_is_retried_with_the_run_still_claimed():
    kube = FakeKube(netperf())
    kube.prepend_reactor("create", "pods", fail(403, message="exceeded quota: pods, requested: pods=1"))
    p = Pass(kube)

    with pytest.raises(ReconcileError, match="exceeded quota"):
        p.run()
    # The run claimed, the pod refused, the failure in a condition (and a Warning Event).
    assert [a.key[:2] for a in kube.writes()] == [
        ("patch", "netperfs"),
        ("create", "pods"),
        ("patch", "netperfs"),
    ]
    assert kube.object(NP_PATH)["status"]["status"] == "Initial"
    degraded = conditions.get(kube.object(NP_PATH)["status"]["conditions"], conditions.DEGRADED)
    assert degraded["reason"] == "FailedUpdate" and "exceeded quota" in degraded["message"]
    assert [(t, reason) for t, reason, _ in p.events] == [
        ("Normal", "TestStarted"),
        ("Warning", "FailedUpdate"),
    ]


def test_a_pod_name_held_by_a_stranger_ends_the_run_in_error():
    kube = FakeKube(netperf())
    p = Pass(kube)
    names = desired.pod_names("np", 1)
    stranger = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": names.server, "namespace": NS},
        "spec": {},
    }
    kube.add(stranger)

    assert p.run() is None
    assert kube.keys(reads=True) == [
        ("patch", "netperfs", NS, "np", "status"),
        ("create", "pods", NS, names.server, ""),  # refused: AlreadyExists
        ("get", "pods", NS, names.server, ""),
        ("patch", "netperfs", NS, "np", "status"),
    ]
    st = kube.object(NP_PATH)["status"]
    assert (st["status"], st["reason"]) == ("Error", "PodConflict")
    assert kube.object(namespaced(NS, "pods", names.server))["spec"] == {}  # untouched
    assert [(t, reason) for t, reason, _ in p.events] == [
        ("Normal", "TestStarted"),
        ("Warning", "TestFailed"),
    ]


def test_a_predecessors_adopted_client_pod_is_waited_for_never_taken_as_this_runs():
    """A Netperf re-created under the same name adopted its predecessor's orphaned
    client pod (finished, the old result in its termination message) and deleted it; while it
    is still Terminating it holds this run's client name and is controlled by this Netperf."""
    kube = FakeKube(netperf())
    p = Pass(kube)
    p.run()
    names = desired.pod_names("np", 1)
    p.kubelet(
        names.server,
        {"phase": "Running", "podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}]},
    )
    owner = kube.object(NP_PATH)
    old = desired.client_pod(owner, {}, "10.0.0.9")
    old["metadata"]["labels"][desired.UID_LABEL] = "uid-of-the-deleted-netperf"
    old["metadata"]["deletionTimestamp"] = "2026-01-05T11:59:59Z"
    old["status"] = {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "netperf", "state": {"terminated": {"exitCode": 0, "message": fixture("tcp_stream")}}}
        ],
    }
    kube.add({**old, "metadata": {**old["metadata"], "namespace": NS}})
    p.np.pods.observe("ADDED", kube.object(namespaced(NS, "pods", names.client)))

    with pytest.raises(ReconcileError, match="WaitingForPodName"):
        p.run()
    st = kube.object(NP_PATH)["status"]
    assert st["status"] == "Server" and "speedBitsPerSec" not in st
    assert ("Warning", "WaitingForPodName") in [(t, reason) for t, reason, _ in p.events]
    # Once it is gone, the run creates its own client.
    asyncio.run(kube.delete(namespaced(NS, "pods", names.client)))
    p.np.pods.observe("DELETED", old)
    p.run()
    assert kube.object(NP_PATH)["status"]["status"] == "Test"
    mine = kube.object(namespaced(NS, "pods", names.client))
    assert mine["metadata"]["labels"][desired.UID_LABEL] == owner["metadata"]["uid"]


def test_the_client_starts_when_the_server_runs_and_its_result_is_read_when_its_container_ends():
    """Neither waits for what comes a period later: the server's readiness probe (the client
    retries its connection), the client's phase (its one container, restartPolicy Never, has
    ended with exit code 0: the kubelet sets Succeeded about a second after)."""
    kube = FakeKube(netperf())
    p = Pass(kube)
    p.run()
    [server] = [pod["metadata"]["name"] for pod in kube.objects("pods", NS)]
    p.kubelet(
        server,
        {"phase": "Running", "podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "False"}]},
    )
    p.run()
    [client] = [
        pod["metadata"]["name"] for pod in kube.objects("pods", NS) if pod["metadata"]["name"] != server
    ]
    assert kube.object(NP_PATH)["status"]["status"] == "Test"

    terminated = {"exitCode": 0, "message": fixture("tcp_stream")}
    p.kubelet(
        client,
        {"phase": "Running", "containerStatuses": [{"name": "netperf", "state": {"terminated": terminated}}]},
    )
    p.run()
    assert kube.object(NP_PATH)["status"]["status"] == "Done"
    assert kube.objects("pods", NS) == []


def test_a_client_container_that_ended_with_an_error_fails_the_run_before_the_phase_says_so():
    kube = FakeKube(netperf())
    p = Pass(kube)
    p.run()
    [server] = [pod["metadata"]["name"] for pod in kube.objects("pods", NS)]
    p.kubelet(server, {"phase": "Running", "podIP": "10.0.0.5"})
    p.run()
    [client] = [
        pod["metadata"]["name"] for pod in kube.objects("pods", NS) if pod["metadata"]["name"] != server
    ]
    terminated = {
        "exitCode": 255,
        "message": "establish control: are you sure there is a netserver listening",
    }
    p.kubelet(
        client,
        {"phase": "Running", "containerStatuses": [{"name": "netperf", "state": {"terminated": terminated}}]},
    )
    p.run()
    st = kube.object(NP_PATH)["status"]
    assert (st["status"], st["reason"]) == ("Error", "ClientFailed")
    assert "netperf exited with 255: establish control" in st["message"]
