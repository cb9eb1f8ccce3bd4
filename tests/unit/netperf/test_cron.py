"""The cron parser and next-time search against a naive oracle (every minute, every field)."""

from __future__ import annotations

import datetime
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.netperf import cron
from tests.framework.properties import examples

UTC = zoneinfo.ZoneInfo("UTC")
BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def naive_next(expr: str, after: datetime.datetime, zone: zoneinfo.ZoneInfo, days: int):
    """The oracle: every UTC minute after ``after`` for ``days`` days, each field checked as the
    crontab(5) man page words it, the day fields combined by robfig/cron's rule (a field with an
    item ``*`` of no step above 1 is a star; a star in either: both must match, else either),
    the first repeated wall time only."""
    minute, hour, dom, month, dow = expr.split()

    def values(field: str, low: int, high: int) -> set[int]:
        out: set[int] = set()
        for item in field.split(","):
            span, _, step = item.partition("/")
            if span == "*":
                a, b = low, high
            elif "-" in span:
                a, b = map(int, span.split("-"))
            else:
                a = int(span)
                b = high if step else a
            out |= set(range(a, b + 1, int(step or 1)))
        return out

    def star(field: str) -> bool:
        return any(item in ("*", "*/1") for item in field.split(","))

    mins, hours, doms, months = (
        values(minute, 0, 59),
        values(hour, 0, 23),
        values(dom, 1, 31),
        values(month, 1, 12),
    )
    dows = {d % 7 for d in values(dow, 0, 7)}
    t = after.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)
    for _ in range(days * 24 * 60):
        w = t.astimezone(zone)
        day_dom, day_dow = w.day in doms, (w.isoweekday() % 7) in dows
        day = (day_dom and day_dow) if (star(dom) or star(dow)) else (day_dom or day_dow)
        if w.minute in mins and w.hour in hours and w.month in months and day and not w.fold:
            return t
        t += datetime.timedelta(minutes=1)
    return None


def field(low: int, high: int):
    single = st.integers(low, high).map(str)
    span = st.tuples(st.integers(low, high), st.integers(low, high)).map(lambda ab: f"{min(ab)}-{max(ab)}")
    step = st.tuples(st.sampled_from(["*", f"{low}"]), st.integers(1, max(1, high - low))).map(
        lambda s: f"{s[0]}/{s[1]}"
    )
    item = st.one_of(st.just("*"), single, span, step)
    return st.lists(item, min_size=1, max_size=3).map(",".join)


EXPRESSIONS = st.tuples(field(0, 59), field(0, 23), field(1, 31), st.just("*"), field(0, 7)).map(" ".join)


@settings(max_examples=examples(150), deadline=None)
@given(expr=EXPRESSIONS, offset=st.integers(0, 60 * 24 * 40), zone=st.sampled_from([UTC, BERLIN]))
def test_next_after_agrees_with_the_minute_by_minute_oracle(expr, offset, zone):
    # Around 2026-03-29 and 2026-10-25 (Berlin's DST changes) too: offsets cover Jan to Nov.
    after = T0 + datetime.timedelta(minutes=offset * 7)
    expected = naive_next(expr, after, zone, days=35)
    got = cron.next_after(cron.parse(expr), after, zone)
    if expected is None:
        assert got is None or got > after + datetime.timedelta(days=35)
    else:
        assert got == expected


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("*/15 * * * *", "2026-01-01T00:07:00", "2026-01-01T00:15:00"),
        ("@hourly", "2026-01-01T00:00:00", "2026-01-01T01:00:00"),
        ("0 9 * * MON-FRI", "2026-01-02T10:00:00", "2026-01-05T09:00:00"),  # Fri after 9 -> Mon
        ("0 0 1 JAN *", "2026-06-01T00:00:00", "2027-01-01T00:00:00"),
        ("0 0 13 * 5", "2026-01-01T00:00:00", "2026-01-02T00:00:00"),  # 13th OR Friday (Vixie cron)
        # A stepped star is no star in CronJob's parser: the 1st, 8th, ... OR a Monday.
        ("0 0 */7 * 1", "2026-11-28T00:00:00", "2026-11-29T00:00:00"),
        ("0 0 */7 * 1", "2026-11-29T00:00:00", "2026-11-30T00:00:00"),
        ("0 0 */1 * 1", "2026-11-28T00:00:00", "2026-11-30T00:00:00"),  # */1 is a star: AND
        ("0 0 ? * 1", "2026-11-28T00:00:00", "2026-11-30T00:00:00"),
        ("0 0 29 2 *", "2026-01-01T00:00:00", "2028-02-29T00:00:00"),
        ("0 0 * * 7", "2026-01-01T00:00:00", "2026-01-04T00:00:00"),  # 7 is Sunday too
    ],
)
def test_examples(expr, after, expected):
    t = datetime.datetime.fromisoformat(after).replace(tzinfo=datetime.UTC)
    assert cron.next_after(cron.parse(expr), t, UTC) == datetime.datetime.fromisoformat(expected).replace(
        tzinfo=datetime.UTC
    )


def test_daylight_saving_skips_a_missing_time_and_fires_a_repeated_one_once():
    c = cron.parse("30 2 * * *")
    spring = cron.next_after(c, datetime.datetime(2026, 3, 28, 12, tzinfo=datetime.UTC), BERLIN)
    assert spring == datetime.datetime(2026, 3, 30, 0, 30, tzinfo=datetime.UTC)  # 29th: no 02:30
    fall = cron.next_after(c, datetime.datetime(2026, 10, 24, 12, tzinfo=datetime.UTC), BERLIN)
    assert fall == datetime.datetime(2026, 10, 25, 0, 30, tzinfo=datetime.UTC)  # 02:30 CEST, once
    assert cron.next_after(c, fall, BERLIN) == datetime.datetime(2026, 10, 26, 1, 30, tzinfo=datetime.UTC)


def test_never_and_missed():
    assert cron.next_after(cron.parse("0 0 30 2 *"), T0, UTC) is None
    count, latest = cron.missed(cron.parse("*/5 * * * *"), T0, T0 + datetime.timedelta(hours=1), UTC)
    assert (count, latest) == (12, T0 + datetime.timedelta(hours=1))


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("* * * *", "has 4 fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 5-2 * * *", "hour: range '5-2' ends before it starts"),
        ("* * 0 * *", "day of month: 0 is outside 1-31"),
        ("* * * FOO *", "month: 'FOO' is not a number or a name"),
        ("*/0 * * * *", "step must be at least 1"),
        ("@often", "has 1 fields"),
    ],
)
def test_errors_name_the_field(expr, fragment):
    with pytest.raises(ValueError) as info:
        cron.parse(expr)
    assert fragment in str(info.value)
