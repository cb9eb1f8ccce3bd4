"""``spec.scaleTargetRef`` pass by pass, on the fake API server: which requests a pass
sends to read, claim and scale a target through ``/scale``, the conflict of a second TDSet, and
the give-back sweeps (TDSet deleted, also while the operator was down; reference changed).

The reconciler is built as the operator runs it (``tests.framework.passes.OnePass``).
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from operators.tdset import schedule, status, target
from operators.tdset.description import DESCRIPTION
from operators.tdset.reconciler import TDSetReconciler
from shared.api import conditions
from shared.api.errors import ReconcileError, TerminalError
from shared.client.kube import namespaced
from tests.framework.clocks import FrozenClock
from tests.framework.fakekube import FakeKube, Resource, fail
from tests.framework.passes import OnePass

NS = "ns"
TDS = "schedule.rs/v1"
TDS_PATH = namespaced(NS, "tdsets", "shop", TDS)
# Half past ten (UTC): inside the window 10-11 of the TDSet below, far from its boundaries.
NOW = datetime.datetime.now(datetime.UTC).replace(hour=10, minute=30, second=0, microsecond=0)
DISCOVERY = ("get", "", "", "", "")
WIDGETS = Resource(
    "example.com",
    ("v1",),
    "widgets",
    "Widget",
    status=True,
    custom=True,
    scale=("spec.size", "status.size", "status.selector"),
)


def tdset(ref: dict[str, str] | None, name: str = "shop", **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulingConfig": [{"startTime": 10, "endTime": 11, "replica": 5}],
        "defaultReplica": 1,
        **extra,
    }
    if ref is not None:
        spec["scaleTargetRef"] = ref
    return {"apiVersion": TDS, "kind": "TDSet", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def ref(kind: str = "Deployment", name: str = "web", api_version: str = "apps/v1") -> dict[str, str]:
    return {"apiVersion": api_version, "kind": kind, "name": name}


def workload(kind: str = "Deployment", name: str = "web", replicas: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
        "status": {"replicas": replicas, "readyReplicas": replicas},
    }


def path(plural: str = "deployments", name: str = "web", gv: str = "apps/v1") -> str:
    return namespaced(NS, plural, name, gv)


class Pass(OnePass):
    """The TDSet operator on one FakeKube at ``NOW``, with the sweeps allowed to run."""

    def __init__(self, kube: FakeKube, tds_path: str = TDS_PATH) -> None:
        super().__init__(
            DESCRIPTION,
            TDSetReconciler,
            kube,
            tds_path,
            FrozenClock(at=NOW),
        )
        assert isinstance(self.reconciler, TDSetReconciler)
        self.tds = self.reconciler
        self.tds.target_sweeps._active = lambda: True
        self.tds.floor_sweeps._active = lambda: True
        self.live: set[str] = set()
        self.operator.controller.uids = lambda: set(self.live)  # type: ignore[method-assign]
        self.tds.floor_sweeps._live = self.operator.controller.uids

    def see(self, *paths: str) -> None:
        """The TDSets at ``paths`` are live and their watch delivered them (and the sweeps that
        asks for ran: ``events`` holds their Events)."""
        self.kube.clear_actions()

        async def deliver() -> None:
            for p in paths:
                body = self.kube.object(p)
                assert body is not None
                self.live.add(body["metadata"]["uid"])
                self.tds.primary_changed("MODIFIED", body)
            await self.tds.target_sweeps.wait()
            await self.tds.floor_sweeps.wait()
            await self.operator.events.flush()

        asyncio.run(deliver())
        self.events = self.kube.events()

    def sweep(self, *, start: bool = False, forget: str = "") -> None:
        """One round of the give-back sweep: at start-up, or after ``forget`` (a deletion)."""
        self.kube.clear_actions()

        async def run() -> None:
            if start:
                self.tds.started()
            if forget:
                self.live.discard(forget)
                self.operator.forget(forget)
            await self.tds.target_sweeps.wait()
            await self.tds.floor_sweeps.wait()
            await self.operator.events.flush()

        asyncio.run(run())
        self.events = self.kube.events()
        self.kube.actions[:] = [a for a in self.kube.actions if a.resource != "events"]


def uid(kube: FakeKube, p: str = TDS_PATH) -> str:
    obj = kube.object(p)
    assert obj is not None
    return str(obj["metadata"]["uid"])


def claim(kube: FakeKube, p: str) -> target.Claim:
    obj = kube.object(p)
    assert obj is not None
    return target.claim_of(obj)


@pytest.mark.parametrize(
    ("obj", "reference", "plural", "gv"),
    [
        (workload(), ref(), "deployments", "apps/v1"),
        (workload("StatefulSet"), ref("StatefulSet"), "statefulsets", "apps/v1"),
        (workload("ReplicaSet"), ref("ReplicaSet"), "replicasets", "apps/v1"),
        (
            {
                "apiVersion": "demo.k8s.io/v1alpha1",
                "kind": "WebServer",
                "metadata": {"name": "web", "namespace": NS},
                "spec": {"replicas": 2},
            },
            ref("WebServer", api_version="demo.k8s.io/v1alpha1"),
            "webservers",
            "demo.k8s.io/v1alpha1",
        ),
        (
            {
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "web", "namespace": NS},
                "spec": {"size": 2},
            },
            ref("Widget", api_version="example.com/v1"),
            "widgets",
            "example.com/v1",
        ),
    ],
    ids=["deployment", "statefulset", "replicaset", "webserver", "crd"],
)
def test_a_target_is_found_by_discovery_claimed_then_scaled_through_scale(obj, reference, plural, gv):
    kube = FakeKube(tdset(reference), obj, resources=[WIDGETS])
    p = Pass(kube)
    p.see(TDS_PATH)

    # An apps kind's Scale is its object's own fields: read with the object, no GET of /scale.
    scale_read = [] if gv == "apps/v1" else [("get", plural, NS, "web", "scale")]
    assert p.run() == 0.0  # the schedule's write now, the status from the next pass
    assert kube.keys(reads=True) == [
        DISCOVERY,
        ("get", plural, NS, "web", ""),
        *scale_read,
        ("patch", plural, NS, "web", ""),  # the claim: label and annotations only
        ("patch", plural, NS, "web", "scale"),
    ]
    claim_patch = kube.actions[2 + len(scale_read)].body
    assert set(claim_patch) == {"metadata"} and claim_patch["metadata"]["resourceVersion"]
    got = claim(kube, path(plural, gv=gv))
    assert (got.holder, got.holder_name, got.original) == (uid(kube), "shop", 2)
    stored = kube.object(path(plural, gv=gv))
    assert stored is not None and "ownerReferences" not in stored["metadata"]  # never owned
    assert [reason for _, reason, _ in p.events] == ["ClaimedTarget", "ScaledTarget"]

    p.run()  # discovery is cached; the target is read, nothing written but the status
    assert kube.keys(reads=True) == [
        ("get", plural, NS, "web", ""),
        *scale_read,
        ("patch", "tdsets", NS, "shop", "status"),
    ]
    st = kube.object(TDS_PATH)["status"]
    assert (st["desiredReplicas"], st["scheduledReplicas"]) == (5, 5)
    assert conditions.get(st["conditions"], "Degraded")["status"] == "False"


def test_a_target_scaled_by_hand_is_scaled_back_at_the_next_pass():
    kube = FakeKube(tdset(ref()), workload())
    p = Pass(kube)
    p.see(TDS_PATH)
    p.run()
    p.run()
    asyncio.run(kube.client().merge_patch(path() + "/scale", {"spec": {"replicas": 9}}))  # kubectl scale

    assert p.run() == 0.0
    assert kube.keys() == [("patch", "deployments", NS, "web", "scale")]
    assert kube.object(path())["spec"]["replicas"] == 5
    assert [reason for _, reason, _ in p.events] == ["RevertedManualScale"]
    assert claim(kube, path()).original == 2  # what it had before any TDSet, still


def test_a_flip_of_a_held_target_is_one_request_and_the_next_pass_reads_it():
    kube = FakeKube(tdset(ref()), workload())
    p = Pass(kube)
    p.see(TDS_PATH)
    p.run()
    p.run()
    target_uid = kube.object(path())["metadata"]["uid"]
    # The schedule now says 7 (as at a boundary): the write goes out alone, UID as precondition.
    asyncio.run(kube.client().merge_patch(TDS_PATH, {"spec": {"schedulingConfig": [
        {"startTime": 10, "endTime": 11, "replica": 7}]}}))  # fmt: skip

    assert p.run() == 0.0
    assert kube.keys(reads=True) == [("patch", "deployments", NS, "web", "scale")]
    assert kube.actions[0].body == {"spec": {"replicas": 7}, "metadata": {"uid": target_uid}}
    assert kube.object(path())["spec"]["replicas"] == 7
    assert p.events == []  # the boundary's writes first: its Event comes with the next pass
    p.run()  # the pass that follows reads the target (its Scale with it) and writes the status
    assert [(reason, message.split(":")[0]) for _, reason, message in p.events] == [
        ("ScaledTarget", "Scaled Deployment web (apps/v1) from 5 to 7")
    ]
    assert kube.keys(reads=True) == [
        ("get", "deployments", NS, "web", ""),
        ("patch", "tdsets", NS, "shop", "status"),
    ]
    assert kube.object(TDS_PATH)["status"]["desiredReplicas"] == 7


def test_a_flip_of_a_custom_resource_reads_it_first():
    # Its /scale would ignore the UID: a replaced object must not be written unclaimed.
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {"size": 2},
    }
    kube = FakeKube(tdset(ref("Widget", api_version="example.com/v1")), widget, resources=[WIDGETS])
    p = Pass(kube)
    p.see(TDS_PATH)
    p.run()
    p.run()
    asyncio.run(kube.client().merge_patch(TDS_PATH, {"spec": {"schedulingConfig": [
        {"startTime": 10, "endTime": 11, "replica": 7}]}}))  # fmt: skip

    assert p.run() == 0.0
    assert kube.keys(reads=True) == [
        ("get", "widgets", NS, "web", ""),
        ("get", "widgets", NS, "web", "scale"),
        ("patch", "widgets", NS, "web", "scale"),
    ]


def test_a_flip_of_a_target_replaced_meanwhile_is_refused_and_the_pass_claims_the_new_one():
    kube = FakeKube(tdset(ref()), workload())
    p = Pass(kube)
    p.see(TDS_PATH)
    p.run()
    p.run()
    asyncio.run(kube.client().delete(path()))
    kube.add(workload(replicas=3))  # another object under the name
    asyncio.run(kube.client().merge_patch(TDS_PATH, {"spec": {"schedulingConfig": [
        {"startTime": 10, "endTime": 11, "replica": 7}]}}))  # fmt: skip

    assert p.run() == 0.0
    assert kube.keys() == [
        ("patch", "deployments", NS, "web", "scale"),  # refused: UID precondition
        ("patch", "deployments", NS, "web", ""),  # the claim on the new object
        ("patch", "deployments", NS, "web", "scale"),
    ]
    assert kube.object(path())["spec"]["replicas"] == 7
    assert claim(kube, path()).original == 3


@pytest.mark.parametrize(
    ("obj", "reference", "reason", "fragment"),
    [
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": NS}},
            ref("ConfigMap", api_version="v1"),
            "TargetNotScalable",
            "ConfigMap (configmaps.core) has no scale subresource",
        ),
        (
            None,
            ref("Gadget", api_version="example.com/v1"),
            "TargetNotScalable",
            "no kind Gadget in example.com/v1",
        ),
        (None, ref("Gadget", api_version="nowhere.io/v1"), "TargetNotScalable", "serves no nowhere.io/v1"),
        (None, ref(), "TargetNotFound", "Deployment web (apps/v1) not found in ns"),
    ],
    ids=["no-scale", "unknown-kind", "unknown-group", "missing"],
)
def test_a_target_that_cannot_be_scaled_is_degraded_with_the_reason(obj, reference, reason, fragment):
    kube = FakeKube(tdset(reference), *([obj] if obj else []), resources=[WIDGETS])
    p = Pass(kube)
    p.see(TDS_PATH)

    with pytest.raises(ReconcileError, match=reason):
        p.run()
    assert kube.keys() == [("patch", "tdsets", NS, "shop", "status")]  # nothing else written
    degraded = conditions.get(kube.object(TDS_PATH)["status"]["conditions"], "Degraded")
    assert degraded is not None and degraded["reason"] == reason and fragment in degraded["message"]
    assert [(t, r) for t, r, _ in p.events] == [("Warning", reason)]


def test_a_target_the_operator_may_not_scale_says_how_to_allow_it():
    kube = FakeKube(tdset(ref("Widget", api_version="example.com/v1")), resources=[WIDGETS])
    kube.add(
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"size": 1},
        }
    )
    kube.prepend_reactor("get", "widgets", fail(403))
    p = Pass(kube)
    p.see(TDS_PATH)

    with pytest.raises(ReconcileError, match="TargetForbidden"):
        p.run()
    degraded = conditions.get(kube.object(TDS_PATH)["status"]["conditions"], "Degraded")
    assert degraded is not None and DESCRIPTION.aggregate_label in degraded["message"]


def test_a_second_tdset_on_a_held_target_is_a_conflict_and_writes_nothing_to_it():
    first_path = namespaced(NS, "tdsets", "first", TDS)
    kube = FakeKube(tdset(ref(), name="first"), tdset(ref()), workload())
    first = Pass(kube, first_path)
    first.see(first_path)
    first.run()
    second = Pass(kube)
    second.live = first.live
    second.see(TDS_PATH)

    with pytest.raises(ReconcileError, match="TargetConflict"):
        second.run()
    assert kube.keys(reads=True) == [
        DISCOVERY,
        ("get", "deployments", NS, "web", ""),
        ("patch", "tdsets", NS, "shop", "status"),
    ]
    st = kube.object(TDS_PATH)["status"]
    assert conditions.get(st["conditions"], "Stalled")["reason"] == "TargetConflict"
    ((kind, reason, message),) = second.events
    assert (kind, reason) == ("Warning", "TargetConflict") and "TDSet first" in message
    assert claim(kube, path()).holder == uid(kube, first_path)

    # The first TDSet goes: its target is given back, and the second is woken to take it.
    kicked: list[tuple[str, str]] = []
    second.operator.controller.kick = lambda ns, name: kicked.append((ns, name))  # type: ignore[method-assign]
    second.sweep(start=True)
    first_uid = uid(kube, first_path)
    kube.remove(first_path)
    second.sweep(forget=first_uid)
    assert claim(kube, path()).holder is None and kicked == [(NS, "shop")]
    second.run()
    assert claim(kube, path()).holder == uid(kube) and claim(kube, path()).original == 2


def test_a_claim_written_meanwhile_by_another_tdset_fails_on_the_resource_version():
    """Two first claims at once: the second patch carries the resourceVersion it read, the API
    server refuses it once the first claim changed the object, and the pass, reading again,
    finds the target taken (never a tug of war)."""
    kube = FakeKube(tdset(ref()), workload())
    p = Pass(kube)
    p.see(TDS_PATH)
    p.live.add("other-uid")  # a live TDSet

    async def claimed_first(action: Any) -> None:
        other = {"metadata": {"labels": {target.HOLDER: "other-uid"}}}
        await kube.client().merge_patch(path(), other)

    kube.prepend_reactor("patch", "deployments", claimed_first, times=1)
    with pytest.raises(ReconcileError, match="TargetConflict"):
        p.run()
    assert [a.key for a in kube.actions if a.resource == "deployments"] == [
        ("get", "deployments", NS, "web", ""),
        ("patch", "deployments", NS, "web", ""),  # refused: 409
        ("get", "deployments", NS, "web", ""),
    ]
    assert claim(kube, path()).holder == "other-uid"
    assert kube.object(path())["spec"]["replicas"] == 2


def test_a_claim_refused_because_the_controller_wrote_the_status_is_retried_once():
    kube = FakeKube(tdset(ref()), workload())
    p = Pass(kube)
    p.see(TDS_PATH)

    async def status_written(action: Any) -> None:
        await kube.client().merge_patch(path() + "/status", {"status": {"observedGeneration": 1}})

    kube.prepend_reactor("patch", "deployments", status_written, times=1)
    assert p.run() == 0.0
    assert claim(kube, path()).holder == uid(kube)
    assert kube.object(path())["spec"]["replicas"] == 5


def test_a_claim_left_by_a_tdset_that_is_gone_is_taken_over_keeping_the_original_replicas():
    stale = workload(replicas=7)
    stale["metadata"]["labels"] = {target.HOLDER: "gone-uid"}
    stale["metadata"]["annotations"] = {target.HOLDER_NAME: "old", target.ORIGINAL: "3"}
    kube = FakeKube(tdset(ref()), stale)
    p = Pass(kube)
    p.see(TDS_PATH)
    p.run()
    got = claim(kube, path())
    assert (got.holder, got.original) == (uid(kube), 3)
    assert "taken over from TDSet old" in p.events[0][2]


def test_an_hpa_on_the_target_gets_the_floor_and_the_target_is_not_scaled():
    autoscaler = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web-hpa", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 10,
        },
    }
    kube = FakeKube(tdset(ref("StatefulSet")), workload("StatefulSet"), autoscaler)
    p = Pass(kube)
    p.see(TDS_PATH)
    p.tds.autoscaler_changed(
        "ADDED", kube.object(namespaced(NS, "horizontalpodautoscalers", "web-hpa", "autoscaling/v2"))
    )

    p.run()
    writes = kube.keys()
    assert ("patch", "horizontalpodautoscalers", NS, "web-hpa", "") in writes
    assert ("patch", "statefulsets", NS, "web", "scale") not in writes
    hpa = kube.object(namespaced(NS, "horizontalpodautoscalers", "web-hpa", "autoscaling/v2"))
    assert hpa["spec"]["minReplicas"] == 5
    assert kube.object(TDS_PATH)["status"]["autoscaler"] == "web-hpa"


def test_pointing_away_from_a_target_with_an_hpa_gives_the_hpa_its_floor_back():
    hpa_path = namespaced(NS, "horizontalpodautoscalers", "web-hpa", "autoscaling/v2")
    autoscaler = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web-hpa", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"},
            "minReplicas": 2,
            "maxReplicas": 10,
        },
    }
    kube = FakeKube(tdset(ref("StatefulSet")), workload("StatefulSet"), workload(name="other"), autoscaler)
    p = Pass(kube)
    p.see(TDS_PATH)
    p.tds.autoscaler_changed("ADDED", kube.object(hpa_path))
    p.run()
    assert kube.object(hpa_path)["spec"]["minReplicas"] == 5

    async def floor_seen() -> None:  # the watch shows the raised floor (the sweep keeps it)
        p.tds.autoscaler_changed("MODIFIED", kube.object(hpa_path))
        await p.tds.floor_sweeps.wait()

    asyncio.run(floor_seen())
    assert kube.object(hpa_path)["spec"]["minReplicas"] == 5
    asyncio.run(kube.client().merge_patch(TDS_PATH, {"spec": {"scaleTargetRef": ref(name="other")}}))

    p.see(TDS_PATH)  # the watch delivers the new reference: both sweeps run
    assert kube.object(hpa_path)["spec"]["minReplicas"] == 2
    assert claim(kube, path("statefulsets")).holder is None
    # Its replicas are the HPA's to set: released, not set back.
    written = kube.keys()
    assert ("patch", "statefulsets", NS, "web", "") in written  # the claim dropped
    assert ("patch", "statefulsets", NS, "web", "scale") not in written
    assert "Released to its HPA" in p.events[0][2]


def test_deleting_the_tdset_gives_the_replicas_back_and_drops_the_claim():
    kube = FakeKube(tdset(ref()), workload())
    p = Pass(kube)
    p.see(TDS_PATH)
    p.sweep(start=True)  # the start-up listing, done before
    p.run()
    assert kube.object(path())["spec"]["replicas"] == 5
    tds_uid = uid(kube)
    kube.remove(TDS_PATH)

    p.sweep(forget=tds_uid)
    assert kube.keys(reads=True) == [
        ("get", "deployments", NS, "web", ""),
        ("patch", "deployments", NS, "web", "scale"),
        ("patch", "deployments", NS, "web", ""),
    ]
    obj = kube.object(path())
    assert obj["spec"]["replicas"] == 2
    assert target.claim_of(obj) == target.Claim(
        obj["metadata"]["uid"], obj["metadata"]["resourceVersion"], None, None, None
    )
    ((_, reason, message),) = p.events
    assert reason == "GaveBackReplicas" and "set back to 2" in message


def test_a_claim_left_while_the_operator_was_down_is_found_at_start_and_given_back():
    left = workload("StatefulSet", replicas=5)
    left["metadata"]["labels"] = {target.HOLDER: "deleted-while-down"}
    left["metadata"]["annotations"] = {target.HOLDER_NAME: "old", target.ORIGINAL: "1"}
    kept = workload(name="kept", replicas=5)
    kube = FakeKube(left, kept, tdset(ref(name="kept")))
    p = Pass(kube)
    p.see(TDS_PATH)
    p.run()  # the live TDSet claims "kept"
    kube.prepend_reactor("list", "webservers", fail(404))  # a cluster without the WebServer CRD

    p.sweep(start=True)
    assert p.tds.target_sweeps._listed  # a kind not served holds no claim: listed all the same
    listed = [a.key for a in kube.actions if a.verb == "list"]
    assert listed == [
        ("list", "deployments", "", "", ""),
        ("list", "statefulsets", "", "", ""),
        ("list", "replicasets", "", "", ""),
        ("list", "webservers", "", "", ""),
    ]
    assert all(a.params["labelSelector"] == target.HOLDER for a in kube.actions if a.verb == "list")
    assert kube.object(path("statefulsets"))["spec"]["replicas"] == 1
    assert claim(kube, path("statefulsets")).holder is None
    assert claim(kube, path(name="kept")).holder == uid(kube)  # its TDSet still wants it
    assert kube.object(path(name="kept"))["spec"]["replicas"] == 5


def test_pointing_elsewhere_gives_the_old_target_back():
    kube = FakeKube(tdset(ref()), workload(), workload(name="other", replicas=1))
    p = Pass(kube)
    p.see(TDS_PATH)
    p.sweep(start=True)
    p.run()
    asyncio.run(kube.client().merge_patch(TDS_PATH, {"spec": {"scaleTargetRef": ref(name="other")}}))

    p.see(TDS_PATH)  # the watch delivers the new reference: the sweep gives "web" back
    assert kube.object(path())["spec"]["replicas"] == 2 and claim(kube, path()).holder is None
    p.run()
    assert claim(kube, path(name="other")).holder == uid(kube)
    assert kube.object(path(name="other"))["spec"]["replicas"] == 5


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ({"scaleTargetRef": ref(), "container": {"image": "nginx:1.27", "port": 80}}, "exactly one"),
        ({}, "exactly one"),
        ({"scaleTargetRef": ref(), "service": {"port": 80}}, "spec.service"),
    ],
    ids=["both", "neither", "service-without-container"],
)
def test_the_controller_checks_what_cel_checks(extra, fragment):
    body = tdset(None)
    body["spec"].update(extra)
    kube = FakeKube(body, workload())
    p = Pass(kube)
    p.see(TDS_PATH)
    with pytest.raises(TerminalError):
        p.run()
    assert kube.keys() == [("patch", "tdsets", NS, "shop", "status")]
    degraded = conditions.get(kube.object(TDS_PATH)["status"]["conditions"], "Degraded")
    assert degraded["reason"] == "InvalidSpec" and fragment in degraded["message"]


def test_a_pre_warmed_target_is_polled_until_ready_and_ready_at_is_when_a_pass_saw_it():
    """A target is not watched: while pre-warm waits for it, the next pass comes as long after as
    it has waited (at least 5 s), so ``readyAt`` is not the window's start."""
    window = {
        "name": "peak",
        "startTime": 10,
        "startMinute": 40,
        "endTime": 11,
        "replica": 5,
        "leadTime": "20m",
    }
    kube = FakeKube(tdset(ref(), schedulingConfig=[window]), workload())
    p = Pass(kube)  # 10:30: pre-warm began at 10:20, the window opens at 10:40
    p.see(TDS_PATH)
    assert p.run() == 0.0  # scaled to 5 at once
    assert kube.object(path())["spec"]["replicas"] == 5
    # Not ready yet, and the scale-up just began: look again in 5 s (then after as long as it took).
    assert p.run() == status.TARGET_POLL[0]
    assert "readyAt" not in kube.object(TDS_PATH)["status"]["preWarm"]
    asyncio.run(
        kube.client().merge_patch(path() + "/status", {"status": {"replicas": 5, "readyReplicas": 5}})
    )
    assert p.run() == pytest.approx(600, abs=1)  # ready: the next wake-up is the window's start
    pre = kube.object(TDS_PATH)["status"]["preWarm"]
    assert (pre["readyAt"], pre["readySecondsAfterStart"]) == (conditions.rfc3339(NOW), -600)


