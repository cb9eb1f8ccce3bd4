"""TDSet status: the schedule fields and the three conditions with real True/False values."""

import datetime

from operators.tdset import schedule, status
from operators.tdset.desired import DeploymentView
from shared.api import conditions
from shared.api.validation import FieldError

NOW = datetime.datetime(2026, 3, 2, 10, 30, tzinfo=datetime.UTC)  # a Monday
SPEC = {
    "container": {"image": "nginx", "port": 80},
    "defaultReplica": 3,
    "schedulingConfig": [{"startTime": 9, "endTime": 17, "replica": 5}],
}
DECISION = schedule.decide(SPEC, NOW)


def dep(*, replicas=5, ready=5, updated=5, status_replicas=5, available=True, rolled_out=True):
    return DeploymentView(
        "shop", replicas, "nginx", 80, status_replicas, ready, updated, available, rolled_out
    )


def compute(deployment, *, desired_replicas=5, autoscaler=None, suspended=False, failure=None, warnings=()):
    return status.compute(
        observed=status.Observed(
            decision=DECISION,
            desired=desired_replicas,
            deployment=deployment,
            autoscaler=autoscaler,
            suspended=suspended,
            warnings=list(warnings),
            failure=failure,
        ),
        generation=2,
        current=None,
        now=NOW,
    )


def reason(st, type_):
    c = conditions.get(st["conditions"], type_)
    assert c is not None
    return c["status"], c["reason"]


def test_schedule_fields():
    st = compute(dep())
    assert st["desiredReplicas"] == st["scheduledReplicas"] == 5
    assert st["activeWindow"] == 0
    assert st["nextTransitionTime"] == "2026-03-02T17:00:00Z"
    assert st["observedGeneration"] == 2
    assert (st["replicas"], st["readyReplicas"]) == (5, 5)


def test_ready_deployment_is_available_and_not_progressing():
    st = compute(dep())
    assert reason(st, conditions.AVAILABLE) == ("True", "MinimumReplicasAvailable")
    assert reason(st, conditions.PROGRESSING) == ("False", "DeploymentReady")
    assert reason(st, conditions.DEGRADED)[0] == "False"


def test_progressing_reasons_follow_the_deployment():
    assert reason(compute(None), conditions.AVAILABLE) == ("False", "DeploymentMissing")
    assert reason(compute(None), conditions.PROGRESSING) == ("True", "Scaling")
    assert reason(compute(dep(replicas=3)), conditions.PROGRESSING) == ("True", "Scaling")
    assert reason(compute(dep(rolled_out=False)), conditions.PROGRESSING) == ("True", "RollingOut")
    assert reason(compute(dep(updated=2)), conditions.PROGRESSING) == ("True", "RollingOut")
    assert reason(compute(dep(status_replicas=6)), conditions.PROGRESSING) == ("True", "RollingOut")
    assert reason(compute(dep(ready=4, available=False)), conditions.PROGRESSING) == (
        "True",
        "WaitingForReady",
    )
    assert reason(compute(dep(ready=4, available=False)), conditions.AVAILABLE)[0] == "False"


def test_under_an_autoscaler_the_deployment_count_is_not_ours_to_chase():
    st = compute(dep(replicas=8, ready=8, updated=8, status_replicas=8), autoscaler="h")
    assert st["autoscaler"] == "h"
    assert reason(st, conditions.PROGRESSING) == ("False", "DeploymentReady")


def test_suspended_is_reported_with_what_the_schedule_would_do():
    st = compute(dep(replicas=9), desired_replicas=9, suspended=True)
    status_, why = reason(st, conditions.PROGRESSING)
    assert (status_, why) == ("False", "Suspended")
    assert "5" in conditions.get(st["conditions"], conditions.PROGRESSING)["message"]
    assert st["desiredReplicas"] == 9 and st["scheduledReplicas"] == 5


def test_failure_is_degraded_with_its_reason():
    st = compute(dep(), failure=("DeploymentConflict", "a Deployment named shop exists"))
    assert reason(st, conditions.DEGRADED) == ("True", "DeploymentConflict")


def test_warnings_are_a_list():
    assert compute(dep(), warnings=("w",))["warnings"] == ["w"]


