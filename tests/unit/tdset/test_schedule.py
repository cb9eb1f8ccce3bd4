"""The schedule function against an independent, deliberately naive oracle.

The oracle marks every (weekday, minute) a window covers by walking minute by minute from its
start until its end (first writer wins), and finds the next change by stepping through UTC one
minute at a time. It shares no code with operators.tdset.schedule.
"""

import datetime
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.tdset import schedule
from tests.framework.properties import examples
from tests.unit.tdset.oracle import weekly_table, window_items

UTC = datetime.UTC
# Zones with DST, half- and quarter-hour offsets, a 30-minute DST shift (Lord Howe), a skipped
# calendar day (Apia, December 2011) and southern-hemisphere DST.
ZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "America/St_Johns",
    "Pacific/Chatham",
    "Pacific/Apia",
    "America/Sao_Paulo",
    "Europe/London",
)


class Oracle:
    def __init__(self, spec):
        self.zone = zoneinfo.ZoneInfo(spec.get("timeZone", "UTC"))
        self.default = spec["defaultReplica"]
        self.table = weekly_table(spec["schedulingConfig"], lambda index, item: index)

    def at(self, instant):
        local = instant.astimezone(self.zone)
        return self.table.get((local.weekday(), local.hour, local.minute), (self.default, None))

    def next_change(self, now, horizon=schedule.HORIZON):
        value = self.at(now)
        t = now.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
        while t < now + horizon:
            if self.at(t) != value:
                return t
            t += datetime.timedelta(minutes=1)
        return None


def schedule_windows(draw_days=True):
    return window_items(
        replicas=st.integers(0, 20), start_minutes=[0, 15, 30, 59], end_minutes=[0, 1, 30, 45], days=draw_days
    )


specs = st.fixed_dictionaries(
    {
        "schedulingConfig": st.lists(schedule_windows(), min_size=0, max_size=5),
        "defaultReplica": st.integers(1, 9),
        "timeZone": st.sampled_from(ZONES),
    }
)
instants = st.datetimes(
    min_value=datetime.datetime(2005, 1, 1), max_value=datetime.datetime(2035, 12, 31), timezones=st.just(UTC)
)


@given(specs, instants)
def test_replicas_match_oracle(spec, now):
    sched = schedule.from_spec(spec)
    assert sched.at(now) == Oracle(spec).at(now)


@settings(max_examples=examples(60))
@given(specs, instants)
def test_next_transition_matches_oracle(spec, now):
    sched = schedule.from_spec(spec)
    got = schedule.next_transition(sched, now)
    assert got == Oracle(spec).next_change(now)
    if got is not None:
        assert got > now
        assert sched.at(got) != sched.at(now)
        # Nothing changes in between: the instant just before is still the old value.
        assert sched.at(got - datetime.timedelta(microseconds=1)) == sched.at(now)


def offset_changes(zone_name, year):
    """UTC instants (whole minutes) at which the zone's offset changes in ``year``: hourly, then by minute."""
    zone = zoneinfo.ZoneInfo(zone_name)
    t = datetime.datetime(year, 1, 1, tzinfo=UTC)
    found = []
    while t.year == year:
        nxt = t + datetime.timedelta(hours=1)
        if t.astimezone(zone).utcoffset() != nxt.astimezone(zone).utcoffset():
            m = t
            while m.astimezone(zone).utcoffset() == t.astimezone(zone).utcoffset():
                m += datetime.timedelta(minutes=1)
            found.append(m)
        t = nxt
    return found


@st.composite
def near_offset_change(draw):
    zone = draw(st.sampled_from([z for z in ZONES if z not in ("UTC", "Asia/Kolkata", "Asia/Kathmandu")]))
    year = draw(st.sampled_from([2011, 2018, 2026, 2031]))
    changes = offset_changes(zone, year)
    if not changes:
        return zone, draw(instants)
    base = draw(st.sampled_from(changes))
    return zone, base + datetime.timedelta(seconds=draw(st.integers(-26 * 3600, 2 * 3600)))


@settings(max_examples=examples(60))
@given(st.lists(schedule_windows(), min_size=1, max_size=4), near_offset_change())
def test_around_dst_changes_matches_oracle(items, zone_and_now):
    zone, now = zone_and_now
    spec = {"schedulingConfig": items, "defaultReplica": 3, "timeZone": zone}
    sched, oracle = schedule.from_spec(spec), Oracle(spec)
    assert sched.at(now) == oracle.at(now)
    assert schedule.next_transition(sched, now) == oracle.next_change(now)


def at_local(zone, *args, fold=0):
    return datetime.datetime(*args, tzinfo=zoneinfo.ZoneInfo(zone), fold=fold).astimezone(UTC)


TUTORIAL = {
    "schedulingConfig": [
        {"startTime": 0, "endTime": 6, "replica": 1},
        {"startTime": 6, "endTime": 9, "replica": 2},
        {"startTime": 9, "endTime": 17, "replica": 5},
        {"startTime": 17, "endTime": 19, "replica": 4},
        {"startTime": 19, "endTime": 0, "replica": 2},
    ],
    "defaultReplica": 3,
}


@pytest.mark.parametrize(
    ("hour", "expected"), [(0, (1, 0)), (5, (1, 0)), (6, (2, 1)), (9, (5, 2)), (18, (4, 3)), (19, (2, 4))]
)
def test_tutorial_windows(hour, expected):
    sched = schedule.from_spec(TUTORIAL)
    assert sched.at(datetime.datetime(2026, 11, 22, hour, 30, tzinfo=UTC)) == expected