def test_a_scaled_target_is_polled_until_it_caught_up_so_ready_is_not_an_hour_late():
    """Seen on a dev cluster: READY stayed at the old count until the next boundary."""
    kube = FakeKube(tdset(ref()), workload())
    p = Pass(kube)
    p.see(TDS_PATH)
    assert p.run() == 0.0  # 2 -> 5 through /scale
    assert p.run() == status.TARGET_POLL[0]  # the target has not caught up: look again soon
    st = kube.object(TDS_PATH)["status"]
    assert (st["readyReplicas"], conditions.get(st["conditions"], "Progressing")["status"]) == (2, "True")
    asyncio.run(
        kube.client().merge_patch(path() + "/status", {"status": {"replicas": 5, "readyReplicas": 5}})
    )
    assert p.run() == pytest.approx(30 * 60, abs=1)  # caught up: the window's end (11:00)
    st = kube.object(TDS_PATH)["status"]
    assert (st["readyReplicas"], conditions.get(st["conditions"], "Progressing")["reason"]) == (
        5,
        "DeploymentReady",
    )


def test_polls_start_fast_slow_down_and_stop_once_nothing_waits():
    opens = NOW + datetime.timedelta(minutes=1)
    window = schedule.Window(0, 0, 60, 5, frozenset(range(7)), "peak", datetime.timedelta(seconds=90))
    warming = schedule.Decision(
        5, None, opens, schedule.Decided(5, schedule.LEAD_TIME, "peak", window, opens)
    )
    record = {"entry": "peak", "windowStart": conditions.rfc3339(opens), "replicas": 5}
    # 30 s into a 90 s lead: in 30 s (the waits double); at its very start, in 5 s.
    assert status.target_recheck({"preWarm": record}, warming, NOW) == pytest.approx(30.0)
    began = opens - datetime.timedelta(seconds=90)
    assert status.target_recheck({"preWarm": record}, warming, began) == status.TARGET_POLL[0]
    assert status.target_recheck({"preWarm": {**record, "readyAt": "x"}}, warming, NOW) is None
    default = schedule.Decision(1, None, None, schedule.Decided(1, schedule.DEFAULT))
    assert status.target_recheck({"preWarm": record}, default, NOW) is None

    def progressing(state: str, reason: str, minutes_ago: float) -> dict[str, Any]:
        since = NOW - datetime.timedelta(minutes=minutes_ago)
        return {
            "conditions": [
                {
                    "type": "Progressing",
                    "status": state,
                    "reason": reason,
                    "lastTransitionTime": conditions.rfc3339(since),
                }
            ]
        }

    assert status.target_recheck(progressing("True", "WaitingForReady", 1), default, NOW) == pytest.approx(60)
    assert status.target_recheck(progressing("True", "Scaling", 60), default, NOW) == status.TARGET_POLL[1]
    assert status.target_recheck(progressing("False", "DeploymentReady", 5), default, NOW) is None
    assert status.target_recheck(progressing("False", "Suspended", 5), default, NOW) is None


