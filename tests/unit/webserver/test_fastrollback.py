"""Fast rollback by ``spec.rollout.rollbackTo`` (``operators.webserver.fastrollback``), pass by
pass through ``operators.webserver.rollout.track`` and the planner."""

from __future__ import annotations

import datetime

from hypothesis import given
from hypothesis import strategies as st

from operators.webserver import desired, fastrollback, rollout, status
from operators.webserver.desired import Plan, PodView
from operators.webserver.schema import rule_errors

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
V1 = {"replicas": 4, "image": "nginx:1"}
V2 = {**V1, "image": "nginx:2"}
V3 = {**V1, "image": "nginx:3"}


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def pods(thash: str, n: int, ready: bool = True) -> list[PodView]:
    return [
        PodView(f"p{thash}{i}", thash, "t", "Running", True, ready, ready_since="2026-01-01T00:00:00Z")
        for i in range(n)
    ]


def track(spec, st, observed, seconds):
    state = rollout.track(spec, desired.template(spec), st, observed, at(seconds))
    return state, state.status_fields()


def three_revisions():
    """V1, V2, V3 each rolled out and Available: revisions 1, 2, 3."""
    st = None
    for i, spec in enumerate((V1, V2, V3)):
        _, st = track(spec, st, [], i * 10)
        _, st = track(spec, st, pods(desired.template_hash(spec), 4), i * 10 + 1)
    return st


def with_rollback(spec, revision=None):
    ask = {} if revision is None else {"revision": revision}
    return {**spec, "rollout": {"rollbackTo": ask}}


def test_previous_is_the_last_available_revision_before_the_running_one_and_stays_it():
    st = three_revisions()
    v2, v3 = desired.template_hash(V2), desired.template_hash(V3)
    spec = with_rollback(V3)
    state, st = track(spec, st, pods(v3, 4), 40)
    assert state.hash == v2 and state.template == desired.template(V2) and state.manual
    assert state.fast is not None and "revision 2" in state.fast
    assert st["rollback"]["toRevision"] == 2 and st["rollback"]["requested"] == 0
    assert st["history"][-1]["rollbackOf"] == 2 and state.revision == 4
    # Every pod of the target at once, no old pod deleted before a new one is available.
    plan = desired.plan("web", fastrollback.fast_spec(spec), pods(v3, 4), thash=state.hash)
    assert len(plan.create_slots) == 4 and plan.delete == []
    slow = desired.plan("web", spec, pods(v3, 4), thash=state.hash)
    assert len(slow.create_slots) < 4  # maxSurge 25 %
    # Later passes: still revision 2 ("previous" is not re-resolved against the new history),
    # said once, and done once the pods run it: not stalled, Ready.
    state, st = track(spec, st, pods(v2, 4), 41)
    assert state.hash == v2 and state.fast is None and state.outcome == "Available"
    done = status.compute(
        name="web",
        spec=spec,
        generation=2,
        pods=pods(v2, 4),
        plan=Plan(),
        failure=None,
        current=st,
        now=at(41),
        rollout=state,
    )
    conds = {c["type"]: c for c in done["conditions"]}
    assert (conds["Progressing"]["status"], conds["Progressing"]["reason"]) == ("False", "RollbackComplete")
    assert conds["Ready"]["status"] == "True" and conds["Stalled"]["status"] == "False"


def test_any_kept_revision_and_clearing_the_field_rolls_the_spec_out_again():
    st = three_revisions()
    v1, v3 = desired.template_hash(V1), desired.template_hash(V3)
    state, st = track(with_rollback(V3, 1), st, pods(v3, 4), 40)
    assert state.hash == v1 and st["rollback"]["toRevision"] == 1
    # A spec change while it is set: the field still holds the pods on revision 1.
    state, st = track(with_rollback({**V3, "image": "nginx:4"}, 1), st, pods(v1, 4), 50)
    assert state.hash == v1 and state.fast is None
    state, st = track({**V3, "image": "nginx:4"}, st, pods(v1, 4), 60)
    assert st["rollback"] is None and state.hash == desired.template_hash({**V3, "image": "nginx:4"})


def test_a_revision_not_in_the_history_is_a_field_error_and_moves_nothing():
    st = three_revisions()
    errors = fastrollback.errors(with_rollback(V3, 9), st)
    assert [e.path for e in errors] == [fastrollback.FIELD]
    assert "revision 9 is not in status.history" in errors[0].message
    assert fastrollback.errors(with_rollback(V1), {"history": []})  # no previous revision
    assert fastrollback.errors(with_rollback(V3, 2), st) == []
    assert fastrollback.errors(V3, st) == []


def test_a_fast_rollback_wins_over_an_automatic_one_and_over_the_deadline_rollback():
    st = three_revisions()
    bad = {**V3, "image": "nginx:broken", "progressDeadlineSeconds": 5, "rollout": {"autoRollback": True}}
    v3 = desired.template_hash(V3)
    _, st = track(bad, st, pods(v3, 4), 40)
    _, st = track(bad, st, pods(v3, 4), 50)
    assert st["rollback"]["toRevision"] == 3 and not st["rollback"].get("manual")
    asked = {**bad, "rollout": {"autoRollback": True, "rollbackTo": {"revision": 1}}}
    state, st = track(asked, st, pods(v3, 4), 51)
    assert state.manual and state.hash == desired.template_hash(V1)


def test_paused_and_rollback_to_together_are_refused():
    spec = {**V1, "rollout": {"paused": True, "rollbackTo": {}}}
    assert [e.path for e in rule_errors(spec)] == ["spec.rollout.rollbackTo"]
    assert rule_errors({**V1, "rollout": {"paused": False, "rollbackTo": {}}}) == []


@given(replicas=st.integers(0, 1000), old=st.integers(0, 50), ready=st.booleans())
def test_fast_plan_creates_every_missing_pod_at_once_and_never_costs_readiness(replicas, old, ready):
    spec = fastrollback.fast_spec({"replicas": replicas, "rollout": {"maxSurge": 1, "paused": True}})
    plan = desired.plan("web", spec, pods("old", old, ready=ready), thash="new")
    assert len(plan.create_slots) == replicas
    # Before the new pods are available only not-ready old pods go (they serve nothing).
    # (or surplus ones above replicas): the ready pods never fall below what is asked for.
    if ready:
        assert old - len(plan.delete) >= min(old, replicas)
    elif replicas:
        assert len(plan.delete) == old
