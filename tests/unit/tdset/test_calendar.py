"""The layered calendar (overrides, override annotation, holidays, windows, default, pre-warm)
against a deliberately naive oracle, plus its parsing and boundary cases.

The oracle evaluates each layer literally at an instant (the first override containing it, the
local date in the holiday set, the weekly table walked minute by minute from each window's
start, first writer wins) and finds changes by stepping one minute at a time; pre-warm is "the
largest replicas of a window opening within its lead time ahead", from the same minute array.
It shares no code with operators.tdset.schedule.
"""

from __future__ import annotations

import datetime
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.tdset import schedule
from tests.framework.properties import examples
from tests.unit.tdset.oracle import weekly_table, window_items

UTC = datetime.UTC
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu")
MINUTE = datetime.timedelta(minutes=1)
SPAN = datetime.timedelta(days=2)  # how far the oracle steps


class Oracle:
    def __init__(self, spec, annotation=None):
        self.zone = zoneinfo.ZoneInfo(spec.get("timeZone", "UTC"))
        self.default = spec["defaultReplica"]
        lead = spec.get("leadTime")
        self.leads = {
            item.get("name") or str(index): minutes(item.get("leadTime") or lead or "0m")
            for index, item in enumerate(spec["schedulingConfig"])
        }
        self.table = weekly_table(
            spec["schedulingConfig"], lambda index, item: item.get("name") or str(index)
        )
        self.overrides = []
        if annotation is not None:
            self.overrides.append(("annotation", annotation[0], annotation[1], annotation[2]))
        for o in spec.get("overrides", ()):
            self.overrides.append(
                (o["name"], self.instant(o["start"]), self.instant(o["end"]), o["replicas"])
            )
        holidays = spec.get("holidays") or {}
        self.holidays = {datetime.date.fromisoformat(d) for d in holidays.get("dates", ())}
        self.holiday_replicas = holidays.get("replicas")

    def instant(self, text):
        parsed = datetime.datetime.fromisoformat(text)
        if parsed.tzinfo is not None:
            return parsed.astimezone(UTC)
        # The first minute whose wall clock shows the time or later.
        t = parsed.replace(tzinfo=UTC) - datetime.timedelta(hours=16)
        while t.astimezone(self.zone).replace(tzinfo=None) < parsed:
            t += MINUTE
        return t

    def base(self, t):
        for name, start, end, replicas in self.overrides:
            if start <= t < end:
                return replicas, "override", name
        local = t.astimezone(self.zone)
        if self.holiday_replicas is not None and local.date() in self.holidays:
            return self.holiday_replicas, "holiday", local.date().isoformat()
        hit = self.table.get((local.weekday(), local.hour, local.minute))
        if hit is not None:
            return hit[0], "window", hit[1]
        return self.default, "default", None

    def timeline(self, start):
        """(minute instants, base values) from the minute after ``start`` over SPAN + a day."""
        first = start.replace(second=0, microsecond=0) + MINUTE
        steps = int((SPAN + datetime.timedelta(days=1)) / MINUTE)
        times = [first + i * MINUTE for i in range(steps)]
        return times, [self.base(t) for t in times]

    def effective(self, t, times, values):
        """Base at ``t`` raised for an opening within its lead (t on a minute of ``times``, or before)."""
        best = self.base(t)
        out = best
        i = next(k for k, x in enumerate(times) if x > t) if times[0] > t else times.index(t) + 1
        previous = best
        for k in range(i, len(times)):
            value = values[k]
            if times[k] - t > datetime.timedelta(hours=2):
                break
            if value != previous and value[1] == "window":
                lead = self.leads[value[2]]
                if lead and times[k] - lead <= t and value[0] > out[0]:
                    out = (value[0], "leadTime", value[2])
            previous = value
        return out


def minutes(text):
    return schedule.parse_duration(text)


def calendar_windows():
    return window_items(
        replicas=st.integers(0, 9),
        start_minutes=[0, 15, 30],
        end_minutes=[0, 45],
        leadTime=st.sampled_from(["1m", "15m", "1h30m"]),
    )


