"""TDSet status and conditions, computed from the schedule decision and the Deployment (pure).

With ``spec.scaleTargetRef`` the same conditions describe the target, read through its
``/scale`` and its status (``operators.tdset.target.readiness``); its failures are
``TargetNotScalable``, ``TargetNotFound``, ``TargetForbidden`` (Degraded, retried) and
``TargetConflict`` (another TDSet holds it, or another controller: an owner reference with
``controller: true``; Stalled, as a name conflict, until the holder goes; one Event per change).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.tdset import schedule
from operators.tdset.desired import DeploymentView
from operators.tdset.schedule import Decision
from shared.api import conditions
from shared.api.errors import Failure
from shared.api.validation import FieldError, degraded


@dataclass(frozen=True)
class Observed:
    decision: Decision
    desired: int  # what the operator maintains (HPA floor, or Deployment replicas)
    deployment: DeploymentView | None
    autoscaler: str | None
    suspended: bool
    warnings: Sequence[str]
    failure: Failure | None
    workload: str = "Deployment"  # the kind it scales: its own Deployment, or its scaleTargetRef's
    zone: str = schedule.DEFAULT_TIME_ZONE  # spec.timeZone, for status.upcoming's local times
    autoscaler_bounds: Mapping[str, Any] | None = None  # status.autoscalerBounds, with an HPA


def compute(
    *, observed: Observed, generation: int, current: Mapping[str, Any] | None, now: datetime.datetime
) -> dict[str, Any]:
    """The complete status to write for one pass (compared with the current one before writing).

    Conditions:

    - ``Available``: the Deployment reports ``Available`` (its minimum availability is met);
      False with ``DeploymentMissing`` before it exists.
    - ``Progressing``: True while the Deployment is being scaled, rolled out or waited for
      (``Scaling``, ``RollingOut``, ``WaitingForReady``); False with ``DeploymentReady`` once it has
      the replica count it should have, all updated and ready; False with ``Suspended`` while
      ``spec.suspend`` is set.
    - ``Degraded``: True with ``InvalidSpec`` and the field paths when the spec does not pass the
      schema or the checks the schema cannot express (time zone, empty window, dates); True with the
      failure's reason when a child could not be written; True with ``InvalidOverrideAnnotation``
      when the override annotation cannot be read (the calendar runs without it), with
      ``HolidaysUnavailable`` when the holidays' ConfigMap is missing or holds what is not a date
      (the calendar runs with the dates it could read, so one bad date in a ConfigMap that many
      TDSets share leaves its other dates applying in each), with ``CalendarError`` when the
      calendar raised on a spec that passed the checks (replicas left as they are, retried);
      False otherwise.
    - ``Reconciling``/``Stalled``/``Ready`` (``shared.api.conditions.readiness``, what kstatus and
      Argo CD judge): ``Stalled`` for an invalid spec or a name conflict (``DeploymentConflict``,
      ``ServiceConflict``: only a human can resolve it); ``Reconciling`` while the Deployment does
      not have the replicas it should have (the schedule's, the autoscaler's, or its own while
      suspended) rolled out, updated and ready, or a write failed (retried);
      ``Ready`` otherwise.
    """
    dep, decision = observed.deployment, observed.decision

    def cond(type_: str, status: bool, reason: str, message: str) -> conditions.Condition:
        return conditions.make(type_, status, reason, message, generation=generation, now=now)

    if dep is None:
        available = cond(conditions.AVAILABLE, False, "DeploymentMissing", f"no {observed.workload} yet")
    elif dep.available:
        available = cond(
            conditions.AVAILABLE, True, "MinimumReplicasAvailable", f"{dep.ready} of {dep.replicas} ready"
        )
    else:
        available = cond(
            conditions.AVAILABLE, False, "MinimumReplicasUnavailable", f"{dep.ready} of {dep.replicas} ready"
        )

    # Under an HPA the Deployment's own count is the autoscaler's decision, not ours.
    target = dep.replicas if dep is not None and observed.autoscaler else observed.desired
    # What the Deployment still has to do, suspended or not (then its own count is the target).
    pending: Failure | None = None
    if dep is None or dep.replicas != target:
        pending = Failure("Scaling", f"scaling the {observed.workload} to {target}")
    elif not dep.rolled_out or dep.updated < target or dep.status_replicas > target:
        pending = Failure("RollingOut", f"{dep.updated} of {target} pods updated")
    elif dep.ready < target:
        pending = Failure("WaitingForReady", f"{dep.ready} of {target} ready")
    settled = ("DeploymentReady", f"{dep.ready if dep is not None else 0} of {target} ready")

    if observed.suspended:
        progressing = cond(
            conditions.PROGRESSING,
            False,
            "Suspended",
            f"scheduling is suspended; the schedule would run {decision.replicas}",
        )
    else:
        progressing = cond(conditions.PROGRESSING, pending is not None, *(pending or settled))

    if observed.failure is not None:
        health = cond(conditions.DEGRADED, True, *observed.failure)
    elif decision.annotation_error is not None:
        health = cond(conditions.DEGRADED, True, INVALID_ANNOTATION, decision.annotation_error)
    elif decision.holidays_error is not None:
        health = cond(conditions.DEGRADED, True, HOLIDAYS_UNAVAILABLE, decision.holidays_error)
    else:
        health = degraded([], generation=generation, now=now)
    failure = observed.failure
    readiness = conditions.readiness(
        stalled=failure if failure and conditions.needs_a_human(failure[0]) else None,
        reconciling=failure or pending,
        ready=settled,
        generation=generation,
        now=now,
    )

    return {
        "desiredReplicas": observed.desired,
        "scheduledReplicas": decision.replicas,
        "activeWindow": decision.window.index if decision.window is not None else None,
        "nextTransitionTime": (
            conditions.rfc3339(decision.next_transition) if decision.next_transition is not None else None
        ),
        "replicas": dep.status_replicas if dep is not None else 0,
        "readyReplicas": dep.ready if dep is not None else 0,
        "autoscaler": observed.autoscaler,
        "autoscalerBounds": dict(observed.autoscaler_bounds)
        if observed.autoscaler_bounds is not None
        else None,
        **calendar_fields(decision, observed.zone),
        "preWarm": prewarm(
            (current or {}).get("preWarm"), decision, dep.ready if dep is not None else 0, now
        ),
        "warnings": list(observed.warnings),
        "observedGeneration": generation,
        "conditions": conditions.set_all(
            (current or {}).get("conditions"), available, progressing, health, *readiness
        ),
    }


def invalid(
    *, errors: list[FieldError], generation: int, current: Mapping[str, Any] | None, now: datetime.datetime
) -> dict[str, Any]:
    """Status for an invalid spec: ``Degraded`` with the paths, ``Stalled``; the schedule fields
    are cleared."""
    cause = degraded(errors, generation=generation, now=now)
    return _unscheduled(current, generation, cause, *conditions.stalled_by(cause, now=now))


def calendar_failed(
    *, message: str, generation: int, current: Mapping[str, Any] | None, now: datetime.datetime
) -> dict[str, Any]:
    """Status for a calendar that raised: ``Degraded`` with ``CALENDAR_ERROR``,
    ``Reconciling`` (retried), not ``Ready``; the schedule fields are cleared."""
    cause = conditions.make(
        conditions.DEGRADED, True, CALENDAR_ERROR, message, generation=generation, now=now
    )
    return _unscheduled(
        current,
        generation,
        cause,
        *conditions.readiness(reconciling=(CALENDAR_ERROR, message), generation=generation, now=now),
    )


def _unscheduled(
    current: Mapping[str, Any] | None, generation: int, *conds: conditions.Condition
) -> dict[str, Any]:
    """``current`` with the schedule fields cleared and ``conds`` set: no calendar to show."""
    out = dict(current or {})
    out.update(
        {
            "observedGeneration": generation,
            "activeWindow": None,
            "nextTransitionTime": None,
            "decidedBy": None,
            "upcoming": None,
            "conditions": conditions.set_all(out.get("conditions"), *conds),
        }
    )
    return out


CALENDAR_ERROR = "CalendarError"
INVALID_ANNOTATION = "InvalidOverrideAnnotation"
HOLIDAYS_UNAVAILABLE = "HolidaysUnavailable"


def _decided_by(decided: schedule.Decided) -> dict[str, Any]:
    out: dict[str, Any] = {"layer": decided.layer}
    if decided.entry is not None:
        out["entry"] = decided.entry
    return out


def calendar_fields(decision: Decision, zone: str) -> dict[str, Any]:
    """``decidedBy`` and ``upcoming`` (each transition in UTC and on the wall clock of ``zone``)."""
    try:
        tz = schedule.load_zone(zone)
    except ValueError:
        tz = schedule.load_zone(schedule.DEFAULT_TIME_ZONE)
    upcoming = [
        {
            "time": conditions.rfc3339(t.time),
            "localTime": t.time.astimezone(tz).isoformat(),
            "replicas": t.decided.replicas,
            **_decided_by(t.decided),
        }
        for t in decision.upcoming
    ]
    return {
        "decidedBy": _decided_by(decision.decided) if decision.decided is not None else None,
        "upcoming": upcoming,
    }


# An unwatched target (scaleTargetRef) is read once a pass: while it has not caught up with what
# the TDSet asks (scaling, rolling out, getting ready) or a pre-warm waits for it, the next pass
# comes as long after as that has been going on, within these bounds (seconds): the waits
# double, 5, 10, 20, 40 s... So the status (READY, Progressing, preWarm.readyAt) lags the
# target by at most the time the target took, at a few reads per change (a tenth instead gave
# 22 passes and 43 GETs per flip at 1000 TDSets: docs/benchmarks.md), and a target that never
# gets there costs a GET (two for a kind outside the apps group) every 5 minutes.
TARGET_POLL = (5.0, 300.0)
UNSETTLED = frozenset({"Scaling", "RollingOut", "WaitingForReady"})


def target_recheck(new: Mapping[str, Any], decision: Decision, now: datetime.datetime) -> float | None:
    """Seconds to the next look at an unwatched target, from the status just computed
    (``new``); None when nothing waits for it."""
    since: list[datetime.datetime] = []
    progressing = conditions.get(new.get("conditions"), conditions.PROGRESSING)
    if progressing is not None and progressing["status"] == "True" and progressing["reason"] in UNSETTLED:
        since.append(datetime.datetime.fromisoformat(str(progressing["lastTransitionTime"])))
    began = _prewarm_began(new.get("preWarm"), decision, now)
    if began is not None:
        since.append(began)
    if not since:
        return None
    low, high = TARGET_POLL
    return min(max((now - max(since)).total_seconds(), low), high)


def _prewarm_began(
    record: Mapping[str, Any] | None, decision: Decision, now: datetime.datetime
) -> datetime.datetime | None:
    """When the pre-warm that ``record`` still waits to see ready began; None if none waits."""
    decided = decision.decided
    if record is None or "readyAt" in record or decided is None or decided.window is None:
        return None
    start = datetime.datetime.fromisoformat(str(record["windowStart"]))
    if decided.entry != record.get("entry"):
        return None
    warming = decided.layer == schedule.LEAD_TIME and decided.opens == start
    opened = decided.layer == schedule.WINDOW and now >= start
    return start - decided.window.lead if warming or opened else None


def prewarm(
    previous: Mapping[str, Any] | None, decision: Decision, ready: int, now: datetime.datetime
) -> dict[str, Any] | None:
    """The last pre-warmed opening and when the target was first ready for it.

    A new record starts when pre-warm for another opening begins; ``readyAt`` is set on the
    first pass that sees ``ready`` at the pre-warmed replicas, while the pre-warm or the window
    it was for still decides (the passes follow the status of a Deployment the TDSet runs, so
    that is when it got ready, to the watch's delay; an unwatched target is polled meanwhile,
    ``target_recheck``).
    """
    record = dict(previous) if previous else None
    decided = decision.decided
    if decided is not None and decided.layer == schedule.LEAD_TIME and decided.opens is not None:
        opens = conditions.rfc3339(decided.opens)
        if record is None or record.get("windowStart") != opens:
            record = {"entry": decided.entry, "windowStart": opens, "replicas": decided.replicas}
    if record is None or "readyAt" in record or ready < int(record.get("replicas") or 0):
        return record
    start = datetime.datetime.fromisoformat(str(record["windowStart"]))
    warming = decided is not None and decided.layer == schedule.LEAD_TIME and decided.opens == start
    opened = decided is not None and decided.layer == schedule.WINDOW and decided.entry == record.get("entry")
    if warming or (opened and now >= start):
        # The seconds from the time as written (whole seconds), so the two fields agree.
        ready_at = now.replace(microsecond=0)
        record["readyAt"] = conditions.rfc3339(ready_at)
        record["readySecondsAfterStart"] = int((ready_at - start).total_seconds())
    return record
