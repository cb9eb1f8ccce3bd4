"""One TDSet pass, tested as kubernetes/sample-controller tests its controller: objects in a fake
API server (:class:`tests.framework.fakekube.FakeKube`), one pass, the exact writes and Events.

The reconciler is built as the operator runs it (:class:`tests.framework.passes.OnePass`), with
the fake client and a fixed clock injected.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from operators.tdset.description import DESCRIPTION
from operators.tdset.reconciler import TDSetReconciler
from shared.api import conditions, ownership
from shared.api.clock import Clock
from shared.client.kube import namespaced
from shared.controller.workqueue import ReconcileError
from tests.framework.fakekube import FakeKube
from tests.framework.passes import OnePass

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


class Pass(OnePass):
    """The TDSet operator on one FakeKube, one pass at a time, at ``NOW``."""

    def __init__(self, kube: FakeKube) -> None:
        clock = Clock(NOW - datetime.datetime.now(datetime.UTC))
        super().__init__(DESCRIPTION, TDSetReconciler, kube, TDS_PATH, clock)
        assert isinstance(self.reconciler, TDSetReconciler)
        self.tds = self.reconciler

    def watch(self, *paths: str) -> None:
        """The watches deliver the objects now stored at ``paths`` to the caches."""
        for path in paths:
            obj = self.kube.object(path)
            assert obj is not None
            self.tds.deployments.observe("MODIFIED", obj)


def test_a_new_tdset_gets_its_deployment_at_the_scheduled_replicas_then_a_status():
    kube = FakeKube(tdset())
    p = Pass(kube)
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


def test_a_pass_with_nothing_to_do_writes_nothing():
    kube = FakeKube(tdset())
    p = Pass(kube)
    p.run()
    p.watch(DEP_PATH)
    p.run()
    assert kube.actions == [] and p.events == []


def test_a_deployment_scaled_by_hand_is_scaled_back_and_reported_in_a_pass_of_its_own():
    kube = FakeKube(tdset())
    p = Pass(kube)
    p.run()
    asyncio.run(kube.merge_patch(DEP_PATH, {"spec": {"replicas": 2}}))  # kubectl scale
    p.watch(DEP_PATH)

    assert p.run() == 0.0  # the schedule's write now, the status from the next pass
    assert kube.keys() == [("patch", "deployments", NS, "shop", "")]
    assert kube.object(DEP_PATH)["spec"]["replicas"] == 5
    assert [(t, reason) for t, reason, _ in p.events] == [("Normal", "RevertedManualScale")]


def test_a_deployment_someone_else_holds_is_reported_and_never_written():
    stranger = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "shop", "namespace": NS},
        "spec": {"replicas": 1},
    }
    kube = FakeKube(tdset(), stranger)
    p = Pass(kube)

    with pytest.raises(ReconcileError, match="DeploymentConflict"):
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
