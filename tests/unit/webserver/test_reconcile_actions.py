"""One WebServer pass, tested as kubernetes/sample-controller tests its controller: objects in a
fake API server (``tests.framework.fakekube.FakeKube``), one pass, the exact writes and Events.

The reconciler is built as the operator runs it (``tests.framework.passes.OnePass``), with
the fake client and a fixed clock injected.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from operators.webserver import reconciler
from operators.webserver.description import DESCRIPTION
from operators.webserver.reconciler import WebServerReconciler
from shared.api import conditions, ownership
from shared.api.errors import ApiError, ReconcileError, TerminalError
from shared.client.kube import namespaced
from tests.framework.fakekube import FakeKube, fail
from tests.framework.passes import OnePass

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


class Pass(OnePass):
    """The WebServer operator on one FakeKube, one pass at a time."""

    def __init__(self, kube: FakeKube, clock: Any = None) -> None:
        super().__init__(DESCRIPTION, WebServerReconciler, kube, WS_PATH, clock)
        assert isinstance(self.reconciler, WebServerReconciler)
        self.ws = self.reconciler

    def watch(self) -> None:
        """The pod watch delivers every pod now stored (and the budget watch the budgets)."""
        for pod in self.kube.objects("pods", NS):
            self.ws.pods.observe("MODIFIED", pod)
        for pdb in self.kube.objects("poddisruptionbudgets", NS, group="policy"):
            self.ws.budgets.observe("MODIFIED", pdb)


def pod_names(kube: FakeKube) -> list[str]:
    return [pod["metadata"]["name"] for pod in kube.objects("pods", NS)]


def test_a_new_webserver_gets_its_pods_then_a_status_per_pass_until_nothing_changes():
    kube = FakeKube(webserver(3))
    p = Pass(kube)
    owner = kube.object(WS_PATH)

    p.run()
    names = pod_names(kube)
    assert len(names) == 3
    assert kube.keys() == [
        *(("create", "pods", NS, name, "") for name in names),
        ("create", "poddisruptionbudgets", NS, "web", ""),  # replicas >= 2
        ("patch", "webservers", NS, "web", "status"),
    ]
    assert all(ownership.is_controlled_by(pod, owner["metadata"]["uid"]) for pod in kube.objects("pods"))
    assert p.events == [
        ("Normal", "SuccessfulCreate", f"Created pods: {', '.join(names)}"),
        ("Normal", "CreatedPodDisruptionBudget", "Created PodDisruptionBudget web"),
    ]

    p.watch()  # the pods' ADDED events: the status counts them
    p.run()
    assert kube.keys() == [("patch", "webservers", NS, "web", "status")]
    assert kube.object(WS_PATH)["status"]["replicas"] == 3

    p.run()  # the echo of that write
    assert kube.actions == [] and p.events == []


def test_scaling_down_deletes_pods_under_their_uid():
    kube = FakeKube(webserver(3))
    p = Pass(kube)
    p.run()
    p.watch()
    uids = {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in kube.objects("pods", NS)}
    asyncio.run(kube.merge_patch(WS_PATH, {"spec": {"replicas": 1}}))

    p.run()
    deletes = [a for a in kube.writes() if a.verb == "delete" and a.resource == "pods"]
    assert [a.key for a in kube.writes()] == [
        *(a.key for a in deletes),
        ("delete", "poddisruptionbudgets", NS, "web", ""),  # 1 replica: no budget
        ("patch", "webservers", NS, "web", "status"),
    ]
    assert len(deletes) == 2
    assert all(a.body == {"preconditions": {"uid": uids[a.name]}} for a in deletes)
    assert len(pod_names(kube)) == 1
    assert [reason for _, reason, _ in p.events] == ["SuccessfulDelete", "DeletedPodDisruptionBudget"]


def test_a_pod_create_refused_by_a_quota_is_a_replica_failure():
    kube = FakeKube(webserver(3))
    kube.prepend_reactor("create", "pods", fail(403, message="exceeded quota: pods, requested: pods=1"))
    p = Pass(kube)

    with pytest.raises(ReconcileError, match="FailedCreate"):
        p.run()
    # Slow start: the first batch (one pod) fails, the others are not tried.
    assert [a.key[:2] for a in kube.writes()] == [
        ("create", "pods"),
        ("create", "poddisruptionbudgets"),  # whatever happened to the pods
        ("patch", "webservers"),
    ]
    failure = conditions.get(kube.object(WS_PATH)["status"]["conditions"], "ReplicaFailure")
    assert failure is not None and (failure["status"], failure["reason"]) == ("True", "FailedCreate")
    assert [(t, reason) for t, reason, _ in p.events] == [
        ("Normal", "CreatedPodDisruptionBudget"),
        ("Warning", "FailedCreate"),
    ]


def test_pods_the_watch_has_not_shown_yet_are_counted_not_created_again():
    kube = FakeKube(webserver(3))
    p = Pass(kube)
    p.run()
    names = pod_names(kube)

    p.run()  # the watch lags: no pod event has come, but the creates' answers were cached
    assert kube.keys(reads=True) == [("patch", "webservers", NS, "web", "status")]
    assert kube.object(WS_PATH)["status"]["replicas"] == 3
    assert pod_names(kube) == names


def test_pods_a_lost_cache_does_not_hold_are_claimed_not_duplicated():
    kube = FakeKube(webserver(3))
    p = Pass(kube)
    p.run()
    names = pod_names(kube)

    # A new process (a restart, a failover) whose watch has not shown the pods yet.
    p = Pass(kube)
    p.run()
    # Each create is refused (AlreadyExists), the pod read and found ours; in slow-start batches
    # of 1 and 2 pods.
    assert kube.keys(reads=True) == [
        ("create", "pods", NS, names[0], ""),
        ("get", "pods", NS, names[0], ""),
        ("create", "pods", NS, names[1], ""),
        ("create", "pods", NS, names[2], ""),
        ("get", "pods", NS, names[1], ""),
        ("get", "pods", NS, names[2], ""),
        # The budget's create refused too, read back and found ours.
        ("create", "poddisruptionbudgets", NS, "web", ""),
        ("get", "poddisruptionbudgets", NS, "web", ""),
    ]  # and no status write: the pass counted what the last one did (the claims count next)
    assert pod_names(kube) == names


def test_the_spec_is_checked_against_the_schema_once_per_generation(monkeypatch):
    """Every pod event runs a pass; the schema check runs only when the spec changed."""
    kube = FakeKube(webserver(-1))
    p = Pass(kube)
    checks: list[object] = []
    check = reconciler.VALIDATOR.errors
    monkeypatch.setattr(reconciler.VALIDATOR, "errors", lambda spec: checks.append(spec) or check(spec))
    for _ in range(2):
        with pytest.raises(TerminalError):
            p.run()
    assert len(checks) == 1
    degraded = conditions.get(kube.object(WS_PATH)["status"]["conditions"], "Degraded")
    assert degraded is not None and degraded["reason"] == "InvalidSpec"
    asyncio.run(kube.merge_patch(WS_PATH, {"spec": {"replicas": 1}}))  # generation 2
    p.run()
    p.run()
    assert len(checks) == 2 and len(pod_names(kube)) == 1
    p.operator.forget(kube.object(WS_PATH)["metadata"]["uid"])
    assert p.ws.spec_checked == {}


def configmap(kube: FakeKube, data: dict[str, str]) -> dict[str, Any]:
    """Store ConfigMap site (unlabelled) with ``data``; returns what the metadata-only watch
    delivers of it."""
    stored = kube.add(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "site", "namespace": NS}, "data": data}
    )
    return {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": stored["metadata"]}


def test_a_missing_configmap_creates_no_pod_and_its_arrival_creates_them_with_its_digest():
    ws = webserver(2)
    ws["spec"]["volumes"] = [{"name": "html", "mountPath": "/html", "configMap": {"name": "site"}}]
    kube = FakeKube(ws)
    p = Pass(kube)

    with pytest.raises(ReconcileError, match="ConfigMapNotFound"):
        p.run()
    assert [a.key[:2] for a in kube.writes()] == [("create", "poddisruptionbudgets"), ("patch", "webservers")]
    failure = conditions.get(kube.object(WS_PATH)["status"]["conditions"], "ReplicaFailure")
    assert failure is not None and "ConfigMap site not found" in failure["message"]
    assert [(t, reason) for t, reason, _ in p.events] == [
        ("Normal", "CreatedPodDisruptionBudget"),
        ("Warning", "ConfigMapNotFound"),
    ]

    p.ws.configmaps.changed("ADDED", configmap(kube, {"index.html": "hi"}))
    p.run()
    first = pod_names(kube)
    assert len(first) == 2

    p.ws.configmaps.changed("MODIFIED", configmap(kube, {"index.html": "bye"}))
    p.watch()
    p.run()  # a new template: the rollout starts (25% of 2: surge 1)
    assert set(pod_names(kube)) - set(first)


def test_a_reserved_pod_label_is_degraded_and_touches_no_pod():
    """A spec past admission (stored before the rule, or the CRD relaxed): the CEL rule's twin."""
    ws = webserver(1)
    ws["spec"]["podMetadata"] = {"labels": {"app.kubernetes.io/instance": "other"}}
    kube = FakeKube(ws)
    with pytest.raises(TerminalError):
        Pass(kube).run()
    assert [a.key[:2] for a in kube.writes()] == [("patch", "webservers")]
    degraded = conditions.get(kube.object(WS_PATH)["status"]["conditions"], "Degraded")
    assert degraded is not None and (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert "spec.podMetadata.labels" in degraded["message"]


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.at = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def now(self) -> datetime.datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += datetime.timedelta(seconds=seconds)


def make_ready(kube: FakeKube, since: str = "2026-01-01T00:00:00Z") -> None:
    """What the kubelet would do: every pod scheduled, running and Ready."""
    for pod in kube.objects("pods", NS):
        pod["spec"]["nodeName"] = "node"
        pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}],
        }
        kube.add(pod)  # stored as it is: the same UID


