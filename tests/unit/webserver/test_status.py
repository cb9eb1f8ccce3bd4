import datetime

from operators.webserver import desired, status
from operators.webserver.desired import Plan, PodView
from shared.api import conditions
from shared.api.validation import FieldError

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
SPEC = {"replicas": 3, "image": "nginx:1"}
H = desired.template_hash(SPEC)


def pods(n, ready=True, thash=H):
    return [PodView(f"p{i}", thash, "t", "Running", True, ready) for i in range(n)]


def compute(spec=SPEC, observed=(), plan=None, failure=None, current=None):
    return status.compute(
        name="web",
        spec=spec,
        generation=4,
        pods=list(observed),
        plan=plan or Plan(),
        failure=failure,
        current=current,
        now=NOW,
    )


def by_type(st):
    return {c["type"]: c for c in st["conditions"]}


def test_steady_state():
    st = compute(observed=pods(3))
    assert st["replicas"] == st["count"] == st["readyReplicas"] == st["updatedReplicas"] == 3
    assert st["selector"] == desired.selector_string("web") and st["observedGeneration"] == 4
    c = by_type(st)
    assert c["Available"]["status"] == "True"
    assert (c["Progressing"]["status"], c["Progressing"]["reason"]) == ("False", "ReplicasReady")
    assert c["ReplicaFailure"]["status"] == "False" and c["Degraded"]["status"] == "False"
    # recomputing later produces no write
    assert conditions.status_patch(st, compute(observed=pods(3), current=st)) is None


def test_scaling_and_failures():
    c = by_type(compute(observed=pods(1), plan=Plan(create_slots=[1, 2]), failure=("FailedCreate", "quota")))
    assert (c["Progressing"]["status"], c["Progressing"]["reason"]) == ("True", "ScalingUp")
    assert (c["Available"]["status"], c["ReplicaFailure"]["reason"]) == ("False", "FailedCreate")
    assert c["ReplicaFailure"]["message"] == "quota"
    c = by_type(compute(observed=pods(4), plan=Plan(delete=["p3"])))
    assert c["Progressing"]["reason"] == "ScalingDown"
    c = by_type(compute(observed=pods(2) + pods(1, thash="old")))
    assert c["Progressing"]["reason"] == "RollingUpdate"
    c = by_type(compute(observed=pods(3, ready=False)))
    assert c["Progressing"]["reason"] == "WaitingForReady"


def test_available_means_at_most_max_unavailable_missing():
    need = {r: status.min_available({"replicas": r}) for r in (0, 1, 3, 4, 8)}
    assert need == {0: 0, 1: 1, 3: 3, 4: 3, 8: 6}  # replicas - maxUnavailable (25% rounded down)
    assert status.min_available({"replicas": 3, "rollout": {"maxUnavailable": 2}}) == 1
    # 3 replicas: maxUnavailable 0, so one not-ready pod makes it unavailable; allowed 1, available.
    assert by_type(compute(observed=pods(2) + pods(1, ready=False)))["Available"]["status"] == "False"
    loose = {**SPEC, "rollout": {"maxUnavailable": 1}}
    assert (
        by_type(compute(spec=loose, observed=pods(2) + pods(1, ready=False)))["Available"]["status"] == "True"
    )


def test_invalid_spec_only_sets_degraded():
    current = compute(observed=pods(3))
    st = status.invalid(errors=[FieldError("spec.replicas", "bad")], generation=5, current=current, now=NOW)
    assert st["replicas"] == 3 and st["observedGeneration"] == 5
    d = by_type(st)["Degraded"]
    assert (d["status"], d["reason"], d["message"]) == ("True", "InvalidSpec", "spec.replicas: bad")


def readiness(st):
    c = by_type(st)
    return {t: (c[t]["status"], c[t]["reason"]) for t in ("Reconciling", "Stalled", "Ready")}


