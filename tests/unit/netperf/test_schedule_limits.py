"""The Netperf schedule over the whole input space its schema admits, extremes included.

``spec.schedule`` is any string of the schema's shape (a macro, or five whitespace-separated
words), ``spec.timeZone`` every zone of ``zoneinfo.available_timezones()`` or a name that only
matches the pattern, and the instants the search starts from (``status.lastScheduleTime``, the
creation time, the clock) anything from year 1 to 9999. The property: parsing either answers or
names the field (``FieldError``, from the module's ``ValueError``), and a parsed schedule's
decision answers, with its next time after the instant it started from, for every zone.
"""

from __future__ import annotations

import datetime
import zoneinfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.netperf import cron, schedule
from operators.netperf.schema import CRD
from tests.framework.properties import examples

UTC = datetime.UTC
ZONES = sorted(zoneinfo.available_timezones())
PROPERTIES = CRD.openapi_schema()["properties"]["spec"]["properties"]
SCHEDULE_PATTERN = PROPERTIES["schedule"]["pattern"]
ZONE_PATTERN = PROPERTIES["timeZone"]["pattern"]
SETTINGS = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])

FIELD_WORDS = st.one_of(
    st.sampled_from(
        ["*", "*/15", "0", "59", "23", "31", "12", "7", "0-30/10", "5/20", "JAN-DEC", "SUN", "MON-FRI"]
    ),
    st.from_regex(r"^[0-9A-Za-z*/,\-]{1,8}$", fullmatch=True),
)
expressions = st.one_of(
    st.sampled_from(sorted(cron.MACROS)),
    st.lists(FIELD_WORDS, min_size=5, max_size=5).map(" ".join),
    st.from_regex(SCHEDULE_PATTERN, fullmatch=True).filter(lambda e: len(e) <= 128),
    # Never, or once in years: the search runs to its horizon.
    st.sampled_from(["0 0 30 2 *", "0 0 29 2 1", "59 23 31 12 *", "0 0 1 1 *"]),
)
zone_names = st.one_of(
    st.sampled_from(ZONES),
    st.sampled_from(ZONES),
    st.from_regex(ZONE_PATTERN, fullmatch=True).filter(lambda n: len(n) <= 64),
)
EDGES = (
    datetime.datetime(1, 1, 1, tzinfo=UTC),
    datetime.datetime(1, 1, 1, 0, 30, tzinfo=UTC),
    datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    datetime.datetime(9999, 12, 31, tzinfo=UTC),
    datetime.datetime(9991, 6, 1, tzinfo=UTC),
    datetime.datetime(9992, 1, 1, tzinfo=UTC),
)
instants = st.one_of(
    st.sampled_from(EDGES),
    st.datetimes(
        datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC)
    ),
)


@SETTINGS
@given(
    expr=expressions,
    zone=zone_names,
    window=st.one_of(st.none(), st.tuples(st.integers(0, 23), st.integers(0, 23))),
)
def test_any_admitted_schedule_is_parsed_or_names_the_field(expr, zone, window):
    spec = {"schedule": expr, "timeZone": zone}
    if window is not None:
        spec["window"] = {"startHour": window[0], "endHour": window[1]}
    parsed, errors = schedule.parse(spec)
    assert parsed is not None
    assert all(e.path in ("spec.schedule", "spec.timeZone", "spec.window") for e in errors)


@SETTINGS
@given(expr=expressions, zone=st.sampled_from(ZONES), after=instants)
def test_the_next_time_is_found_or_none_from_any_instant_in_any_zone(expr, zone, after):
    try:
        parsed = cron.parse(expr)
    except ValueError:
        return
    found = cron.next_after(parsed, after, zoneinfo.ZoneInfo(zone))
    if found is not None:
        assert after < found < cron.LAST
        wall = found.astimezone(zoneinfo.ZoneInfo(zone))
        assert parsed.matches(wall) and not wall.fold


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expr=st.sampled_from(["@hourly", "@daily", "0 0 30 2 *", "*/30 * * * *"]),
    zone=st.sampled_from(ZONES),
    last=instants,
    running=st.booleans(),
)
def test_a_decision_answers_whatever_the_last_schedule_time(expr, zone, last, running):
    """``lastScheduleTime`` near year 1 or 9999 (a status written by hand, a clock far off):
    the decision answers, never an overflow; at most a day of due times is looked through."""
    parsed, errors = schedule.parse({"schedule": expr, "timeZone": zone})
    assert parsed is not None and not errors
    now = (
        min(last + datetime.timedelta(hours=25), datetime.datetime(9999, 12, 31, 23, 59, tzinfo=UTC))
        if last.year < 9999
        else last
    )
    decision = schedule.decide(parsed, last, now, running=running)
    assert decision.next_time is None or decision.next_time > last
