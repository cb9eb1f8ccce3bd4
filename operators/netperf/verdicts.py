"""A scheduled Netperf's regression verdict in its status, and when it stops applying (pure).

The verdict lives in the status only (``status.regression`` and the ``Regressed`` condition);
the ``netperf_regressed`` series is derived from it on every pass (``.status.series``), so a
restarted operator, a new leader or an upgraded one exports what the object says.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from operators.netperf import measurement, schedule, schema
from shared.api import conditions

CLEARED = ("NotScheduled", "MeasurementChanged")


def _condition(
    st: Mapping[str, Any], status: bool, reason: str, message: str, *, generation: int, now: datetime.datetime
) -> list[dict[str, Any]]:
    made = conditions.make(schedule.REGRESSED, status, reason, message, generation=generation, now=now)
    return conditions.set_all(st.get("conditions"), made)


def recorded(
    st: Mapping[str, Any],
    item: Mapping[str, Any],
    measured: Mapping[str, Any],
    outcome: schedule.Judgement | schedule.NotJudged,
    *,
    generation: int,
    now: datetime.datetime,
) -> dict[str, Any]:
    """``st`` with the verdict on the finished run ``item`` (of measurement ``measured``, as
    ``.measurement.with_key`` gives it) and the ``Regressed`` condition.

    - ``recorded``: a finished run judged (``.schedule.verdict``): ``status.regression``
      with the run, its test type and measurement, the detector's figures (finite numbers only) or
      why it was not judged, and ``regressedSince``: the first run of a regression that goes on
      (the detector's ``changeRun`` when it was found; the alert's ``run`` label, stable while the
      regression lasts). The ``Regressed`` condition always agrees with it: a result that is not
      judged sets it False with the reason.
    - ``settled``: the verdict no longer applies (the schedule was removed, or the measurement
      of the spec is not the one judged): ``status.regression`` is removed and ``Regressed`` is
      False with the reason (``NotScheduled``, ``MeasurementChanged``) and what the verdict was.
    """
    run, test_type = int(item["run"]), str(item["testType"])
    previous = st.get("measurement") or {}
    changed = measurement.change(previous, measured) if previous.get("key") != measured["key"] else ""
    before = st.get("regression") or {}
    found: dict[str, Any] = {
        "run": run,
        "testType": test_type,
        "measurement": measured["key"],
    }
    if isinstance(outcome, schedule.NotJudged):
        found.update(judged=False, regressed=False, reason=outcome.reason)
        what = outcome.message
        reason = outcome.reason
        regressed = False
    else:
        regressed = outcome.regressed
        reason = "Regressed" if regressed else "WithinBaseline"
        since = outcome.change_run or run
        if regressed and before.get("regressed") and before.get("measurement") == measured["key"]:
            since = int(before.get("regressedSince") or before.get("run") or since)
        found.update(judged=True, reason=reason, **outcome.status(run))
        if regressed:
            found["regressedSince"] = since
        what = outcome.summary()
        if regressed and since != outcome.change_run:
            what += f"; regressed since run {since}"
    message = f"run {run} ({test_type}): {what}"
    if measured.get("samples") is not None:
        message += schema.detection_note(int(measured["samples"]))
    if changed:
        message += f"; the measurement changed ({changed})"
    since_run = int(previous.get("since") or run) if not changed and previous else run
    return {
        **st,
        "measurement": {**measured, "since": since_run},
        "regression": found,
        "conditions": _condition(st, regressed, reason, message, generation=generation, now=now),
    }


def settled(
    spec: Mapping[str, Any],
    st: Mapping[str, Any],
    *,
    generation: int,
    now: datetime.datetime,
) -> dict[str, Any] | None:
    """``st`` with a verdict that no longer applies cleared (None: it applies, or there is none).

    It applies while the spec has a schedule and measures what the judged run measured."""
    found = st.get("regression")
    if not found:
        return None
    was = "regressed" if found.get("regressed") else "not regressed"
    if not spec.get("schedule"):
        reason = "NotScheduled"
        message = f"no schedule: results are not judged (run {found.get('run')} was {was})"
    else:
        wanted = measurement.with_key(schedule.run_spec(spec))
        if wanted["key"] == found.get("measurement"):
            return None
        judged = st.get("measurement") or {}
        changed = measurement.change(judged, wanted) if judged.get("key") == found.get("measurement") else ""
        reason = "MeasurementChanged"
        message = (
            f"the measurement changed ({changed or 'spec'}) after run {found.get('run')} was {was}: "
            "the next result starts or joins the baseline of the new measurement"
        )
    return {
        **st,
        "regression": None,
        "conditions": _condition(st, False, reason, message, generation=generation, now=now),
    }