def dst_instants():
    """Instants in 2026, a third of them within a day of an offset change of the zone."""
    changes = {
        "Europe/Berlin": [
            datetime.datetime(2026, 3, 29, 1, tzinfo=UTC),
            datetime.datetime(2026, 10, 25, 1, tzinfo=UTC),
        ],
        "America/New_York": [
            datetime.datetime(2026, 3, 8, 7, tzinfo=UTC),
            datetime.datetime(2026, 11, 1, 6, tzinfo=UTC),
        ],
        "Australia/Lord_Howe": [
            datetime.datetime(2026, 4, 4, 15, tzinfo=UTC),
            datetime.datetime(2026, 10, 3, 15, 30, tzinfo=UTC),
        ],
    }
    anywhere = st.datetimes(
        min_value=datetime.datetime(2026, 1, 1),
        max_value=datetime.datetime(2026, 12, 31),
        timezones=st.just(UTC),
    )
    near = st.sampled_from([c for cs in changes.values() for c in cs]).flatmap(
        lambda c: st.integers(-30 * 3600, 6 * 3600).map(lambda s: c + datetime.timedelta(seconds=s))
    )
    return st.one_of(anywhere, anywhere, near)


@st.composite
def calendars(draw):
    zone = draw(st.sampled_from(ZONES))
    now = draw(dst_instants())
    local_day = now.astimezone(zoneinfo.ZoneInfo(zone)).date()
    spec = {
        "schedulingConfig": draw(st.lists(calendar_windows(), max_size=4)),
        "defaultReplica": draw(st.integers(1, 9)),
        "timeZone": zone,
    }
    if draw(st.booleans()):
        spec["leadTime"] = draw(st.sampled_from(["5m", "45m"]))
    overrides = []
    for i in range(draw(st.integers(0, 3))):
        start = now + datetime.timedelta(minutes=draw(st.integers(-600, 2000)))
        start = start.replace(second=0, microsecond=0)
        end = start + datetime.timedelta(minutes=draw(st.integers(1, 1500)))
        if draw(st.booleans()):  # RFC 3339
            texts = (schedule._rfc3339(start), schedule._rfc3339(end))
        else:  # the zone's wall clock (may fall in a skipped or repeated hour)
            tz = zoneinfo.ZoneInfo(zone)
            texts = tuple(x.astimezone(tz).strftime("%Y-%m-%dT%H:%M") for x in (start, end))
            if texts[0] >= texts[1]:
                continue
        overrides.append(
            {"name": f"o{i}", "start": texts[0], "end": texts[1], "replicas": draw(st.integers(0, 9))}
        )
    if overrides:
        spec["overrides"] = overrides
    if draw(st.booleans()):
        days = draw(st.lists(st.integers(-1, 3), min_size=1, max_size=3, unique=True))
        spec["holidays"] = {
            "dates": [(local_day + datetime.timedelta(days=d)).isoformat() for d in days],
            "replicas": draw(st.integers(0, 9)),
        }
    annotation = None
    if draw(st.booleans()):
        until = (now + datetime.timedelta(minutes=draw(st.integers(-60, 1500)))).replace(
            second=0, microsecond=0
        )
        annotation = (datetime.datetime.min.replace(tzinfo=UTC), until, draw(st.integers(0, 9)))
    return spec, now, annotation


def annotations(annotation):
    if annotation is None:
        return None
    return {
        schedule.OVERRIDE_ANNOTATION: f"replicas={annotation[2]},until={schedule._rfc3339(annotation[1])}"
    }


def as_tuple(decided):
    return decided.replicas, decided.layer, decided.entry


@settings(max_examples=examples(100))
@given(calendars())
def test_every_layer_at_an_instant_matches_the_oracle(case):
    spec, now, annotation = case
    assert schedule.check(spec) == []
    oracle = Oracle(spec, annotation)
    times, values = oracle.timeline(now)
    decision = schedule.decide(spec, now, annotations(annotation))
    assert as_tuple(decision.decided) == oracle.effective(now, times, values)
    assert decision.replicas == decision.decided.replicas