def test_ready_only_with_every_pod_ready_on_the_current_template():
    assert readiness(compute(observed=pods(3))) == {
        "Reconciling": ("False", "ReplicasReady"),
        "Stalled": ("False", "ReplicasReady"),
        "Ready": ("True", "ReplicasReady"),
    }
    assert by_type(compute(observed=pods(3)))["Ready"]["observedGeneration"] == 4


def test_reconciling_while_pods_are_created_replaced_deleted_or_not_ready():
    cases = {
        "ScalingUp": compute(observed=pods(1), plan=Plan(create_slots=[1, 2])),
        "RollingUpdate": compute(observed=pods(2) + pods(1, thash="old")),
        "ScalingDown": compute(observed=pods(4), plan=Plan(delete=["p3"])),
        "WaitingForReady": compute(observed=pods(2) + pods(1, ready=False)),
    }
    for reason, st in cases.items():
        assert readiness(st) == {
            "Reconciling": ("True", reason),
            "Stalled": ("False", reason),
            "Ready": ("False", reason),
        }, reason
    c = by_type(cases["WaitingForReady"])["Reconciling"]
    assert c["message"] == "2/3 pods ready"


def test_a_failed_create_is_retried_so_reconciling_with_the_failure():
    st = compute(observed=pods(3), failure=("FailedCreate", "exceeded quota"))
    assert readiness(st)["Reconciling"] == ("True", "FailedCreate")
    assert by_type(st)["Reconciling"]["message"] == "exceeded quota"
    assert readiness(st)["Ready"] == ("False", "FailedCreate")


def test_a_service_name_conflict_stalls():
    st = compute(observed=pods(1), plan=Plan(create_slots=[1, 2]), failure=("ServiceConflict", "not ours"))
    assert readiness(st) == {
        "Reconciling": ("False", "ServiceConflict"),
        "Stalled": ("True", "ServiceConflict"),
        "Ready": ("False", "ServiceConflict"),
    }


def test_invalid_spec_stalls_and_a_fixed_one_clears_it():
    ready = compute(observed=pods(3))
    bad = status.invalid(errors=[FieldError("spec.replicas", "bad")], generation=5, current=ready, now=NOW)
    assert readiness(bad) == {
        "Reconciling": ("False", "InvalidSpec"),
        "Stalled": ("True", "InvalidSpec"),
        "Ready": ("False", "InvalidSpec"),
    }
    assert by_type(bad)["Stalled"]["message"] == "spec.replicas: bad"
    assert by_type(bad)["Stalled"]["observedGeneration"] == 5
    # the other conditions are kept as they were
    assert by_type(bad)["Available"] == by_type(ready)["Available"]
    fixed = compute(observed=pods(3), current=bad)
    assert readiness(fixed)["Stalled"] == ("False", "ReplicasReady")
    assert readiness(fixed)["Ready"] == ("True", "ReplicasReady")


def test_a_paused_rollout_with_old_pods_is_not_ready_and_kstatus_agrees():
    from operators.webserver import rollout
    from tests.framework import kstatus

    spec = {**SPEC, "rollout": {"paused": True}}
    current = rollout.track(spec, desired.template(spec), None, pods(3, thash="old"), NOW)
    st = status.compute(
        name="web",
        spec=spec,
        generation=4,
        pods=pods(3, thash="old"),
        plan=Plan(),
        failure=None,
        current=None,
        now=NOW,
        rollout=current,
    )
    assert by_type(st)["Progressing"]["reason"] == "RolloutPaused"
    assert readiness(st) == {
        "Reconciling": ("True", "RolloutPaused"),
        "Stalled": ("False", "RolloutPaused"),
        "Ready": ("False", "RolloutPaused"),
    }
    obj = {
        "apiVersion": "example.k8s.io/v1",
        "kind": "WebServer",
        "metadata": {"name": "web", "namespace": "default", "generation": 4},
        "spec": spec,
        "status": st,
    }
    assert kstatus.status_of(obj) == "InProgress"
