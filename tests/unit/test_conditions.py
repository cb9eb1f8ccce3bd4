import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.api import conditions

T0 = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=5)


def cond(status, reason="Ok", message="", gen=1, now=T0):
    return conditions.make("Available", status, reason, message, generation=gen, now=now)


def test_make_fills_every_field():
    c = cond(True, "AllReady", "3/3 ready", gen=7)
    assert c == {
        "type": "Available",
        "status": "True",
        "observedGeneration": 7,
        "lastTransitionTime": "2026-01-01T12:00:00Z",
        "reason": "AllReady",
        "message": "3/3 ready",
    }


@pytest.mark.parametrize("reason", ["", "not camel", "9Lives", "Trailing,", "a" * 1025])
def test_make_rejects_bad_reasons(reason):
    with pytest.raises(ValueError, match="CamelCase"):
        conditions.make("Available", "True", reason, generation=1, now=T0)


def test_make_rejects_bad_status():
    with pytest.raises(ValueError, match="True, False or Unknown"):
        conditions.make("Available", "Yes", "Ok", generation=1, now=T0)  # type: ignore[arg-type]


def test_transition_time_kept_when_status_unchanged():
    before = conditions.set_condition([], cond(True, "A", "x", now=T0))
    after = conditions.set_condition(before, cond(True, "B", "y", gen=2, now=T1))
    assert after[0]["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert after[0]["reason"] == "B" and after[0]["message"] == "y"
    assert after[0]["observedGeneration"] == 2


def test_transition_time_moves_when_status_changes():
    before = conditions.set_condition([], cond(True, now=T0))
    after = conditions.set_condition(before, cond(False, now=T1))
    assert after[0]["lastTransitionTime"] == "2026-01-01T12:05:00Z"
    assert after[0]["status"] == "False"


def test_other_conditions_kept_in_order_and_new_type_appended():
    progressing = conditions.make("Progressing", "False", "Done", generation=1, now=T0)
    degraded = conditions.make("Degraded", "False", "Fine", generation=1, now=T0)
    lst = conditions.set_all([], progressing, degraded)
    lst = conditions.set_condition(lst, cond(True))
    assert [c["type"] for c in lst] == ["Progressing", "Degraded", "Available"]
    assert conditions.is_true(lst, "Available")
    assert not conditions.is_true(lst, "Progressing")
    assert conditions.get(lst, "Missing") is None


def test_set_condition_does_not_mutate_input():
    original = [dict(cond(True))]
    snapshot = [dict(c) for c in original]
    conditions.set_condition(original, cond(False, now=T1))
    assert original == snapshot


def test_status_patch_none_when_nothing_changed():
    lst = conditions.set_condition([], cond(True))
    current = {"replicas": 3, "conditions": lst, "kopf": {"progress": {}}}
    # Recomputing the same condition later must not produce a write.
    again = conditions.set_condition(lst, cond(True, now=T1))
    assert conditions.status_patch(current, {"replicas": 3, "conditions": again}) is None


def test_status_patch_returns_whole_status_on_change():
    lst = conditions.set_condition([], cond(True))
    current = {"replicas": 3, "conditions": lst}
    patch = conditions.status_patch(current, {"replicas": 4, "conditions": lst})
    assert patch == {"replicas": 4, "conditions": lst}


@given(st.lists(st.tuples(st.sampled_from(["True", "False", "Unknown"]), st.integers(0, 10**6)), min_size=1))
def test_transition_time_changes_exactly_on_status_changes(steps):
    lst: list = []
    previous_status = None
    for i, (status, gen) in enumerate(steps):
        now = T0 + datetime.timedelta(seconds=i)
        lst = conditions.set_condition(lst, conditions.make("Ready", status, "R", generation=gen, now=now))
        (c,) = lst
        if status != previous_status:
            assert c["lastTransitionTime"] == conditions.rfc3339(now)
            last_change = now
        assert c["lastTransitionTime"] == conditions.rfc3339(last_change)
        assert c["observedGeneration"] == gen
        previous_status = status


def readiness(**state):
    return {c["type"]: c for c in conditions.readiness(generation=3, now=T0, **state)}


def test_readiness_ready_when_nothing_is_pending_or_stalled():
    c = readiness(ready=("ReplicasReady", "3/3 pods ready"))
    assert [(t, c[t]["status"]) for t in c] == [
        ("Reconciling", "False"),
        ("Stalled", "False"),
        ("Ready", "True"),
    ]
    assert {(x["reason"], x["message"], x["observedGeneration"]) for x in c.values()} == {
        ("ReplicasReady", "3/3 pods ready", 3)
    }


def test_readiness_reconciling_is_true_with_the_pending_work():
    c = readiness(reconciling=("WaitingForReady", "1/5 pods ready"), ready=("ReplicasReady", "-"))
    assert {t: x["status"] for t, x in c.items()} == {
        "Reconciling": "True",
        "Stalled": "False",
        "Ready": "False",
    }
    assert (c["Reconciling"]["reason"], c["Reconciling"]["message"]) == ("WaitingForReady", "1/5 pods ready")
    assert c["Ready"]["reason"] == "WaitingForReady"


def test_readiness_stalled_wins_and_never_leaves_reconciling_true():
    # kstatus reads whichever of the two True conditions comes first: both True would be ambiguous.
    c = readiness(stalled=("ServiceConflict", "not ours"), reconciling=("ScalingUp", "creating 2 pod(s)"))
    assert {t: x["status"] for t, x in c.items()} == {
        "Reconciling": "False",
        "Stalled": "True",
        "Ready": "False",
    }
    assert (c["Stalled"]["reason"], c["Stalled"]["message"]) == ("ServiceConflict", "not ours")


def test_readiness_needs_a_state():
    with pytest.raises(ValueError, match="reason, message"):
        conditions.readiness(generation=1, now=T0)


def test_every_conflict_reason_stalls_and_transient_failures_do_not():
    # Where the ConflictError subclasses are defined (WebServer has none of its own).
    import operators.tdset.reconciler
    import shared.api.services
    from shared.api.errors import ConflictError

    def subclasses(cls):
        return {cls} | {s for c in cls.__subclasses__() for s in subclasses(c)}

    reasons = {c.reason for c in subclasses(ConflictError)}
    assert {"Conflict", "ServiceConflict", "DeploymentConflict"} <= reasons
    assert operators.tdset.reconciler.DeploymentConflictError.reason in reasons
    assert shared.api.services.ServiceConflictError.reason in reasons
    assert all(conditions.needs_a_human(r) for r in reasons)
    for transient in ("FailedCreate", "FailedDelete", "FailedAdopt", "FailedService", "FailedUpdate"):
        assert not conditions.needs_a_human(transient)