@settings(max_examples=examples(60))
@given(calendars(), st.integers(0, schedule.UPCOMING))
def test_a_lookahead_asked_for_fewer_transitions_first_decides_as_decide_does(case, first):
    """A pass that only flips asks for one transition, then the status pass for all of them:
    the look-ahead continues its walk and must give what a fresh decide() gives."""
    spec, now, annotation = case
    ann = annotations(annotation)
    ahead = schedule.Lookahead(spec, now, ann)
    early = ahead.decision(first)
    fresh = schedule.decide(spec, now, ann)
    assert early == schedule.decide(spec, now, ann, count=first)
    assert early.next_transition == fresh.next_transition
    assert ahead.decision(schedule.UPCOMING) == fresh


@settings(max_examples=examples(40))
@given(calendars())
def test_upcoming_is_what_decide_gives_at_each_instant_and_nothing_changes_between(case):
    spec, now, annotation = case
    ann = annotations(annotation)
    decision = schedule.decide(spec, now, ann)
    oracle = Oracle(spec, annotation)
    times, values = oracle.timeline(now)
    previous, at = as_tuple(decision.decided), now
    assert decision.next_transition == (decision.upcoming[0].time if decision.upcoming else None)
    for item in decision.upcoming:
        assert item.time > at
        # What status.upcoming promises is what decide() gives at that instant...
        later = schedule.decide(spec, item.time, ann)
        assert as_tuple(later.decided) == as_tuple(item.decided) != previous
        # ...and nothing changes in between (the instant just before still has the old value).
        assert (
            as_tuple(schedule.decide(spec, item.time - datetime.timedelta(microseconds=1), ann).decided)
            == previous
        )
        previous, at = as_tuple(item.decided), item.time
    # The first change the oracle sees, minute by minute, is the first upcoming one.
    start = oracle.effective(now, times, values)
    first = next(
        (t for t in times[: int(SPAN / MINUTE)] if oracle.effective(t, times, values) != start),
        None,
    )
    if first is not None:
        assert decision.upcoming[0].time == first
    elif decision.upcoming:
        assert decision.upcoming[0].time > times[0] + SPAN - 2 * MINUTE


@settings(max_examples=examples(100))
@given(calendars(), st.integers(0, 36 * 60))
def test_lead_time_never_scales_down_early(case, offset):
    spec, now, annotation = case
    ann = annotations(annotation)
    t = now + datetime.timedelta(minutes=offset)
    calendar, _ = schedule.calendar_from(spec, ann)
    decided = schedule.decide(spec, t, ann).decided
    base = calendar.at(t)
    assert decided.replicas >= base.replicas
    if decided.layer == schedule.LEAD_TIME:
        # Raised to what the window will have when it opens, within its lead time.
        assert decided.opens is not None and decided.window is not None
        assert t < decided.opens <= t + decided.window.lead
        assert as_tuple(calendar.at(decided.opens)) == (decided.replicas, schedule.WINDOW, decided.entry)
    else:
        assert decided == base


def test_precedence_annotation_override_holiday_window_default():
    spec = {
        "timeZone": "Europe/Berlin",
        "schedulingConfig": [{"name": "office", "startTime": 9, "endTime": 17, "replica": 4}],
        "defaultReplica": 2,
        "holidays": {"dates": ["2026-12-24"], "replicas": 1},
        "overrides": [
            {"name": "sale", "start": "2026-12-24T10:00", "end": "2026-12-24T12:00", "replicas": 6}
        ],
    }
    ann = {schedule.OVERRIDE_ANNOTATION: "replicas=9,until=2026-12-24T10:30"}
    at = lambda h, m=0, **kw: datetime.datetime(2026, 12, 24, h, m, tzinfo=zoneinfo.ZoneInfo("Europe/Berlin"))  # noqa: E731
    layers = lambda t, a=ann: as_tuple(schedule.decide(spec, t, a).decided)  # noqa: E731
    assert layers(at(10, 15)) == (9, "override", "annotation")
    assert layers(at(10, 30)) == (6, "override", "sale")
    assert layers(at(12)) == (1, "holiday", "2026-12-24")
    assert layers(at(12), None) == (1, "holiday", "2026-12-24")
    day_after = datetime.datetime(2026, 12, 25, 10, tzinfo=zoneinfo.ZoneInfo("Europe/Berlin"))
    assert layers(day_after) == (4, "window", "office")
    assert layers(day_after.replace(hour=18)) == (2, "default", None)
    # Each boundary is the next transition, in order; the override expires at its end.
    decision = schedule.decide(spec, at(10, 15), ann)
    assert [
        (u.time.astimezone(zoneinfo.ZoneInfo("Europe/Berlin")).strftime("%d %H:%M"), u.decided.layer)
        for u in decision.upcoming
    ] == [
        ("24 10:30", "override"),
        ("24 12:00", "holiday"),
        ("25 00:00", "default"),
        ("25 09:00", "window"),
        ("25 17:00", "default"),
    ]
    assert decision.upcoming[1].decided.entry == "2026-12-24"


