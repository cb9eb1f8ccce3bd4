"""The scheduling rules as a pure function of (schedule, last due time dealt with, now)."""

from __future__ import annotations

import datetime

import pytest

from operators.netperf import schedule
from operators.netperf.schema import combination_errors

UTC = datetime.UTC


def t(hour: int, minute: int = 0) -> datetime.datetime:
    return datetime.datetime(2026, 1, 5, hour, minute, tzinfo=UTC)


def parsed(**spec) -> schedule.Schedule:
    s, errors = schedule.parse({"schedule": "0 * * * *", **spec})
    assert s is not None and errors == []
    return s


def test_not_due_yet_says_when():
    d = schedule.decide(parsed(), t(10, 0), t(10, 30), running=False)
    assert d == schedule.Decision(next_time=t(11))


def test_due_starts_and_the_next_time_follows():
    d = schedule.decide(parsed(), t(10), t(11, 0), running=False)
    assert (d.start, d.consumed, d.skipped, d.next_time) == (t(11), t(11), {}, t(12))


def test_several_missed_one_catch_up_the_latest():
    d = schedule.decide(parsed(), t(10), t(13, 20), running=False)
    assert (d.start, d.skipped) == (t(13), {"missed": 2})


def test_running_skips_every_due_time_as_overlapping():
    d = schedule.decide(parsed(), t(10), t(12, 1), running=True)
    assert (d.start, d.consumed, d.skipped) == (None, t(12), {"overlapping": 2})


def test_starting_deadline():
    d = schedule.decide(parsed(startingDeadlineSeconds=300), t(10), t(11, 6), running=False)
    assert (d.start, d.skipped) == (None, {"missed": 1})
    d = schedule.decide(parsed(startingDeadlineSeconds=300), t(10), t(11, 4), running=False)
    assert d.start == t(11)


@pytest.mark.parametrize(
    ("window", "hour", "inside"),
    [((22, 6), 23, True), ((22, 6), 3, True), ((22, 6), 6, False), ((22, 6), 12, False), ((1, 5), 1, True)],
)
def test_quiet_window_like_tdsets_end_exclusive_crossing_midnight(window, hour, inside):
    s = parsed(window={"startHour": window[0], "endHour": window[1]})
    d = schedule.decide(s, t(hour) - datetime.timedelta(hours=1), t(hour), running=False)
    assert (d.start is not None) == inside
    assert d.skipped == ({} if inside else {"outsideWindow": 1})


def test_the_window_is_read_in_the_time_zone():
    s = parsed(timeZone="Asia/Tokyo", window={"startHour": 2, "endHour": 4})  # UTC+9
    assert schedule.decide(s, t(16), t(17), running=False).start == t(17)  # 02:00 in Tokyo


def test_suspended_counts_and_does_not_start():
    d = schedule.decide(parsed(suspend=True), t(10), t(12), running=False)
    assert (d.start, d.skipped) == (None, {"suspended": 2})


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"schedule": "61 * * * *"}, "spec.schedule"),
        ({"schedule": "@daily", "timeZone": "Mars/Olympus"}, "spec.timeZone"),
        ({"schedule": "@daily", "window": {"startHour": 3, "endHour": 3}}, "spec.window"),
    ],
)
def test_errors_by_field(spec, field):
    _, errors = schedule.parse(spec)
    assert [e.path for e in errors] == [field]


@pytest.mark.parametrize(
    "field", ["timeZone", "window", "suspend", "startingDeadlineSeconds", "historyLimit"]
)
def test_schedule_fields_need_a_schedule(field):
    [error] = combination_errors({field: {"startHour": 1, "endHour": 2} if field == "window" else 1})
    assert error.path == f"spec.{field}" and "needs spec.schedule" in error.message


def test_an_acknowledged_run_with_a_pinned_baseline_is_refused_by_the_controller_too():
    [error] = combination_errors(
        {"schedule": "@daily", "regression": {"baseline": [1.0, 2.0], "acknowledgedRun": 3}}
    )
    assert error.path == "spec.regression.acknowledgedRun" and "exclusive" in error.message
    assert combination_errors({"schedule": "@daily", "regression": {"acknowledgedRun": 3}}) == []


def test_run_spec_is_the_test_part():
    spec = {"schedule": "@daily", "timeZone": "UTC", "testType": "TCP_RR", "samples": 5, "regression": {}}
    assert schedule.run_spec(spec) == {"testType": "TCP_RR", "samples": 5}


def test_the_series_is_the_earlier_done_runs_of_the_same_measurement_since_the_acknowledged_run():
    a, b = "measurement-a", "measurement-b"
    history = [
        {"run": 1, "result": "Done", "testType": "TCP_STREAM", "measurement": a, "samples": [1.0, 2.0]},
        {"run": 2, "result": "Error", "testType": "TCP_STREAM", "measurement": a, "reason": "ClientTimeout"},
        {"run": 3, "result": "Done", "testType": "TCP_STREAM", "measurement": b, "samples": [9.0, 9.0]},
        {"run": 4, "result": "Done", "testType": "TCP_STREAM", "measurement": a, "samples": [3.0, 4.0]},
        {"run": 5, "result": "Done", "testType": "TCP_STREAM", "samples": [8.0, 8.0]},  # no key: unknown
    ]
    item = {"run": 6, "result": "Done", "testType": "TCP_STREAM", "measurement": a, "samples": [5.0, 6.0]}
    assert [h["run"] for h in schedule.comparable(history, item)] == [1, 4]

    def runs(**settings):
        return [h["run"] for h in schedule.series(history, item, schedule.Settings(**settings))]

    assert runs() == [1, 4, 6]
    assert runs(baseline_runs=1) == [4, 6]
    assert runs(acknowledged_run=4) == [4, 6]
    assert runs(acknowledged_run=7) == [1, 4, 6]  # not reached yet: no effect until run 7
    first = schedule.verdict([], item, schedule.Settings())  # nothing to compare with yet
    assert isinstance(first, schedule.NotJudged) and first.reason == "NewBaseline"
    assert "starts the baseline" in first.message
    judged = schedule.verdict(history, item, schedule.Settings())  # run 6 against runs 1 and 4
    assert isinstance(judged, schedule.Judgement)
    assert not judged.regressed and judged.verdict.baseline_runs == 2
    too_few = schedule.verdict(history, item, schedule.Settings(baseline_runs=1))
    assert isinstance(too_few, schedule.NotJudged) and too_few.reason == "TooFewSamples"
    pinned = schedule.verdict([], item, schedule.Settings(pinned=(7.0, 8.0)))
    assert isinstance(pinned, schedule.Judgement) and pinned.verdict.baseline_runs == 2


def test_settings_read_the_regression_fields():
    s = schedule.settings(
        {"regression": {"direction": "Either", "acknowledgedRun": 7, "minChangePercent": 20, "pValue": 0.01}}
    )
    assert (s.direction, s.acknowledged_run, s.min_change_percent, s.p_value) == ("Either", 7, 20.0, 0.01)
    assert schedule.settings({}) == schedule.Settings()
