"""Our cron against CronJob's own parser, robfig/cron v3 (built from its pinned module): the
same expressions accepted and the same next run times, on generated expressions and instants.

Zones without daylight saving only (UTC, fixed offsets, zones whose offset has not changed
since before the instants): across a DST change we differ on purpose (cron.py's docstring).
The one expression we accept and CronJob refuses is 7 for Sunday in the day of week; a few
malformed fields its tokenizer lets through we refuse (the last test).
"""

from __future__ import annotations

import datetime
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.netperf import cron
from tests.framework import robfigcron
from tests.framework.properties import examples

COUNT = 6  # next times compared per expression and instant
# Fixed offsets (Etc/GMT+5 is UTC-5), and zones of a constant odd offset since before 1990.
ZONES = ["UTC", *(f"Etc/GMT{h:+d}" for h in range(-14, 13) if h), "Asia/Kolkata", "Asia/Kathmandu"]
# Far from datetime's ends and from 2100 (no 29 February for 8 years: robfig looks 5 ahead).
INSTANTS = st.datetimes(datetime.datetime(1990, 1, 1), datetime.datetime(2090, 1, 1)).map(
    lambda t: t.replace(microsecond=0, tzinfo=datetime.UTC)
)
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _case(name: str):
    return st.sampled_from([name, name.upper(), name.capitalize()])


def field(low: int, high: int, names: tuple[str, ...] = (), *, margin: int = 0):
    """A field: a list of ``*``, ``?``, values, ranges, each maybe with a step; values run
    ``margin`` past the bounds, to compare what is refused too."""
    number = st.integers(max(0, low - margin), high + margin).map(str)
    value = st.one_of(number, st.sampled_from(names).flatmap(_case)) if names else number
    span = st.one_of(
        st.sampled_from(["*", "?"]),
        value,
        st.tuples(value, value).map("-".join),
    )
    step = st.integers(0 if margin else 1, high - low + 2).map(str)
    item = st.one_of(span, st.tuples(span, step).map("/".join))
    return st.lists(item, min_size=1, max_size=3).map(",".join)


def expressions(margin: int):
    fields = st.tuples(
        field(0, 59, margin=margin),
        field(0, 23, margin=margin),
        # The day fields in particular: stars, stepped stars and values together.
        field(1, 31, margin=margin),
        field(1, 12, _MONTHS, margin=margin),
        field(0, 7, _DAYS, margin=margin),
    ).map(" ".join)
    macros = st.sampled_from(sorted(cron.MACROS))
    return st.one_of(fields, fields, fields, macros)


def ours(expr: str, zone: str, after: datetime.datetime) -> tuple[datetime.datetime, ...] | str:
    try:
        schedule = cron.parse(expr)
    except ValueError as exc:
        return str(exc)
    times: list[datetime.datetime] = []
    t = after
    # robfig looks five years ahead of each time; we look further (cron.SEARCH_YEARS).
    while len(times) < COUNT:
        found = cron.next_after(schedule, t, zoneinfo.ZoneInfo(zone))
        if found is None or found.year > t.year + 5:
            break
        times.append(found)
        t = found
    return tuple(times)


def uses_seven_for_sunday(expr: str) -> bool:
    parts = expr.split()
    if len(parts) != 5:
        return False
    return any(v == "7" for item in parts[4].split(",") for v in item.split("/")[0].split("-"))


def compare(queries: list[tuple[str, str, datetime.datetime]]) -> None:
    answers = robfigcron.next_times([(e, z, a, COUNT) for e, z, a in queries])
    for (expr, zone, after), theirs in zip(queries, answers, strict=True):
        got = ours(expr, zone, after)
        where = f"{expr!r} in {zone} after {after.isoformat()}"
        if theirs.error is not None:
            if isinstance(got, str):
                continue
            assert uses_seven_for_sunday(expr), f"{where}: CronJob refuses it ({theirs.error}), we accept it"
            continue
        assert not isinstance(got, str), f"{where}: CronJob accepts it, we refuse it: {got}"
        assert got == theirs.times, f"{where}: ours {got}, CronJob's {theirs.times}"


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.tuples(expressions(margin=0), st.sampled_from(ZONES), INSTANTS), min_size=1, max_size=20))
def test_next_run_times_are_cronjobs(queries):
    compare(queries)


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.tuples(expressions(margin=2), st.sampled_from(ZONES), INSTANTS), min_size=1, max_size=20))
def test_what_cronjob_refuses_we_refuse_but_seven_for_sunday(queries):
    compare(queries)


def test_a_stepped_star_beside_a_restricted_day_is_either_day():
    """The case Vixie cron and CronJob read differently: ``*/7`` is no star for CronJob."""
    after = datetime.datetime(2026, 11, 28, tzinfo=datetime.UTC)
    compare(
        [
            (e, "UTC", after)
            for e in ("0 0 */7 * 1", "0 0 1 * */2", "0 0 */1 * 1", "0 0 ? * MON", "0 0 1,* * 3")
        ]
    )
    (answer,) = robfigcron.next_times([("0 0 */7 * 1", "UTC", after, 3)])
    assert [t.day for t in answer.times] == [29, 30, 1]  # the 29th (1 + 4x7), a Monday, the 1st


def test_a_weekday_from_n_with_a_step_ends_on_saturday():
    """``4/1`` in the days of the week is Thursday to Saturday, as CronJob reads it: 7 is
    Sunday only when written (hypothesis found ``6,4/1`` firing on a Sunday)."""
    after = datetime.datetime(2008, 6, 10, 19, 21, 40, tzinfo=datetime.UTC)
    compare([(e, "UTC", after) for e in ("* * * 3,2,4 6,4/1", "0 0 * * 1/3", "0 0 1 * 5/1", "0 0 * * 7")])
    assert cron.parse("0 0 * * 1/3").weekdays == frozenset({1, 4})


@pytest.mark.parametrize(
    ("expr", "why"),
    [
        ("1,,2 * * * *", "an empty list item (robfig skips it)"),
        (", * * * *", "a field of empty items (robfig: a schedule that never fires)"),
        ("+5 * * * *", "a signed number"),
        ("*-5 * * * *", "a range from * (robfig reads *)"),
    ],
)
def test_malformed_fields_robfig_lets_through_are_refused(expr, why):
    """What CronJob's parser accepts by accident of its tokenizer, and we refuse at the field."""
    (theirs,) = robfigcron.next_times([(expr, "UTC", datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), 1)])
    assert theirs.error is None, why
    with pytest.raises(ValueError, match="minute"):
        cron.parse(expr)


def test_across_daylight_saving_we_differ_on_purpose():
    """The night clocks go back in Europe/Berlin, 02:30 comes twice: CronJob's parser runs at both,
    we run once (cron.py's docstring)."""
    after = datetime.datetime(2026, 10, 24, 12, tzinfo=datetime.UTC)
    (theirs,) = robfigcron.next_times([("30 2 * * *", "Europe/Berlin", after, 2)])
    assert [t.isoformat() for t in theirs.times] == ["2026-10-25T00:30:00+00:00", "2026-10-25T01:30:00+00:00"]
    berlin = zoneinfo.ZoneInfo("Europe/Berlin")
    first = cron.next_after(cron.parse("30 2 * * *"), after, berlin)
    assert first == theirs.times[0]
    assert cron.next_after(cron.parse("30 2 * * *"), first, berlin) == datetime.datetime(
        2026, 10, 26, 1, 30, tzinfo=datetime.UTC
    )