def test_a_rollout_past_its_deadline_goes_back_to_the_last_available_pods_and_says_so():
    ws = webserver(2)
    ws["spec"].update(progressDeadlineSeconds=60, rollout={"autoRollback": True})
    kube = FakeKube(ws)
    clock = Clock()
    p = Pass(kube, clock)
    p.run()
    make_ready(kube)
    p.watch()
    p.run()
    good = set(pod_names(kube))
    st = kube.object(WS_PATH)["status"]
    assert (st["revision"], st["lastRolloutOutcome"]) == (1, "Available")

    asyncio.run(kube.merge_patch(WS_PATH, {"spec": {"image": "nginx:does-not-start"}}))
    clock.advance(10)
    p.run()  # surge one pod of the new template; no old pod goes until it is available
    bad = set(pod_names(kube)) - good
    assert len(bad) == 1
    p.watch()
    clock.advance(30)
    assert p.run() == 31.0  # the pass at the deadline: no pod event will come
    assert kube.object(WS_PATH)["status"]["lastRolloutOutcome"] == "Progressing"

    clock.advance(31)
    p.run()
    st = kube.object(WS_PATH)["status"]
    assert set(pod_names(kube)) == good  # the new pod deleted, the old ones untouched
    assert {k: v for k, v in st["rollback"].items() if k != "fromSpecHash"} == {
        "fromHash": next(iter(bad)).split("-")[1],
        "toRevision": 1,
    }
    assert [(e["revision"], e["outcome"]) for e in st["history"]] == [
        (1, "Available"),
        (2, "RolledBack"),
        (3, "Progressing"),
    ]
    assert ("Warning", "RolledBack") in [(t, r) for t, r, _ in p.events]
    sample = p.ws.ctx.metrics.registry.get_sample_value(
        "webserver_rollbacks_total", {"namespace": NS, "name": "web"}
    )
    assert sample == 1.0

    p.watch()
    clock.advance(1)
    p.run()
    st = kube.object(WS_PATH)["status"]
    progressing = conditions.get(st["conditions"], "Progressing")
    assert progressing is not None and (progressing["status"], progressing["reason"]) == (
        "False",
        "RolledBack",
    )
    stalled = conditions.get(st["conditions"], "Stalled")
    assert stalled is not None and stalled["status"] == "True"
    assert st["lastRolloutOutcome"] == "Available" and not p.events

    # A restarted operator (nothing in memory) reads the same from the status: nothing moves.
    p2 = Pass(kube, clock)
    p2.watch()
    p2.run()
    assert set(pod_names(kube)) == good and not [a for a in kube.writes() if a.resource == "pods"]


