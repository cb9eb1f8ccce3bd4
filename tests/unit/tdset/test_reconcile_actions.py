"""One TDSet pass, tested as kubernetes/sample-controller tests its controller: objects in a fake
API server (``tests.framework.fakekube.FakeKube``), one pass, the exact writes and Events.

The reconciler is built as the operator runs it (``tests.framework.passes.OnePass``), with
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
from shared.api.errors import ReconcileError
from shared.client.kube import namespaced
from tests.framework.clocks import FrozenClock
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
        clock = FrozenClock(at=NOW)
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


OVERRIDE = "tdset.k8s-operators-py.dev/override"


def annotated(value: str, **spec: Any) -> dict[str, Any]:
    body = tdset()
    body["metadata"]["annotations"] = {OVERRIDE: value}
    body["spec"].update(spec)
    return body


def test_the_override_annotation_decides_and_the_pass_wakes_when_it_expires():
    until = NOW + datetime.timedelta(minutes=10)
    kube = FakeKube(annotated(f"replicas=9,until={conditions.rfc3339(until)}"))
    p = Pass(kube)
    p.run()
    assert kube.object(DEP_PATH)["spec"]["replicas"] == 9
    p.watch(DEP_PATH)
    delay = p.run()
    # The expiry is the next transition: the loop is woken exactly then.
    assert delay == pytest.approx(600, abs=1)
    status = kube.object(TDS_PATH)["status"]
    assert status["decidedBy"] == {"layer": "override", "entry": "annotation"}
    assert status.get("activeWindow") is None
    assert status["upcoming"][0] == {
        "time": conditions.rfc3339(until),
        "localTime": until.isoformat(),
        "replicas": 5,
        "layer": "window",
        "entry": "0",
    }


def test_a_malformed_annotation_is_a_warning_and_degraded_and_the_schedule_runs_on():
    kube = FakeKube(annotated("replicas=many"))
    p = Pass(kube)
    p.run()
    assert kube.object(DEP_PATH)["spec"]["replicas"] == 5  # the window's, as without it
    assert [(t, reason) for t, reason, _ in p.events] == [
        ("Normal", "CreatedDeployment"),
        ("Warning", "InvalidOverrideAnnotation"),
    ]
    p.watch(DEP_PATH)
    p.run()
    status = kube.object(TDS_PATH)["status"]
    degraded = conditions.get(status["conditions"], "Degraded")
    assert degraded is not None and (degraded["status"], degraded["reason"]) == (
        "True",
        "InvalidOverrideAnnotation",
    )
    assert OVERRIDE in degraded["message"]
    assert status["decidedBy"] == {"layer": "window", "entry": "0"}
    assert p.events == []  # reported once, not on every pass


def test_lead_time_scales_up_before_the_window_and_records_when_ready():
    body = tdset()
    body["spec"]["schedulingConfig"] = [
        {"name": "peak", "startTime": 10, "startMinute": 40, "endTime": 11, "replica": 5, "leadTime": "15m"}
    ]
    kube = FakeKube(body)
    p = Pass(kube)
    p.run()
    assert kube.object(DEP_PATH)["spec"]["replicas"] == 5  # 10:30, the window opens at 10:40
    asyncio.run(
        kube.merge_patch(
            DEP_PATH + "/status", {"status": {"replicas": 5, "readyReplicas": 5, "updatedReplicas": 5}}
        )
    )
    p.watch(DEP_PATH)
    assert p.run() == pytest.approx(600, abs=1)
    status = kube.object(TDS_PATH)["status"]
    assert status["decidedBy"] == {"layer": "leadTime", "entry": "peak"}
    opens = NOW + datetime.timedelta(minutes=10)
    assert status["preWarm"] == {
        "entry": "peak",
        "windowStart": conditions.rfc3339(opens),
        "replicas": 5,
        "readyAt": conditions.rfc3339(NOW),
        "readySecondsAfterStart": -600,
    }
    assert [reason for _, reason, _ in p.events] == []


def metadata_of(obj: dict[str, Any]) -> dict[str, Any]:
    """What a metadata-only watch delivers of ``obj``: a PartialObjectMetadata."""
    return {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj["metadata"]}


def test_holidays_from_an_unlabelled_configmap_and_a_missing_one_is_degraded():
    body = tdset()
    body["spec"]["holidays"] = {"configMapRef": {"name": "days-off"}, "replicas": 0}
    kube = FakeKube(body)
    p = Pass(kube)
    p.run()
    status = kube.object(TDS_PATH)["status"]
    degraded = conditions.get(status["conditions"], "Degraded")
    assert degraded is not None and degraded["reason"] == "HolidaysUnavailable"
    assert "no ConfigMap days-off in namespace" in degraded["message"]
    assert ("Warning", "HolidaysUnavailable") in [(t, reason) for t, reason, _ in p.events]
    assert kube.object(DEP_PATH)["spec"]["replicas"] == 5  # the window's: the calendar runs on

    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "days-off", "namespace": NS},
        "data": {"dates": NOW.date().isoformat()},
    }
    p.tds.holidays.changed("ADDED", metadata_of(kube.add(configmap)))  # what the watch delivers
    p.watch(DEP_PATH)
    assert p.run() == 0.0
    assert kube.object(DEP_PATH)["spec"]["replicas"] == 0
    p.watch(DEP_PATH)
    p.run()
    status = kube.object(TDS_PATH)["status"]
    assert status["decidedBy"] == {"layer": "holiday", "entry": NOW.date().isoformat()}
    assert conditions.get(status["conditions"], "Degraded")["status"] == "False"
