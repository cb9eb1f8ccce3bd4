"""One TDSet pass, tested as kubernetes/sample-controller tests its controller: objects in a fake
API server (:class:`tests.framework.fakekube.FakeKube`), one pass, the exact writes and Events.

Written against the module-level wiring of ``operators.tdset.handlers`` (its client, caches,
clock and Event poster replaced for the test): when the reconciler takes them injected
(issue #24), only :class:`Pass` changes, the expected actions stay — they pin the
behaviour the rewrite must keep.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from operators.tdset import desired, handlers
from operators.tdset.api import PatchExpectations, StoredTemplates, TDSetAPI
from shared.api import conditions, ownership
from shared.api.clock import Clock
from shared.api.services import view as service_view
from shared.client.kube import namespaced
from shared.controller import caches
from tests.framework.fakekube import FakeKube

NS = "ns"
TDS = "schedule.rs/v1"
TDS_PATH = namespaced(NS, "tdsets", "shop", TDS)
DEP_PATH = namespaced(NS, "deployments", "shop", "apps/v1")
# Half past ten (UTC): inside the window 10-11 of the TDSet below, far from its boundaries.
NOW = datetime.datetime.now(datetime.UTC).replace(hour=10, minute=30, second=0, microsecond=0)


def tdset() -> dict[str, Any]:
    return {
        "apiVersion": TDS,
        "kind": "TDSet",
        "metadata": {"name": "shop", "namespace": NS},
        "spec": {
            "container": {"image": "nginx:1.27", "port": 80},
            "schedulingConfig": [{"startTime": 10, "endTime": 11, "replica": 5}],
            "defaultReplica": 1,
        },
    }


class Pass:
    """The TDSet operator's wiring around one FakeKube: what a reconciler will take injected."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, kube: FakeKube) -> None:
        self.kube = kube
        self.events: list[tuple[str, str, str]] = []
        monkeypatch.setattr(handlers, "api", TDSetAPI(kube))
        monkeypatch.setattr(handlers, "clock", Clock(NOW - datetime.datetime.now(datetime.UTC)))
        monkeypatch.setattr(handlers, "deployments", caches.OwnerCache(desired.deployment_view))
        monkeypatch.setattr(handlers, "services", caches.OwnerCache(service_view))
        monkeypatch.setattr(handlers, "autoscalers", {})
        monkeypatch.setattr(handlers, "expectations", PatchExpectations())
        monkeypatch.setattr(handlers, "stored_templates", StoredTemplates())
        monkeypatch.setattr(
            handlers,
            "post_event",
            lambda body, *, type, reason, message: self.events.append((type, reason, message)),
        )

    def watch(self, *paths: str) -> None:
        """The watches deliver the objects now stored at ``paths`` to the caches."""
        for path in paths:
            obj = self.kube.object(path)
            assert obj is not None
            handlers.deployments.observe("MODIFIED", obj)

    def run(self) -> float | None:
        """One pass over the TDSet as the API server holds it now."""
        self.kube.clear_actions()
        self.events.clear()
        return asyncio.run(handlers.reconcile(self.kube.object(TDS_PATH)))


def test_a_new_tdset_gets_its_deployment_at_the_scheduled_replicas_then_a_status(monkeypatch):
    kube = FakeKube(tdset())
    p = Pass(monkeypatch, kube)
    owner = kube.object(TDS_PATH)

    p.run()
    assert kube.keys() == [
        ("create", "deployments", NS, "shop", ""),
        ("patch", "tdsets", NS, "shop", "status"),
    ]
    deployment = kube.object(DEP_PATH)
    assert deployment["spec"]["replicas"] == 5
    assert ownership.is_controlled_by(deployment, owner["metadata"]["uid"])
    status = kube.object(TDS_PATH)["status"]
    assert (status["desiredReplicas"], status["observedGeneration"]) == (5, 1)
    assert [reason for _, reason, _ in p.events] == ["CreatedDeployment"]


def test_a_pass_with_nothing_to_do_writes_nothing(monkeypatch):
    kube = FakeKube(tdset())
    p = Pass(monkeypatch, kube)
    p.run()
    p.watch(DEP_PATH)
    p.run()
    assert kube.actions == [] and p.events == []


def test_a_deployment_scaled_by_hand_is_scaled_back_and_reported_in_a_pass_of_its_own(monkeypatch):
    kube = FakeKube(tdset())
    p = Pass(monkeypatch, kube)
    p.run()
    asyncio.run(kube.merge_patch(DEP_PATH, {"spec": {"replicas": 2}}))  # kubectl scale
    p.watch(DEP_PATH)

    assert p.run() == 0.0  # the schedule's write now, the status from the next pass
    assert kube.keys() == [("patch", "deployments", NS, "shop", "")]
    assert kube.object(DEP_PATH)["spec"]["replicas"] == 5
    assert [(t, reason) for t, reason, _ in p.events] == [("Normal", "RevertedManualScale")]


def test_a_deployment_someone_else_holds_is_reported_and_never_written(monkeypatch):
    stranger = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "shop", "namespace": NS},
        "spec": {"replicas": 1},
    }
    kube = FakeKube(tdset(), stranger)
    p = Pass(monkeypatch, kube)

    with pytest.raises(handlers.ReconcileError, match="DeploymentConflict"):
        p.run()
    assert kube.keys(reads=True) == [
        ("create", "deployments", NS, "shop", ""),  # refused: AlreadyExists
        ("get", "deployments", NS, "shop", ""),
        ("patch", "tdsets", NS, "shop", "status"),
    ]
    assert kube.object(DEP_PATH)["spec"] == {"replicas": 1}
    ready = conditions.get(kube.object(TDS_PATH)["status"]["conditions"], "Ready")
    assert ready is not None and ready["reason"] == "DeploymentConflict"
    assert [(t, reason) for t, reason, _ in p.events] == [("Warning", "DeploymentConflict")]