def test_recheck_delay_wakes_at_override_holiday_and_lead_time_boundaries():
    now = datetime.datetime(2026, 12, 24, 9, 58, 30, tzinfo=UTC)
    base = {"schedulingConfig": [], "defaultReplica": 2, "intervalMint": 60}
    cases = [
        (
            {
                "overrides": [
                    {
                        "name": "o",
                        "start": "2026-12-24T09:00:00Z",
                        "end": "2026-12-24T10:00:00Z",
                        "replicas": 5,
                    }
                ]
            },
            90,
        ),
        ({"holidays": {"dates": ["2026-12-25"], "replicas": 1}}, 14 * 3600 + 90),
        (
            {
                "schedulingConfig": [
                    {"startTime": 10, "startMinute": 30, "endTime": 11, "replica": 5, "leadTime": "30m"}
                ]
            },
            90,
        ),
    ]
    for extra, seconds in cases:
        spec = {**base, **extra, "intervalMint": 1440}
        decision = schedule.decide(spec, now)
        assert schedule.recheck_delay(spec, decision, now) == pytest.approx(seconds + 0.001)
    ann = {schedule.OVERRIDE_ANNOTATION: "replicas=3,until=2026-12-24T10:00:00Z"}
    decision = schedule.decide({**base, "intervalMint": 1440}, now, ann)
    assert (decision.replicas, decision.layer) == (3, "override")
    assert schedule.recheck_delay(base, decision, now) == pytest.approx(90.001)


def test_a_local_override_starting_in_the_skipped_hour_starts_when_the_clock_jumps():
    # Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST at 01:00Z.
    spec = {
        "timeZone": "Europe/Berlin",
        "schedulingConfig": [],
        "defaultReplica": 1,
        "overrides": [
            {"name": "night", "start": "2026-03-29T02:30", "end": "2026-03-29T04:00", "replicas": 7}
        ],
    }
    decision = schedule.decide(spec, datetime.datetime(2026, 3, 29, 0, 30, tzinfo=UTC))
    assert decision.next_transition == datetime.datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert decision.upcoming[1].time == datetime.datetime(2026, 3, 29, 2, 0, tzinfo=UTC)  # 04:00 CEST


def test_a_holiday_lasts_a_local_day_also_when_the_clock_falls_back():
    # Berlin, 2026-10-25 has 25 hours.
    spec = {
        "timeZone": "Europe/Berlin",
        "schedulingConfig": [],
        "defaultReplica": 2,
        "holidays": {"dates": ["2026-10-25"], "replicas": 0},
    }
    decision = schedule.decide(spec, datetime.datetime(2026, 10, 24, 12, tzinfo=UTC))
    start, end = decision.upcoming[0].time, decision.upcoming[1].time
    assert (start, end - start) == (
        datetime.datetime(2026, 10, 24, 22, tzinfo=UTC),
        datetime.timedelta(hours=25),
    )