def past_the_deadline_of_a_bad_image(replicas: int) -> tuple[FakeKube, Pass]:
    """A WebServer (60 s deadline, autoRollback) whose Ready pods were rolled to an image that
    never starts, 61 s ago: its next pass is the one that rolls back."""
    ws = webserver(replicas)
    ws["spec"].update(progressDeadlineSeconds=60, rollout={"autoRollback": True})
    kube = FakeKube(ws)
    clock = Clock()
    p = Pass(kube, clock)
    p.run()
    make_ready(kube)
    p.watch()
    p.run()
    asyncio.run(kube.merge_patch(WS_PATH, {"spec": {"image": "nginx:does-not-start"}}))
    p.run()
    p.watch()
    clock.advance(61)
    return kube, p


def test_a_rollback_whose_status_write_fails_is_said_once_when_a_later_pass_writes_it():
    """Sieve's kind of bug: the Event and the counter came before the status write, so a write
    refused (a conflict, the API server away) made the next pass, which finds no rollback in the
    status, say it a second time."""
    kube, p = past_the_deadline_of_a_bad_image(2)
    kube.prepend_reactor("patch", "webservers/status", fail(409), times=1)

    with pytest.raises(ApiError) as refused:
        p.run()  # the rollback pass: its status write refused
    assert refused.value.status == 409
    assert "rollback" not in kube.object(WS_PATH)["status"]
    assert ("Warning", "RolledBack") not in [(t, r) for t, r, _ in p.events]

    p.watch()
    p.run()  # decided again, written, said
    assert "rollback" in kube.object(WS_PATH)["status"]
    assert [(t, r) for t, r, _ in p.events].count(("Warning", "RolledBack")) == 1
    p.watch()
    p.run()
    assert ("Warning", "RolledBack") not in [(t, r) for t, r, _ in p.events]
    sample = p.ws.ctx.metrics.registry.get_sample_value(
        "webserver_rollbacks_total", {"namespace": NS, "name": "web"}
    )
    assert sample == 1.0


