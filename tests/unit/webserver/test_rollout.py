"""Revisions, the progress deadline, automatic rollback and pause (``operators.webserver.rollout``),
pass by pass from the status each pass wrote, as a restarted operator would read it."""

from __future__ import annotations

import datetime

from operators.webserver import desired, rollout
from operators.webserver.desired import PodView

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
GOOD = {"replicas": 2, "image": "nginx:1", "progressDeadlineSeconds": 60, "rollout": {"autoRollback": True}}
BAD = {**GOOD, "image": "nginx:broken"}


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def pods(thash: str, n: int, ready: bool = True, prefix: str = "p") -> list[PodView]:
    return [
        PodView(f"{prefix}{thash}{i}", thash, "t", "Running", True, ready, ready_since="2026-01-01T00:00:00Z")
        for i in range(n)
    ]


def track(spec, status, observed, seconds, config_hash=""):
    state = rollout.track(spec, desired.template(spec, config_hash), status, observed, at(seconds))
    return state, state.status_fields()


def available_good():
    """GOOD rolled out: revision 1, Available."""
    state, st = track(GOOD, None, [], 0)
    assert (state.revision, state.outcome, state.current["changed"]) == (1, "Progressing", [])
    state, st = track(GOOD, st, pods(desired.template_hash(GOOD), 2), 5)
    assert (state.revision, state.outcome, state.current["finishedAt"]) == (
        1,
        "Available",
        "2026-01-01T00:00:05Z",
    )
    return st


def test_a_change_is_a_new_revision_with_the_fields_that_changed():
    st = available_good()
    good, bad = desired.template_hash(GOOD), desired.template_hash(BAD)
    state, st = track(BAD, st, pods(good, 2), 10)
    assert (state.revision, state.hash, state.outcome) == (2, bad, "Progressing")
    assert state.current["changed"] == ["image"] and state.current["template"]["image"] == "nginx:broken"
    assert st["lastRolloutOutcome"] == "Progressing" and len(st["history"]) == 2


def test_no_progress_past_the_deadline_rolls_back_to_exactly_the_last_available_template():
    st = available_good()
    good, bad = desired.template_hash(GOOD), desired.template_hash(BAD)
    stuck = pods(good, 2) + pods(bad, 1, ready=False, prefix="n")
    _, st = track(BAD, st, pods(good, 2), 10)
    state, st = track(BAD, st, stuck, 69)  # a new pod created: progress? no, none available
    assert state.outcome == "Progressing" and state.rolled_back is None
    assert rollout.deadline_in(state, BAD, at(69)) == 2.0  # 60 s after 10, then one second past

    state, st = track(BAD, st, stuck, 71)
    assert state.rolled_back is not None and "rolling back to revision 1" in state.rolled_back
    assert state.hash == good and state.template == desired.template(GOOD)
    assert st["rollback"] == {
        "fromHash": bad,
        "fromSpecHash": rollout.spec_hash_of(desired.template(BAD)),
        "toRevision": 1,
    }
    assert [(e["revision"], e["outcome"]) for e in st["history"]] == [
        (1, "Available"),
        (2, "RolledBack"),
        (3, "Progressing"),
    ]
    assert st["history"][-1]["rollbackOf"] == 1 and st["history"][-1]["changed"] == ["image"]

    # The next pass (a restarted operator included) keeps going back, and says so only once.
    state, st = track(BAD, st, pods(good, 2), 72)
    assert state.rolled_back is None and state.hash == good and state.outcome == "Available"
    assert st["rollback"]["toRevision"] == 1 and st["revision"] == 3


def test_without_auto_rollback_the_deadline_is_only_reported_and_progress_clears_it():
    spec = {**BAD, "rollout": {}}
    st = available_good()
    good, bad = desired.template_hash(GOOD), desired.template_hash(spec)
    _, st = track(spec, st, pods(good, 2), 10)
    state, st = track(spec, st, pods(good, 2), 71)
    assert state.outcome == "ProgressDeadlineExceeded" and state.rollback is None and state.no_target is None
    state, st = track(spec, st, pods(good, 1) + pods(bad, 1), 80)  # one more available new pod
    assert state.outcome == "Progressing"
    state, st = track(spec, st, pods(bad, 2), 81)
    assert state.outcome == "Available"


def test_a_fix_during_the_wait_or_the_rollback_is_a_new_revision_and_ends_the_rollback():
    st = available_good()
    good = desired.template_hash(GOOD)
    _, st = track(BAD, st, pods(good, 2), 10)
    fixed = {**GOOD, "image": "nginx:2"}
    state, st = track(fixed, st, pods(good, 2), 30)  # fixed before the deadline
    assert [(e["revision"], e["outcome"]) for e in st["history"]] == [
        (1, "Available"),
        (2, "Superseded"),
        (3, "Progressing"),
    ]
    assert state.hash == desired.template_hash(fixed)

    _, st = track(BAD, st, pods(good, 2), 40)
    _, st = track(BAD, st, pods(good, 2), 101)  # rolled back to revision 1 (as revision 5)
    assert st["rollback"]["fromHash"] == desired.template_hash(BAD) and st["rollback"]["toRevision"] == 1
    state, st = track(fixed, st, pods(good, 2), 110)
    assert st["rollback"] is None and state.hash == desired.template_hash(fixed) and state.revision == 6


def test_reverting_by_hand_to_the_rollback_target_moves_nothing():
    st = available_good()
    good = desired.template_hash(GOOD)
    _, st = track(BAD, st, pods(good, 2), 10)
    _, st = track(BAD, st, pods(good, 2), 71)
    state, st2 = track(GOOD, st, pods(good, 2), 80)
    assert st2["rollback"] is None and state.hash == good and state.revision == 3  # no new revision
    assert state.outcome == "Available"


