"""One WebServer pass, tested as kubernetes/sample-controller tests its controller: objects in a
fake API server (:class:`tests.framework.fakekube.FakeKube`), one pass, the exact writes and Events.

Written against the module-level wiring of ``operators.webserver.handlers`` (its client, caches,
delete expectations and Event poster replaced for the test): when the reconciler takes them
injected (issue #24), only :class:`Pass` changes, the expected actions stay — they pin the
behaviour the rewrite must keep.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from operators.webserver import desired, handlers
from operators.webserver.api import DeleteExpectations, WebServerAPI
from shared.api import conditions, ownership
from shared.client.kube import namespaced
from shared.controller import caches
from tests.framework.fakekube import FakeKube, fail

NS = "ns"
WS = "demo.k8s.io/v1alpha1"
WS_PATH = namespaced(NS, "webservers", "web", WS)
PODS = namespaced(NS, "pods")


def webserver(replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": WS,
        "kind": "WebServer",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"replicas": replicas},
    }


class Pass:
    """The WebServer operator's wiring around one FakeKube: what a reconciler will take injected."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, kube: FakeKube) -> None:
        self.kube = kube
        self.events: list[tuple[str, str, str]] = []
        monkeypatch.setattr(handlers, "api", WebServerAPI(kube))
        monkeypatch.setattr(handlers, "pods", caches.OwnerCache(desired.pod_view))
        monkeypatch.setattr(handlers, "services", caches.OwnerCache(desired.service_view))
        monkeypatch.setattr(handlers, "expectations", DeleteExpectations())
        monkeypatch.setattr(
            handlers,
            "post_event",
            lambda body, *, type, reason, message: self.events.append((type, reason, message)),
        )

    def watch(self) -> None:
        """The pod watch delivers every pod now stored."""
        for pod in self.kube.objects("pods", NS):
            handlers.pods.observe("MODIFIED", pod)

    def run(self) -> float | None:
        """One pass over the WebServer as the API server holds it now."""
        self.kube.clear_actions()
        self.events.clear()
        return asyncio.run(handlers.reconcile(self.kube.object(WS_PATH)))


def pod_names(kube: FakeKube) -> list[str]:
    return [pod["metadata"]["name"] for pod in kube.objects("pods", NS)]


def test_a_new_webserver_gets_its_pods_then_a_status_per_pass_until_nothing_changes(monkeypatch):
    kube = FakeKube(webserver(3))
    p = Pass(monkeypatch, kube)
    owner = kube.object(WS_PATH)

    p.run()
    names = pod_names(kube)
    assert len(names) == 3
    assert kube.keys() == [
        *(("create", "pods", NS, name, "") for name in names),
        ("patch", "webservers", NS, "web", "status"),
    ]
    assert all(ownership.is_controlled_by(pod, owner["metadata"]["uid"]) for pod in kube.objects("pods"))
    assert p.events == [("Normal", "SuccessfulCreate", f"Created pods: {', '.join(names)}")]

    p.watch()  # the pods' ADDED events: the status counts them
    p.run()
    assert kube.keys() == [("patch", "webservers", NS, "web", "status")]
    assert kube.object(WS_PATH)["status"]["replicas"] == 3

    p.run()  # the echo of that write
    assert kube.actions == [] and p.events == []


def test_scaling_down_deletes_pods_under_their_uid(monkeypatch):
    kube = FakeKube(webserver(3))
    p = Pass(monkeypatch, kube)
    p.run()
    p.watch()
    uids = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in kube.objects("pods", NS)}
    asyncio.run(kube.merge_patch(WS_PATH, {"spec": {"replicas": 1}}))

    p.run()
    deletes = [a for a in kube.writes() if a.verb == "delete"]
    assert [a.key for a in kube.writes()] == [
        *(a.key for a in deletes),
        ("patch", "webservers", NS, "web", "status"),
    ]
    assert len(deletes) == 2
    assert all(a.body == {"preconditions": {"uid": uids[a.name]}} for a in deletes)
    assert len(pod_names(kube)) == 1
    assert [reason for _, reason, _ in p.events] == ["SuccessfulDelete"]


def test_a_pod_create_refused_by_a_quota_is_a_replica_failure(monkeypatch):
    kube = FakeKube(webserver(3))
    kube.prepend_reactor("create", "pods", fail(403, message="exceeded quota: pods, requested: pods=1"))
    p = Pass(monkeypatch, kube)

    with pytest.raises(handlers.ReconcileError, match="FailedCreate"):
        p.run()
    # Slow start: the first batch (one pod) fails, the others are not tried.
    assert [a.key[:2] for a in kube.writes()] == [("create", "pods"), ("patch", "webservers")]
    failure = conditions.get(kube.object(WS_PATH)["status"]["conditions"], "ReplicaFailure")
    assert failure is not None and (failure["status"], failure["reason"]) == ("True", "FailedCreate")
    assert [(t, reason) for t, reason, _ in p.events] == [("Warning", "FailedCreate")]


def test_pods_the_watch_has_not_shown_yet_are_claimed_not_duplicated(monkeypatch):
    kube = FakeKube(webserver(3))
    p = Pass(monkeypatch, kube)
    p.run()
    names = pod_names(kube)

    p.run()  # the watch lags: the cache still shows no pod
    # Each create is refused (AlreadyExists), the pod read and found ours; in slow-start batches
    # of 1 and 2 pods.
    assert kube.keys(reads=True) == [
        ("create", "pods", NS, names[0], ""),
        ("get", "pods", NS, names[0], ""),
        ("create", "pods", NS, names[1], ""),
        ("create", "pods", NS, names[2], ""),
        ("get", "pods", NS, names[1], ""),
        ("get", "pods", NS, names[2], ""),
    ]  # and no status write: the pass counted what the last one did (the claims count next)
    assert pod_names(kube) == names