def test_a_progress_deadline_not_above_min_ready_seconds_is_degraded():
    ws = webserver(1)
    ws["spec"].update(progressDeadlineSeconds=30, minReadySeconds=30)
    kube = FakeKube(ws)
    with pytest.raises(TerminalError):
        Pass(kube).run()
    degraded = conditions.get(kube.object(WS_PATH)["status"]["conditions"], "Degraded")
    assert degraded is not None and degraded["reason"] == "InvalidSpec"
    assert "spec.progressDeadlineSeconds: progressDeadlineSeconds must be greater" in degraded["message"]
    assert not pod_names(kube)


def test_reverting_the_spec_by_hand_after_a_rollback_clears_it_from_the_stored_status():
    kube, p = past_the_deadline_of_a_bad_image(1)
    p.run()
    assert kube.object(WS_PATH)["status"]["rollback"]["toRevision"] == 1

    asyncio.run(kube.merge_patch(WS_PATH, {"spec": {"image": "nginxdemos/hello"}}))
    p.watch()
    p.run()
    assert "rollback" not in kube.object(WS_PATH)["status"]
    p.run()  # and nothing more to write
    assert not kube.writes()


def budget(owner_uid: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": NS}
    if owner_uid:
        meta["ownerReferences"] = [
            {"apiVersion": WS, "kind": "WebServer", "name": "web", "uid": owner_uid, "controller": True}
        ]
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta,
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"team": "a"}}},
    }