def test_the_scale_of_an_apps_object_is_read_from_its_own_fields():
    """What the apps registry's /scale answers for a Deployment, StatefulSet or ReplicaSet, from
    the object read anyway (one GET per pass instead of two)."""
    dep = {
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web", "tier": "front"},
                "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "canary"]},
                    {"key": "legacy", "operator": "DoesNotExist"},
                ],
            },
        },
        "status": {"replicas": 2, "readyReplicas": 1},
    }
    assert target.scale_of_object(dep) == target.ScaleView(
        replicas=3, status_replicas=2, selector="app=web,tier=front,env in (canary,prod),!legacy"
    )
    assert target.scale_of_object({"spec": {"replicas": 0}}) == target.ScaleView(0, 0, "")


def owned(obj: dict[str, Any], kind: str = "Deployment", name: str = "web-owner") -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "owner-uid", "controller": True}
    ]
    return obj


@pytest.mark.parametrize(
    ("obj", "reference", "plural", "holder"),
    [
        (owned(workload("ReplicaSet")), ref("ReplicaSet"), "replicasets", "Deployment web-owner"),
        (owned(workload(), "TDSet", "other"), ref(), "deployments", "TDSet other"),
    ],
    ids=["deployments-replicaset", "another-tdsets-deployment"],
)
def test_a_target_another_controller_holds_is_a_conflict_once_with_no_write_to_it_or_its_hpa(
    obj, reference, plural, holder
):
    """A target with an owner reference ``controller: true`` (a Deployment's ReplicaSet,
    another TDSet's own Deployment) is that controller's to scale: a TargetConflict naming it,
    nothing written to the target or to an HPA on it, the Event once (not per retry), and the
    conflict gone by itself once the controller lets go."""
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": reference["kind"], "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 10,
        },
    }
    kube = FakeKube(tdset(reference), obj, hpa)
    p = Pass(kube)
    p.tds.autoscaler_changed(
        "ADDED", kube.object(namespaced(NS, "horizontalpodautoscalers", "web", "autoscaling/v2"))
    )
    p.see(TDS_PATH)

    for attempt in (1, 2):
        with pytest.raises(ReconcileError, match="TargetConflict") as failed:
            p.run()
        assert failed.value.not_after is not None and failed.value.not_after <= 30
        writes = [a.key for a in kube.writes()]
        assert all(key[1] == "tdsets" for key in writes), writes  # the status at most
        st = kube.object(TDS_PATH)["status"]
        degraded = conditions.get(st["conditions"], "Degraded")
        assert degraded["reason"] == "TargetConflict" and holder in degraded["message"]
        assert [e[1] for e in p.events] == (["TargetConflict"] if attempt == 1 else [])
    assert claim(kube, path(plural)).holder is None
    assert kube.object(path(plural))["spec"]["replicas"] == 2

    # The controller lets go (an orphaned object): the next pass claims and schedules it.
    asyncio.run(kube.client().merge_patch(path(plural), {"metadata": {"ownerReferences": None}}))
    p.run()
    assert claim(kube, path(plural)).holder == uid(kube)