def test_a_rollback_that_misses_the_deadline_too_is_left_for_a_human():
    st = available_good()
    good, bad = desired.template_hash(GOOD), desired.template_hash(BAD)
    _, st = track(BAD, st, pods(bad, 2, ready=False), 10)  # the old pods are gone (maxUnavailable)
    state, st = track(BAD, st, pods(bad, 2, ready=False), 71)
    assert state.hash == good and state.rolled_back is not None
    stuck = pods(bad, 2, ready=False) + pods(good, 1, ready=False, prefix="r")
    _, st = track(BAD, st, stuck, 72)
    state, st = track(BAD, st, stuck, 200)
    assert state.outcome == "ProgressDeadlineExceeded" and state.hash == good and state.rolled_back is None
    state, st = track(BAD, st, stuck, 500)
    assert state.outcome == "ProgressDeadlineExceeded" and state.hash == good and state.rolled_back is None


def test_a_configmap_content_change_alone_has_no_rollback_target():
    state, st = track(GOOD, None, [], 0, "c1")
    h1 = desired.template_hash(GOOD, "c1")
    _, st = track(GOOD, st, pods(h1, 2), 1, "c1")
    _, st = track(GOOD, st, pods(h1, 2), 10, "c2")
    state, st = track(GOOD, st, pods(h1, 2), 71, "c2")
    assert state.current["changed"] == ["configHash"]
    assert state.outcome == "ProgressDeadlineExceeded" and state.no_target and state.rollback is None


def test_paused_stops_the_deadline_and_resuming_starts_it_again():
    st = available_good()
    good = desired.template_hash(GOOD)
    paused = {**BAD, "rollout": {"autoRollback": True, "paused": True}}
    _, st = track(paused, st, pods(good, 2), 10)
    state, st = track(paused, st, pods(good, 2), 500)
    assert (
        state.paused
        and state.outcome == "Progressing"
        and rollout.deadline_in(state, paused, at(500)) is None
    )
    state, st = track(BAD, st, pods(good, 2), 600)  # resumed
    assert st["progress"]["at"] == "2026-01-01T00:10:00Z" and "paused" not in st["progress"]
    state, st = track(BAD, st, pods(good, 2), 659)
    assert state.outcome == "Progressing"


def test_history_is_bounded_and_keeps_the_rollback_target():
    st = available_good()
    good = desired.template_hash(GOOD)
    for i in range(15):
        _, st = track({**GOOD, "image": f"nginx:{i + 10}"}, st, pods(good, 2), 10 + i)
    assert len(st["history"]) == rollout.HISTORY_LIMIT
    assert st["history"][0]["revision"] == 1  # the last available one stays
    assert [e["revision"] for e in st["history"][1:]] == list(range(8, 17))
    state, st = track(BAD, st, pods(good, 2), 100)
    state, st = track(BAD, st, pods(good, 2), 161)
    assert st["rollback"]["toRevision"] == 1 and state.hash == good


def test_a_template_above_the_limit_is_not_kept():
    big = {**GOOD, "env": [{"name": "A", "value": "x" * rollout.MAX_TEMPLATE_BYTES}]}
    state, st = track(big, None, [], 0)
    assert "template" not in state.current
    state, st = track(GOOD, st, [], 1)
    assert state.current["changed"] == ["unknown"]


def test_plan_creates_nothing_of_a_new_template_while_paused():
    old = pods("old", 2)
    assert desired.plan("web", {"replicas": 2}, old, paused=True).empty
    assert not desired.plan("web", {"replicas": 2}, old).empty


def test_an_unset_deadline_leaves_room_for_min_ready_seconds():
    assert rollout.progress_deadline({"replicas": 1}) == 600
    assert rollout.progress_deadline({"replicas": 1, "minReadySeconds": 900}) == 1500
    assert (
        rollout.progress_deadline({"replicas": 1, "minReadySeconds": 900, "progressDeadlineSeconds": 901})
        == 901
    )


def test_a_configmap_edit_during_an_automatic_rollback_keeps_it():
    # The bad image, with the referenced ConfigMaps' content c1, was rolled back; editing a
    # ConfigMap (c2) leaves the spec's image as bad as it was: the rollback stays.
    good, bad = desired.template_hash(GOOD, "c1"), desired.template_hash(BAD, "c1")
    _, st = track(GOOD, None, [], 0, "c1")
    _, st = track(GOOD, st, pods(good, 2), 5, "c1")
    _, st = track(BAD, st, pods(good, 2), 10, "c1")
    state, st = track(BAD, st, pods(good, 2), 71, "c1")
    assert state.rolled_back is not None and state.hash == good
    state, st = track(BAD, st, pods(good, 2), 80, "c2")
    assert st["rollback"] is not None and st["rollback"]["fromHash"] == bad
    assert state.hash == good and state.template == desired.template(GOOD, "c1")
    assert (state.revision, state.outcome, state.rolled_back) == (3, "Available", None)
    # A change of the spec's template itself still ends it.
    fixed = {**GOOD, "image": "nginx:2"}
    state, st = track(fixed, st, pods(good, 2), 90, "c2")
    assert st["rollback"] is None and state.hash == desired.template_hash(fixed, "c2")


def test_a_rollback_recorded_before_spec_hashes_still_ends_on_a_spec_change_only():
    # A status written before the rollback kept the spec's hash without ConfigMap content.
    good = desired.template_hash(GOOD)
    st = available_good()
    _, st = track(BAD, st, pods(good, 2), 10)
    _, st = track(BAD, st, pods(good, 2), 71)
    st = {**st, "rollback": {"fromHash": desired.template_hash(BAD), "toRevision": 1}}
    state, st = track(BAD, st, pods(good, 2), 80)
    assert st["rollback"] is not None and state.hash == good