def test_nineteen_to_zero_ends_at_midnight_and_next_transition_is_exact():
    spec = {"schedulingConfig": [{"startTime": 19, "endTime": 0, "replica": 7}], "defaultReplica": 3}
    sched = schedule.from_spec(spec)
    assert sched.at(datetime.datetime(2026, 11, 22, 23, 59, 59, tzinfo=UTC)) == (7, 0)
    assert sched.at(datetime.datetime(2026, 11, 23, 0, 0, tzinfo=UTC)) == (3, None)
    now = datetime.datetime(2026, 11, 22, 18, 59, 58, 500000, tzinfo=UTC)
    assert schedule.next_transition(sched, now) == datetime.datetime(2026, 11, 22, 19, 0, tzinfo=UTC)


def test_first_match_wins_and_default_outside():
    spec = {
        "schedulingConfig": [
            {"startTime": 8, "endTime": 12, "replica": 4},
            {"startTime": 10, "endTime": 14, "replica": 9},
        ],
        "defaultReplica": 1,
    }
    sched = schedule.from_spec(spec)
    day = datetime.datetime(2026, 6, 1, tzinfo=UTC)
    assert sched.at(day.replace(hour=11)) == (4, 0)
    assert sched.at(day.replace(hour=13)) == (9, 1)
    assert sched.at(day.replace(hour=15)) == (1, None)
    assert schedule.overlaps(spec) == [
        "spec.schedulingConfig[1] (10:00-14:00) overlaps spec.schedulingConfig[0] (08:00-12:00) "
        "for 14 h a week; the earlier window wins there"
    ]


def test_weekday_belongs_to_the_start_of_a_midnight_crossing_window():
    spec = {
        "schedulingConfig": [{"startTime": 22, "endTime": 6, "replica": 8, "days": ["Fri"]}],
        "defaultReplica": 2,
    }
    sched = schedule.from_spec(spec)
    friday, saturday = (
        datetime.datetime(2026, 11, 20, tzinfo=UTC),
        datetime.datetime(2026, 11, 21, tzinfo=UTC),
    )
    assert sched.at(friday.replace(hour=23)) == (8, 0)
    assert sched.at(saturday.replace(hour=5, minute=59)) == (8, 0)
    assert sched.at(saturday.replace(hour=23)) == (2, None)
    assert sched.at(friday.replace(hour=3)) == (2, None)  # Thursday's night is not in the window


def test_spring_forward_skipped_times_never_occur():
    # Europe/Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00 UTC.
    spec = {
        "timeZone": "Europe/Berlin",
        "schedulingConfig": [
            {"startTime": 2, "endTime": 2, "endMinute": 30, "replica": 6},
            {"startTime": 2, "startMinute": 30, "endTime": 4, "replica": 4},
        ],
        "defaultReplica": 1,
    }
    sched = schedule.from_spec(spec)
    before = at_local("Europe/Berlin", 2026, 3, 29, 1, 59)
    assert sched.at(before) == (1, None)
    # The clock jumps to 03:00, inside the second window; the first one does not happen at all.
    assert schedule.next_transition(sched, before) == datetime.datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert sched.at(datetime.datetime(2026, 3, 29, 1, 0, tzinfo=UTC)) == (4, 1)
    # The day before, both windows occur normally.
    assert sched.at(at_local("Europe/Berlin", 2026, 3, 28, 2, 10)) == (6, 0)


def test_fall_back_repeated_hour_is_in_the_window_twice():
    # Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00 UTC.
    spec = {
        "timeZone": "Europe/Berlin",
        "schedulingConfig": [{"startTime": 2, "endTime": 3, "replica": 5}],
        "defaultReplica": 1,
    }
    sched = schedule.from_spec(spec)
    first = at_local("Europe/Berlin", 2026, 10, 25, 2, 0, fold=0)
    second = at_local("Europe/Berlin", 2026, 10, 25, 2, 0, fold=1)
    assert second - first == datetime.timedelta(hours=1)
    assert sched.at(first) == (5, 0)
    assert sched.at(second + datetime.timedelta(minutes=59)) == (5, 0)
    # Two real hours in the window: the end is 03:00 CET, 02:00 UTC.
    assert schedule.next_transition(sched, first) == datetime.datetime(2026, 10, 25, 2, 0, tzinfo=UTC)


def test_no_transition_when_nothing_changes():
    spec = {"schedulingConfig": [], "defaultReplica": 2, "timeZone": "Europe/Berlin"}
    sched = schedule.from_spec(spec)
    assert schedule.next_transition(sched, datetime.datetime(2026, 3, 28, tzinfo=UTC)) is None


def test_check_reports_unknown_zone_and_empty_window():
    spec = {
        "timeZone": "Mars/Olympus",
        "schedulingConfig": [{"startTime": 5, "endTime": 5, "replica": 1}],
        "defaultReplica": 1,
    }
    errors = {e.path: e.message for e in schedule.check(spec)}
    assert set(errors) == {"spec.timeZone", "spec.schedulingConfig[0]"}
    assert "Mars/Olympus" in errors["spec.timeZone"]
    assert schedule.check({**spec, "timeZone": "../../etc/passwd", "schedulingConfig": []})
    assert schedule.check({**spec, "timeZone": "Asia/Tokyo", "schedulingConfig": []}) == []


def test_decide_names_the_window():
    decision = schedule.decide(TUTORIAL, datetime.datetime(2026, 11, 22, 10, tzinfo=UTC))
    assert decision.replicas == 5
    assert decision.window is not None
    assert decision.window.index == 2
    assert decision.next_transition == datetime.datetime(2026, 11, 22, 17, tzinfo=UTC)
    assert schedule.describe(TUTORIAL, decision.window) == "window 2 (09:00-17:00 UTC)"