def test_dated_entries_beyond_a_week_are_found():
    spec = {
        "schedulingConfig": [],
        "defaultReplica": 2,
        "overrides": [
            {"name": "launch", "start": "2027-03-01T00:00:00Z", "end": "2027-03-02T00:00:00Z", "replicas": 8}
        ],
    }
    decision = schedule.decide(spec, datetime.datetime(2026, 12, 1, tzinfo=UTC))
    assert [(u.time.date().isoformat(), u.decided.replicas) for u in decision.upcoming] == [
        ("2027-03-01", 8),
        ("2027-03-02", 2),
    ]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("replicas=10", "expected replicas=<n>,until=<time>"),
        ("until=2026-11-25T18:00:00Z", "expected replicas=<n>,until=<time>"),
        ("replicas=ten,until=2026-11-25T18:00:00Z", "replicas must be an integer"),
        ("replicas=10001,until=2026-11-25T18:00:00Z", "replicas must be an integer"),
        ("replicas=1,until=tomorrow", "is not a time"),
        ("replicas=1,until=2026-02-30T18:00:00Z", "day is out of range"),
        ("replicas=1,until=2026-11-25T18:00:00Z,for=ever", "expected"),
        ("replicas=1,replicas=2,until=2026-11-25T18:00:00Z", "expected"),
        ("replicas=1,from=2026-11-25T18:00:00Z,until=2026-11-25T17:00:00Z", "until must be after from"),
        ("", "expected"),
    ],
)
def test_a_malformed_annotation_is_reported_and_ignored(value, fragment):
    spec = {"schedulingConfig": [], "defaultReplica": 2}
    decision = schedule.decide(
        spec, datetime.datetime(2026, 11, 25, tzinfo=UTC), {schedule.OVERRIDE_ANNOTATION: value}
    )
    assert decision.annotation_error is not None and fragment in decision.annotation_error
    assert schedule.OVERRIDE_ANNOTATION in decision.annotation_error
    assert (decision.replicas, decision.layer) == (2, "default")


def test_annotation_with_from_local_time_and_expiry_note():
    spec = {"schedulingConfig": [], "defaultReplica": 2, "timeZone": "America/New_York"}
    ann = {schedule.OVERRIDE_ANNOTATION: " replicas=4 , from=2026-11-25T08:00 , until=2026-11-25T18:00 "}
    before = schedule.decide(spec, datetime.datetime(2026, 11, 25, 12, tzinfo=UTC), ann)
    during = schedule.decide(spec, datetime.datetime(2026, 11, 25, 14, tzinfo=UTC), ann)
    after = schedule.decide(spec, datetime.datetime(2026, 11, 25, 23, tzinfo=UTC), ann)
    assert (before.replicas, during.replicas, after.replicas) == (2, 4, 2)
    assert before.next_transition == datetime.datetime(2026, 11, 25, 13, tzinfo=UTC)
    assert during.next_transition == datetime.datetime(2026, 11, 25, 23, tzinfo=UTC)
    assert after.warnings == (
        f"{schedule.OVERRIDE_ANNOTATION} expired at 2026-11-25T23:00:00Z and no longer applies; remove it",
    )


def test_check_reports_what_the_schema_cannot_with_field_paths():
    spec = {
        "schedulingConfig": [{"startTime": 9, "endTime": 17, "replica": 1, "leadTime": "25h"}],
        "defaultReplica": 1,
        "leadTime": "soon",
        "overrides": [
            {"name": "a", "start": "2026-02-30T00:00", "end": "2026-03-01T00:00", "replicas": 1},
            {"name": "b", "start": "2026-03-01T01:00:00+01:00", "end": "2026-02-28T23:30", "replicas": 1},
        ],
        "holidays": {"dates": ["2026-13-01"], "replicas": 1},
    }
    errors = {e.path: e.message for e in schedule.check(spec)}
    assert set(errors) == {
        "spec.leadTime",
        "spec.schedulingConfig[0].leadTime",
        "spec.overrides[0].start",
        "spec.overrides[1]",
        "spec.holidays.dates[0]",
    }
    assert "at most 24h" in errors["spec.schedulingConfig[0].leadTime"]
    assert errors["spec.overrides[1]"] == "end must be after start"