def test_invalid_keeps_the_last_good_counts_and_clears_the_schedule_fields():
    good = compute(dep())
    bad = status.invalid(
        errors=[FieldError("spec.timeZone", "unknown time zone 'Mars/Olympus'")],
        generation=3,
        current=good,
        now=NOW,
    )
    assert bad["observedGeneration"] == 3
    assert bad["activeWindow"] is None and bad["nextTransitionTime"] is None
    assert bad["desiredReplicas"] == 5
    c = conditions.get(bad["conditions"], conditions.DEGRADED)
    assert c is not None and c["status"] == "True" and c["reason"] == "InvalidSpec"
    assert "spec.timeZone" in c["message"]
    # the other conditions are kept as they were
    assert conditions.get(bad["conditions"], conditions.AVAILABLE) == conditions.get(
        good["conditions"], conditions.AVAILABLE
    )


def test_recheck_is_at_the_boundary_or_at_most_interval_mint():
    decision = schedule.decide(SPEC, NOW)
    assert schedule.recheck_delay(SPEC, decision, NOW) == 60 * 60  # default cap: an hour
    assert schedule.recheck_delay({**SPEC, "intervalMint": 5}, decision, NOW) == 300
    late = datetime.datetime(2026, 3, 2, 16, 59, 58, 500000, tzinfo=datetime.UTC)
    delay = schedule.recheck_delay({**SPEC, "intervalMint": 5}, schedule.decide(SPEC, late), late)
    assert 1.5 < delay < 1.6  # the boundary, a hair after it


def test_recheck_is_never_zero_or_negative():
    decision = schedule.Decision(3, None, NOW - datetime.timedelta(seconds=5))
    assert schedule.recheck_delay(SPEC, decision, NOW) > 0


def readiness(st):
    return {t: reason(st, t) for t in (conditions.RECONCILING, conditions.STALLED, conditions.READY)}


def test_ready_once_the_deployment_has_its_replicas_rolled_out_and_ready():
    assert readiness(compute(dep())) == {
        "Reconciling": ("False", "DeploymentReady"),
        "Stalled": ("False", "DeploymentReady"),
        "Ready": ("True", "DeploymentReady"),
    }


def test_reconciling_while_the_deployment_is_scaled_rolled_out_or_not_ready():
    cases = {
        "missing": (compute(None), "Scaling"),
        "scaling": (compute(dep(replicas=3)), "Scaling"),
        "not rolled out": (compute(dep(rolled_out=False)), "RollingOut"),
        "old pods": (compute(dep(updated=2)), "RollingOut"),
        "surplus pods": (compute(dep(status_replicas=6)), "RollingOut"),
        "not ready": (compute(dep(ready=4, available=False)), "WaitingForReady"),
        "write failed": (compute(dep(), failure=("FailedUpdate", "timeout")), "FailedUpdate"),
    }
    for name, (st, why) in cases.items():
        assert readiness(st) == {
            "Reconciling": ("True", why),
            "Stalled": ("False", why),
            "Ready": ("False", why),
        }, name


def test_suspended_is_ready_when_its_deployment_is_settled_and_not_before():
    settled = compute(
        dep(replicas=9, ready=9, updated=9, status_replicas=9), desired_replicas=9, suspended=True
    )
    assert readiness(settled)[conditions.READY] == ("True", "DeploymentReady")
    assert reason(settled, conditions.PROGRESSING) == ("False", "Suspended")  # unchanged
    waiting = compute(
        dep(replicas=9, ready=7, updated=9, status_replicas=9), desired_replicas=9, suspended=True
    )
    assert readiness(waiting)[conditions.RECONCILING] == ("True", "WaitingForReady")


def test_a_name_conflict_stalls():
    st = compute(dep(replicas=3), failure=("DeploymentConflict", "a Deployment named shop exists"))
    assert readiness(st) == {
        "Reconciling": ("False", "DeploymentConflict"),
        "Stalled": ("True", "DeploymentConflict"),
        "Ready": ("False", "DeploymentConflict"),
    }


def test_invalid_spec_stalls():
    bad = status.invalid(
        errors=[FieldError("spec.timeZone", "unknown time zone 'Mars/Olympus'")],
        generation=3,
        current=compute(dep()),
        now=NOW,
    )
    assert readiness(bad) == {
        "Reconciling": ("False", "InvalidSpec"),
        "Stalled": ("True", "InvalidSpec"),
        "Ready": ("False", "InvalidSpec"),
    }
    stalled = conditions.get(bad["conditions"], conditions.STALLED)
    assert stalled is not None and "spec.timeZone" in stalled["message"]
    assert stalled["observedGeneration"] == bad["observedGeneration"] == 3