def _claimed_by_a_new_tdset(kube: FakeKube, replicas: int) -> Callable[[Any], Awaitable[None]]:
    """What a TDSet re-created under the same name does in its first pass, slipped in between
    the give-back's read and its write: it takes the claim (keeping the recorded original) and
    scales the target to its schedule."""

    async def reclaim(action: Any) -> None:
        obj = kube.object(path())
        assert obj is not None
        found = target.claim_of(obj)
        new_owner = {"metadata": {"name": "shop", "uid": "new-uid"}}
        await kube.client().merge_patch(path(), target.claim_patch(found, new_owner, obj["spec"]["replicas"]))
        await kube.client().merge_patch(path() + "/scale", target.scale_patch(replicas))

    return reclaim


@pytest.mark.parametrize("slipped_before", ["scale", ""], ids=["before-the-scale", "before-the-release"])
def test_a_tdset_recreated_under_the_name_during_the_give_back_keeps_the_original_replicas(slipped_before):
    """Deleted and re-created at once: the new TDSet's claim lands between the give-back's read
    and one of its writes. The give-back's writes carry the resourceVersion read, so it neither
    sets the replicas under the new holder nor drops its claim: the user's 2 stay recorded as
    the original (not the 5 the first TDSet scaled it to), and the new holder keeps the target."""
    kube = FakeKube(tdset(ref()), workload(replicas=2))
    p = Pass(kube)
    p.see(TDS_PATH)
    p.sweep(start=True)
    p.run()
    assert kube.object(path())["spec"]["replicas"] == 5
    old_uid = uid(kube)
    reclaim, done = _claimed_by_a_new_tdset(kube, 5), []

    async def slip_in(action: Any) -> None:
        if not done and action.subresource == slipped_before:
            done.append(action.key)
            await reclaim(action)

    kube.prepend_reactor("patch", "deployments", slip_in)
    p.live.add("new-uid")
    p.tds.wanted["new-uid"] = (NS, "shop", (NS, "apps", "Deployment", "web"))
    p.sweep(forget=old_uid)

    found = claim(kube, path())
    assert found.holder == "new-uid" and found.original == 2
    assert kube.object(path())["spec"]["replicas"] == 5
    assert done and not [e for e in p.events if e[1] == "GaveBackReplicas"]