def test_a_budget_of_that_name_someone_else_holds_is_a_conflict_and_left_alone():
    kube = FakeKube(webserver(2), budget())
    p = Pass(kube)
    with pytest.raises(ReconcileError, match="PodDisruptionBudgetConflict"):
        p.run()
    assert [a.key[:2] for a in kube.writes()] == [
        ("create", "pods"),
        ("create", "pods"),
        ("create", "poddisruptionbudgets"),
        ("patch", "webservers"),
    ]
    stored = kube.object(namespaced(NS, "poddisruptionbudgets", "web", "policy/v1"))
    assert stored is not None and stored["spec"]["minAvailable"] == 2  # untouched
    st = kube.object(WS_PATH)["status"]
    failure = conditions.get(st["conditions"], "ReplicaFailure")
    assert failure is not None and failure["reason"] == "PodDisruptionBudgetConflict"
    assert "spec.disruptionBudget.enabled" in failure["message"]
    stalled = conditions.get(st["conditions"], "Stalled")
    assert stalled is not None and stalled["status"] == "True"


def test_a_budget_that_drifted_is_put_back_and_switched_off_deleted():
    kube = FakeKube(webserver(2))
    p = Pass(kube)
    p.run()
    path = namespaced(NS, "poddisruptionbudgets", "web", "policy/v1")
    drifted = kube.object(path)
    assert drifted is not None and drifted["spec"]["maxUnavailable"] == 1
    assert drifted["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/instance": "web", "app.kubernetes.io/name": "webserver"}
    }
    drifted["spec"] = {"minAvailable": 2, "selector": drifted["spec"]["selector"]}
    kube.add(drifted)
    p.watch()
    p.run()
    fixed = kube.object(path)
    assert fixed is not None and fixed["spec"]["maxUnavailable"] == 1 and "minAvailable" not in fixed["spec"]
    assert ("Normal", "UpdatedPodDisruptionBudget") in [(t, r) for t, r, _ in p.events]

    asyncio.run(kube.merge_patch(WS_PATH, {"spec": {"disruptionBudget": {"enabled": False}}}))
    p.watch()
    p.run()
    assert kube.object(path) is None


def hashes(kube: FakeKube) -> dict[str, int]:
    """Pods not being deleted, by template hash."""
    out: dict[str, int] = {}
    for pod in kube.objects("pods", NS):
        if not pod["metadata"].get("deletionTimestamp"):
            h = pod["metadata"]["name"].split("-")[1]
            out[h] = out.get(h, 0) + 1
    return out


def test_a_canary_step_makes_the_split_within_the_rollout_limits_then_holds():
    ws = webserver(4)
    ws["spec"]["rollout"] = {"strategy": "Canary", "canary": {"steps": [{"weight": 25}, {"pause": {}}]}}
    kube = FakeKube(ws)
    clock = Clock()
    p = Pass(kube, clock)
    p.run()
    make_ready(kube)
    p.watch()
    p.run()
    (stable,) = hashes(kube)

    asyncio.run(kube.merge_patch(WS_PATH, {"spec": {"image": "nginx:2"}}))
    clock.advance(1)
    p.run()  # 25 % of 4: one canary pod made, one stable pod goes (maxSurge 1, maxUnavailable 1)
    counts = hashes(kube)
    (canary,) = set(counts) - {stable}
    assert counts == {stable: 3, canary: 1}
    assert {r for _, r, _ in p.events} >= {"SuccessfulCreate", "SuccessfulDelete"}
    make_ready(kube)
    p.watch()
    clock.advance(1)
    p.run()  # settled: step 1 pauses until resumed
    p.watch()
    before = hashes(kube)
    p.run()
    assert hashes(kube) == before == {stable: 3, canary: 1}
    st = kube.object(WS_PATH)["status"]
    assert {k: st["canary"][k] for k in ("step", "weight", "canaryPods", "stablePods")} == {
        "step": 1,
        "weight": 25,
        "canaryPods": 1,
        "stablePods": 3,
    }
    progressing = conditions.get(st["conditions"], "Progressing")
    assert progressing is not None and progressing["reason"] == "CanaryPaused"