def test_overlap_notes_are_bounded_and_summarised():
    windows = [{"startTime": i % 24, "endTime": (i + 23) % 24, "replica": 1} for i in range(48)]
    notes = schedule.overlaps({"schedulingConfig": windows, "defaultReplica": 1})
    assert len(notes) == schedule.MAX_OVERLAP_NOTES + 1
    assert sum(len(n) for n in notes) < 2000  # not one note per overlapping pair
    assert notes[-1].startswith("and 1123 more overlapping pairs (48 of 48 windows")


def test_overlap_of_a_sunday_night_window_wraps_into_monday():
    windows = [
        {"startTime": 22, "endTime": 2, "replica": 1, "days": ["Sun"]},
        {"startTime": 0, "endTime": 1, "replica": 2, "days": ["Mon"]},
    ]
    (note,) = schedule.overlaps({"schedulingConfig": windows, "defaultReplica": 1})
    assert "for 1 h a week" in note


def test_describe_names_each_layer():
    spec = {"timeZone": "Europe/Berlin"}
    window = schedule.Window(2, 540, 1020, 5, frozenset(range(7)), "office")
    assert schedule.describe(spec, schedule.Decided(6, "override", "sale")) == "override 'sale'"
    assert "annotation" in schedule.describe(spec, schedule.Decided(6, "override", "annotation")) or (
        schedule.OVERRIDE_ANNOTATION in schedule.describe(spec, schedule.Decided(6, "override", "annotation"))
    )
    assert schedule.describe(spec, schedule.Decided(1, "holiday", "2026-12-25")).startswith(
        "holiday 2026-12-25"
    )
    assert (
        schedule.describe(spec, schedule.Decided(5, "window", "office", window))
        == "window 2 (09:00-17:00 Europe/Berlin)"
    )
    opens = datetime.datetime(2026, 12, 1, 8, tzinfo=UTC)
    assert "pre-warm for window 2" in schedule.describe(
        spec, schedule.Decided(5, "leadTime", "office", window, opens)
    )
    assert schedule.describe(spec, schedule.Decided(2, "default")).startswith("outside every window")


def test_durations():
    assert schedule.parse_duration("1h30m") == datetime.timedelta(minutes=90)
    assert schedule.parse_duration("90s") == datetime.timedelta(seconds=90)
    for bad in ("", "5", "1d", "m"):
        with pytest.raises(ValueError):
            schedule.parse_duration(bad)
    assert schedule.format_duration(datetime.timedelta(hours=24)) == "24h"
    assert schedule.format_duration(datetime.timedelta(seconds=-75)) == "-1m15s"


def test_holiday_configmap_data_is_read_with_comments_separators_and_a_bound():
    data = {
        "de": "2026-12-25, 2026-12-26  # Christmas\n2027-01-01\n",
        "bad": "2026-13-01 christmas",
    }
    dates, problems = schedule.parse_holiday_data(data)
    assert dates == {datetime.date(2026, 12, 25), datetime.date(2026, 12, 26), datetime.date(2027, 1, 1)}
    assert problems == [
        "data.bad: '2026-13-01': month must be in 1..12",
        "data.bad: 'christmas' is not a date such as 2026-12-25",
    ]
    many = {
        "all": " ".join(
            (datetime.date(2026, 1, 1) + datetime.timedelta(days=i)).isoformat() for i in range(1500)
        )
    }
    dates, problems = schedule.parse_holiday_data(many)
    assert len(dates) == schedule.MAX_CONFIGMAP_DATES and max(dates) == datetime.date(2028, 9, 26)
    assert problems == ["holds 1500 dates; only the first 1000 are read"]


def test_dates_from_outside_the_spec_are_holidays_too():
    spec = {"schedulingConfig": [], "defaultReplica": 2, "holidays": {"replicas": 0}}
    now = datetime.datetime(2026, 12, 25, 12, tzinfo=UTC)
    assert schedule.decide(spec, now).replicas == 2
    decision = schedule.decide(spec, now, holidays=frozenset({datetime.date(2026, 12, 25)}))
    assert as_tuple(decision.decided) == (0, "holiday", "2026-12-25")
