import datetime

from operators.webserver import desired, status
from operators.webserver.desired import Plan, PodView
from shared import conditions
from shared.validation import FieldError

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
