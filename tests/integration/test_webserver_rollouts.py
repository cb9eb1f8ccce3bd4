"""WebServer rollouts on the real API server with kwok: the progress deadline,
automatic rollback to exactly the last available template, revision history, pause and
resume, and the ``-o wide`` columns.

An image kwok never runs (``localcluster.dev/unpullable:latest``: the ``pod-unpullable``
stage keeps its pods Pending with ErrImagePull) is the bad rollout; a short
``progressDeadlineSeconds`` makes the deadline pass within the test.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.webserver import desired
from tests.framework import kstatus
from tests.framework.cluster import Cluster
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for
from tests.framework.webservers import active_pods, conditions, converged, create, get, patch_spec, ready

BAD_IMAGE = "localcluster.dev/unpullable:latest"
DEADLINE = 5


@pytest.fixture(scope="module")
def operator(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("webserver-rollouts") / "operator.log"
    op = OperatorProcess("operators.webserver", cluster.operator_kubeconfig("webserver"), log).start()
    yield op
    op.stop()


def outcomes(ws: dict) -> list[tuple[int, str]]:
    return [(e["revision"], e["outcome"]) for e in ws["status"].get("history", [])]


def containers(cluster: Cluster, namespace: str, thash: str) -> list[dict]:
    """The container specs of the active pods of one template, as the API server stored them."""
    api = client.ApiClient()
    return [
        api.sanitize_for_serialization(p.spec.containers)
        for p in active_pods(cluster, namespace, "web")
        if p.metadata.labels[desired.HASH_LABEL] == thash
    ]


def warnings(cluster: Cluster, namespace: str, reason: str) -> list[str]:
    events = client.CoreV1Api(cluster.api).list_namespaced_event(
        namespace, field_selector=f"involvedObject.name=web,reason={reason}"
    )
    return [e.message for e in events.items if e.type == "Warning"]


def rolled_back(cluster: Cluster, namespace: str) -> dict:
    def check() -> dict | None:
        ws = get(cluster, namespace, "web")
        progressing = conditions(ws).get("Progressing") or {}
        return ws if progressing.get("reason") == "RolledBack" else None

    return wait_for(check, 60, "web: Progressing=False, RolledBack")


def test_progress_deadline_must_be_above_min_ready_seconds(cluster, namespace):
    with pytest.raises(ApiException) as err:
        create(
            cluster, namespace, "bad", {"replicas": 1, "minReadySeconds": 10, "progressDeadlineSeconds": 10}
        )
    assert err.value.status == 422
    assert "spec.progressDeadlineSeconds" in err.value.body
    assert "progressDeadlineSeconds must be greater than minReadySeconds" in err.value.body


def test_a_bad_image_rolls_back_to_exactly_the_previous_template(cluster, namespace, operator):
    # maxUnavailable 1, maxSurge 0: an old pod goes before the new one is up, so the rollback
    # has to create a pod of the old template again, from the template kept in the history.
    spec = {
        "replicas": 2,
        "progressDeadlineSeconds": DEADLINE,
        "rollout": {"autoRollback": True, "maxSurge": 0, "maxUnavailable": 1},
        "env": [{"name": "GREETING", "value": "hello"}],
        "readinessPath": "/",
    }
    create(cluster, namespace, "web", spec)
    ws = converged(cluster, namespace, "web", 2)
    good = desired.template_hash(ws["spec"])
    assert outcomes(ws) == [(1, "Available")] and ws["status"]["revision"] == 1
    before = containers(cluster, namespace, good)

    patch_spec(cluster, namespace, "web", {"image": BAD_IMAGE})
    ws = rolled_back(cluster, namespace)
    bad = desired.template_hash(ws["spec"])
    assert ws["status"]["rollback"]["fromHash"] == bad and ws["status"]["rollback"]["toRevision"] == 1
    ws = converged(cluster, namespace, "web", 2)
    assert outcomes(ws) == [(1, "Available"), (2, "RolledBack"), (3, "Available")]
    assert ws["status"]["history"][1]["changed"] == ["image"]
    assert ws["status"]["history"][2]["rollbackOf"] == 1
    # Every pod runs the old template, the one re-created included: the same containers.
    after = containers(cluster, namespace, good)
    assert len(after) == 2 and all(c == before[0] for c in after)
    assert not [
        p for p in active_pods(cluster, namespace, "web") if p.metadata.labels[desired.HASH_LABEL] == bad
    ]
    # Events are posted by their own queue, after the status write the wait above saw.
    wait_for(
        lambda: any("rolling back to revision 1" in m for m in warnings(cluster, namespace, "RolledBack")),
        60,
        "a RolledBack Warning naming revision 1",
    )
    stalled = conditions(ws)["Stalled"]
    assert (stalled["status"], stalled["reason"]) == ("True", "RolledBack")

    # Reverting the spec by hand to that template ends the rollback and moves no pod.
    names = {p.metadata.name for p in active_pods(cluster, namespace, "web")}
    patch_spec(cluster, namespace, "web", {"image": desired.DEFAULT_IMAGE})

    def reverted() -> dict | None:
        ws = get(cluster, namespace, "web")
        st = ws["status"]
        done = st.get("observedGeneration") == ws["metadata"]["generation"] and "rollback" not in st
        return ws if done else None

    ws = wait_for(reverted, 60, "web: rollback ended")
    assert ws["status"]["revision"] == 3 and conditions(ws)["Progressing"]["reason"] == "ReplicasReady"
    assert {p.metadata.name for p in active_pods(cluster, namespace, "web")} == names


def test_a_configmap_edit_during_an_automatic_rollback_does_not_roll_the_bad_image_again(
    cluster, namespace, operator
):
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "site"}, "data": {"greeting": "hello"}}
    )
    spec = {
        "replicas": 2,
        "progressDeadlineSeconds": DEADLINE,
        "rollout": {"autoRollback": True, "maxSurge": 1, "maxUnavailable": 0},
        "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "site", "key": "greeting"}}}],
    }
    create(cluster, namespace, "web", spec)
    converged(cluster, namespace, "web", 2)
    patch_spec(cluster, namespace, "web", {"image": BAD_IMAGE})
    rolled_back(cluster, namespace)
    ws = converged(cluster, namespace, "web", 2)
    good = {p.metadata.labels[desired.HASH_LABEL] for p in active_pods(cluster, namespace, "web")}
    revision = ws["status"]["revision"]

    core.patch_namespaced_config_map("site", namespace, {"data": {"greeting": "bonjour"}})

    # A scale after the edit: the pass that makes the third pod reads the ConfigMap as edited,
    # and the pod it creates is of the rollback's template, not the bad image's.
    patch_spec(cluster, namespace, "web", {"replicas": 3})
    ws = converged(cluster, namespace, "web", 3)
    assert ws["status"]["revision"] == revision and ws["status"]["rollback"]["toRevision"] == 1
    assert conditions(ws)["Progressing"]["reason"] == "RolledBack"
    pods = active_pods(cluster, namespace, "web")
    assert {p.metadata.labels[desired.HASH_LABEL] for p in pods} == good
    assert all(c.image != BAD_IMAGE for p in pods for c in p.spec.containers)


def test_without_auto_rollback_the_deadline_is_reported_and_a_fix_rolls_forward(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 2, "progressDeadlineSeconds": DEADLINE})
    converged(cluster, namespace, "web", 2)
    patch_spec(cluster, namespace, "web", {"image": BAD_IMAGE})

    def exceeded() -> dict | None:
        ws = get(cluster, namespace, "web")
        progressing = conditions(ws).get("Progressing") or {}
        return ws if progressing.get("reason") == "ProgressDeadlineExceeded" else None

    ws = wait_for(exceeded, 60, "web: Progressing=False, ProgressDeadlineExceeded")
    assert conditions(ws)["Progressing"]["status"] == "False"
    assert ws["status"]["lastRolloutOutcome"] == "ProgressDeadlineExceeded" and "rollback" not in ws["status"]

    patch_spec(cluster, namespace, "web", {"image": "nginx:1.27"})  # the fix: a good change
    ws = converged(cluster, namespace, "web", 2)
    assert outcomes(ws) == [(1, "Available"), (2, "ProgressDeadlineExceeded"), (3, "Available")]
    assert ws["status"]["history"][2]["changed"] == ["image"]


def test_pause_holds_a_template_change_until_resumed(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 2, "rollout": {"paused": True}})
    ws = converged(cluster, namespace, "web", 2)  # paused from the start: a first creation still runs
    names = {p.metadata.name for p in active_pods(cluster, namespace, "web")}
    patch_spec(cluster, namespace, "web", {"image": "nginx:1.27"})

    def held() -> dict | None:
        ws = get(cluster, namespace, "web")
        progressing = conditions(ws).get("Progressing") or {}
        seen = ws["status"].get("observedGeneration") == ws["metadata"]["generation"]
        return ws if seen and progressing.get("reason") == "RolloutPaused" else None

    ws = wait_for(held, 60, "web: Progressing RolloutPaused")
    assert ws["status"]["progress"]["paused"] is True
    # Old pods, held: not done. Not Ready, and kstatus (Flux, Helm --wait) keeps waiting.
    assert (conditions(ws)["Ready"]["status"], conditions(ws)["Reconciling"]["status"]) == ("False", "True")
    assert kstatus.status_of(ws) == "InProgress"
    assert {p.metadata.name for p in active_pods(cluster, namespace, "web")} == names

    patch_spec(cluster, namespace, "web", {"rollout": {"paused": False}})
    ws = converged(cluster, namespace, "web", 2)
    assert not names & {p.metadata.name for p in active_pods(cluster, namespace, "web")}
    assert outcomes(ws) == [(1, "Available"), (2, "Available")]


def test_wide_output_shows_revision_and_rollout_outcome(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 1})
    converged(cluster, namespace, "web", 1)
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed for this test"
    out = subprocess.run(
        [kubectl, "--kubeconfig", str(cluster.kubeconfig), "-n", namespace, "get", "ws", "-o", "wide"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "REVISION", "ROLLOUT"]
    row = out[1].split()
    assert row[0] == "web" and row[-2:] == ["1", "Available"]


def budget(cluster: Cluster, namespace: str, name: str = "web"):
    try:
        return client.PolicyV1Api(cluster.api).read_namespaced_pod_disruption_budget(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_a_budget_only_while_two_replicas_or_more(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 1})
    converged(cluster, namespace, "web", 1)
    assert budget(cluster, namespace) is None  # one replica: a drain is never blocked

    patch_spec(cluster, namespace, "web", {"replicas": 2})
    pdb = wait_for(lambda: budget(cluster, namespace), 60, "the PodDisruptionBudget at 2 replicas")
    ws = get(cluster, namespace, "web")
    assert pdb.spec.max_unavailable == 1 and pdb.spec.unhealthy_pod_eviction_policy == "AlwaysAllow"
    assert pdb.spec.selector.match_labels == desired.selector_labels("web")
    assert pdb.metadata.owner_references[0].uid == ws["metadata"]["uid"]
    converged(cluster, namespace, "web", 2)

    patch_spec(cluster, namespace, "web", {"replicas": 1})
    wait_for(lambda: budget(cluster, namespace) is None or None, 60, "no PodDisruptionBudget at 1 replica")

    patch_spec(cluster, namespace, "web", {"replicas": 3, "disruptionBudget": {"enabled": False}})
    converged(cluster, namespace, "web", 3)
    assert budget(cluster, namespace) is None


def test_a_budget_of_that_name_not_ours_is_a_conflict_and_left_alone(cluster, namespace, operator):
    client.PolicyV1Api(cluster.api).create_namespaced_pod_disruption_budget(
        namespace,
        {"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"x": "y"}}}},
    )
    create(cluster, namespace, "web", {"replicas": 2})

    def conflict() -> dict | None:
        ws = get(cluster, namespace, "web")
        failure = conditions(ws).get("ReplicaFailure") if ws.get("status") else None
        return ws if failure and failure["reason"] == "PodDisruptionBudgetConflict" else None

    ws = wait_for(conflict, 60, "web: ReplicaFailure PodDisruptionBudgetConflict")
    assert conditions(ws)["Stalled"]["status"] == "True"
    pdb = budget(cluster, namespace)
    assert pdb.spec.min_available == 1 and not pdb.metadata.owner_references  # untouched
    assert len(active_pods(cluster, namespace, "web")) == 2  # the pods are kept all the same


def test_pods_are_spread_softly_over_nodes_and_zones(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 1})
    converged(cluster, namespace, "web", 1)
    pod = active_pods(cluster, namespace, "web")[0]
    spread = [(c.topology_key, c.when_unsatisfiable) for c in pod.spec.topology_spread_constraints]
    assert spread == [
        ("kubernetes.io/hostname", "ScheduleAnyway"),
        ("topology.kubernetes.io/zone", "ScheduleAnyway"),
    ]
    patch_spec(cluster, namespace, "web", {"topologySpread": {"enabled": False}})  # a rollout
    converged(cluster, namespace, "web", 1)
    (pod,) = active_pods(cluster, namespace, "web")
    assert not pod.spec.topology_spread_constraints


def test_a_node_drain_evicts_through_the_budget(cluster, namespace, operator):
    # A name of its own: kubectl drain selects pods by label in every namespace.
    name = f"drained-{namespace[-6:]}"
    create(cluster, namespace, name, {"replicas": 3})
    converged(cluster, namespace, name, 3)
    wait_for(lambda: budget(cluster, namespace, name), 60, "the PodDisruptionBudget")
    node = active_pods(cluster, namespace, name)[0].spec.node_name
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed for this test"
    base = [kubectl, "--kubeconfig", str(cluster.kubeconfig)]
    try:
        # Evictions (policy/v1 Eviction), refused with 429 while the budget allows none; kubectl
        # retries them until the replacement pods are ready elsewhere.
        drain = subprocess.run(
            [*base, "drain", node, "--ignore-daemonsets", f"--pod-selector=app={name}", "--timeout=180s"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert drain.returncode == 0, drain.stderr
        assert "evicted" in drain.stdout
        pods = converged(cluster, namespace, name, 3) and active_pods(cluster, namespace, name)
        assert all(p.spec.node_name != node for p in pods)
    finally:
        subprocess.run([*base, "uncordon", node], capture_output=True, check=False)


def hashes(cluster: Cluster, namespace: str) -> set[str]:
    return {p.metadata.labels[desired.HASH_LABEL] for p in active_pods(cluster, namespace, "web")}


def test_fast_rollback_by_one_field_to_the_previous_or_any_kept_revision(cluster, namespace, operator):
    create(cluster, namespace, "web", {"replicas": 3, "image": "nginx:1"})
    v1 = desired.template_hash(converged(cluster, namespace, "web", 3)["spec"])
    patch_spec(cluster, namespace, "web", {"image": "nginx:2"})
    v2 = desired.template_hash(converged(cluster, namespace, "web", 3)["spec"])
    assert hashes(cluster, namespace) == {v2}

    with pytest.raises(ApiException) as err:  # admission: no pause with it
        patch_spec(cluster, namespace, "web", {"rollout": {"rollbackTo": {}, "paused": True}})
    assert err.value.status == 422 and "spec.rollout.rollbackTo" in err.value.body

    patch_spec(cluster, namespace, "web", {"rollout": {"rollbackTo": {}}})  # the previous one

    def complete() -> dict | None:
        ws = get(cluster, namespace, "web")
        seen = ws["status"].get("observedGeneration") == ws["metadata"]["generation"]
        return ws if seen and conditions(ws)["Progressing"]["reason"] == "RollbackComplete" else None

    ws = wait_for(complete, 60, "web: Progressing RollbackComplete")
    ws = converged(cluster, namespace, "web", 3)
    assert hashes(cluster, namespace) == {v1}
    assert ws["status"]["rollback"]["toRevision"] == 1 and ws["status"]["rollback"]["manual"] is True
    assert conditions(ws)["Ready"]["status"] == "True" and conditions(ws)["Stalled"]["status"] == "False"
    events = client.CoreV1Api(cluster.api).list_namespaced_event(
        namespace, field_selector="involvedObject.name=web,reason=FastRollback"
    )
    assert any("revision 1" in e.message for e in events.items)

    # A revision the history does not have: Degraded on the field, no pod moved.
    names = {p.metadata.name for p in active_pods(cluster, namespace, "web")}
    patch_spec(cluster, namespace, "web", {"rollout": {"rollbackTo": {"revision": 42}}})

    def degraded() -> dict | None:
        ws = get(cluster, namespace, "web")
        cond = conditions(ws).get("Degraded") or {}
        return ws if cond.get("status") == "True" else None

    ws = wait_for(degraded, 60, "web: Degraded for rollbackTo 42")
    assert (
        "spec.rollout.rollbackTo.revision: revision 42 is not in status.history"
        in (conditions(ws)["Degraded"]["message"])
    )
    assert {p.metadata.name for p in active_pods(cluster, namespace, "web")} == names

    # Any kept revision by number; then the field cleared: the spec's template rolls out again.
    patch_spec(cluster, namespace, "web", {"rollout": {"rollbackTo": {"revision": 2}}})
    wait_for(lambda: hashes(cluster, namespace) == {v2} or None, 60, "web: pods of revision 2")
    patch_spec(cluster, namespace, "web", {"rollout": {"rollbackTo": None}})
    ws = converged(cluster, namespace, "web", 3)
    assert "rollback" not in ws["status"] and hashes(cluster, namespace) == {v2}


CANARY_STEPS = [{"weight": 25}, {"pause": {}}, {"weight": 50}, {"pause": {"seconds": 1}}]


def by_hash(cluster: Cluster, namespace: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in active_pods(cluster, namespace, "web"):
        if ready(p):
            h = p.metadata.labels[desired.HASH_LABEL]
            out[h] = out.get(h, 0) + 1
    return out


def test_canary_admission_refuses_malformed_steps(cluster, namespace):
    for canary, where in (
        ({"steps": [{"weight": 10, "pause": {}}]}, "spec.rollout.canary.steps[0]"),
        ({}, "spec.rollout.canary"),
        (
            {"steps": [{"weight": 10}], "analysis": {"intervalSeconds": 1, "timeoutSeconds": 2}},
            "spec.rollout.canary.analysis.timeoutSeconds",
        ),
    ):
        with pytest.raises(ApiException) as err:
            create(
                cluster,
                namespace,
                "bad",
                {"replicas": 1, "rollout": {"strategy": "Canary", "canary": canary}},
            )
        assert err.value.status == 422 and where in err.value.body


def test_canary_steps_split_the_pods_pause_until_resumed_and_promote(cluster, namespace, operator):
    rollout_spec = {"strategy": "Canary", "canary": {"steps": CANARY_STEPS}}
    create(cluster, namespace, "web", {"replicas": 4, "image": "nginx:1", "rollout": rollout_spec})
    v1 = desired.template_hash(converged(cluster, namespace, "web", 4)["spec"])
    patch_spec(cluster, namespace, "web", {"image": "nginx:2"})

    def paused_at(step: int, split: dict[str, int]):
        def check() -> dict | None:
            ws = get(cluster, namespace, "web")
            st = ws["status"]
            c = conditions(ws).get("Progressing") or {}
            at_step = (st.get("canary") or {}).get("step") == step and c.get("reason") == "CanaryPaused"
            return ws if at_step and by_hash(cluster, namespace) == split else None

        return check

    ws = get(cluster, namespace, "web")
    v2 = desired.template_hash(ws["spec"])
    ws = wait_for(paused_at(1, {v2: 1, v1: 3}), 60, "web: canary at 25 % (1 of 4), paused at step 1")
    assert ws["status"]["canary"]["weight"] == 25 and ws["status"]["canary"]["stableRevision"] == 1
    assert conditions(ws)["Ready"]["status"] == "False" and kstatus.status_of(ws) == "InProgress"
    assert len(active_pods(cluster, namespace, "web")) == 4

    # The HPA (or kubectl scale) during the pause: the same weight over 8 pods.
    patch_spec(cluster, namespace, "web", {"replicas": 8})
    wait_for(paused_at(1, {v2: 2, v1: 6}), 60, "web: 2 of 8 canary pods")

    revision = ws["status"]["canary"]["revision"]
    patch_spec(
        cluster, namespace, "web", {"rollout": {"canary": {"resume": {"revision": revision, "step": 1}}}}
    )
    ws = converged(cluster, namespace, "web", 8)
    assert by_hash(cluster, namespace) == {v2: 8}
    assert outcomes(ws) == [(1, "Available"), (2, "Available")] and "canary" not in ws["status"]
    assert conditions(ws)["Ready"]["status"] == "True"


def test_a_canary_whose_probes_fail_is_aborted_back_to_stable_with_the_figures(cluster, namespace, operator):
    # kwok's pods have addresses but serve nothing: every probe of the analysis fails, which is
    # what a canary answering errors looks like to it (the real node's test has real answers).
    analysed = {
        "steps": [{"weight": 25}, {"pause": {}}],
        "analysis": {"intervalSeconds": 1, "timeoutSeconds": 1, "samples": 3},
    }
    create(cluster, namespace, "web", {"replicas": 4, "rollout": {"strategy": "Canary", "canary": analysed}})
    v1 = desired.template_hash(converged(cluster, namespace, "web", 4)["spec"])
    patch_spec(cluster, namespace, "web", {"image": "nginx:1.27"})

    def aborted() -> dict | None:
        ws = get(cluster, namespace, "web")
        degraded = conditions(ws).get("Degraded") or {}
        return ws if degraded.get("reason") == "CanaryAnalysisFailed" else None

    ws = wait_for(aborted, 120, "web: Degraded CanaryAnalysisFailed")
    message = conditions(ws)["Degraded"]["message"]
    assert "canary 0/" in message and "success 0.0 % < 99 %" in message
    assert ws["status"]["rollback"]["analysis"] == message and ws["status"]["rollback"]["toRevision"] == 1
    assert outcomes(ws)[:2] == [(1, "Available"), (2, "RolledBack")]
    wait_for(
        lambda: any("failed its analysis" in m for m in warnings(cluster, namespace, "CanaryAborted")),
        60,
        "a CanaryAborted Warning",
    )
    ws = converged(cluster, namespace, "web", 4)
    assert by_hash(cluster, namespace) == {v1: 4}
    assert conditions(ws)["Ready"]["status"] == "False" and conditions(ws)["Stalled"]["status"] == "True"
