"""Standard 5-field cron expressions, as Kubernetes CronJob reads them (pure).

``minute hour day-of-month month day-of-week``; each field a comma list of ``*`` (or ``?``),
``n``, ``a-b``, with an optional ``/step`` (``*/15``, ``0-30/10``, ``5/20`` = ``5-59/20``).
Months may be ``JAN``-``DEC``, days of the week ``SUN``-``SAT`` (0-6; 7 is also Sunday, as in
Vixie cron: the one expression CronJob refuses and we accept). The macros
``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight`` and ``@hourly``
are accepted.
"""

from __future__ import annotations

import datetime
import re
import zoneinfo
from dataclasses import dataclass

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# (name, lowest, highest, names for lowest..)
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
# Where a range without an end stops (``*``, ``n/step``): the field's highest value, except that
# the days of the week stop at 6, as CronJob's: 7 is Sunday only when written.
_IMPLICIT_HIGH = {"day of week": 6}
_ITEM = re.compile(r"^(\*|\?|[0-9A-Za-z]+(?:-[0-9A-Za-z]+)?)(?:/([0-9]+))?$")
_STAR = ("*", "?")
# How far ahead a next time is looked for: "0 0 29 2 1" (a Monday the 29th of February, or any
# Monday in February... both) and leap days recur within 8 years; a schedule with no time
# within that never fires ("0 0 30 2 *").
SEARCH_YEARS = 8
_MINUTE = datetime.timedelta(minutes=1)
# The instants whose wall-clock reading exists in every zone (no offset exceeds a day): a time is
# looked for between them only, so no reading near datetime's years 1 and 9999 overflows.
FIRST = datetime.datetime(1, 1, 2, tzinfo=datetime.UTC)
LAST = datetime.datetime(9999, 12, 30, tzinfo=datetime.UTC)


def load_zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone ``name``; raises ValueError with a readable message when unknown."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown time zone {name!r} (expected an IANA name such as Europe/Berlin)") from exc


@dataclass(frozen=True)
class Cron:
    """The two day fields combine as in CronJob's parser (robfig/cron v3), not as in Vixie cron: a day
    field is a *star* when one of its items is ``*`` or ``?`` without a step above 1 (``*``,
    ``*/1``, ``1,*``; ``*/7`` is not); when either day field is a star, a day must match both,
    otherwise either. (Vixie calls any field starting with ``*`` a star, so ``*/7`` with a
    restricted day of week ANDs there and ORs in CronJob.) The whole grammar and its times are
    compared with robfig/cron v3 itself (tests/external/test_cron_robfig.py); what its
    tokenizer lets through by accident (``1,,2``, ``+5``, ``*-5``) is refused here.

    Times are read on the wall clock of a time zone (``next_after``). Across a daylight-saving
    change: a wall-clock time that does not exist (spring forward) is skipped that day; a time
    that occurs twice (fall back) fires once, the first time. This is where we differ from
    CronJob on purpose: robfig/cron fires such a time twice (``30 2 * * *`` in Europe/Berlin runs
    at 00:30 and 01:30 UTC on the night clocks go back), and its day search shifts the hour on
    days whose midnight does not exist.

    Written here rather than taken from PyPI: the operator image stays at its dependencies, and the
    whole grammar is the hundred lines below, tested against a naive minute-by-minute oracle
    (tests/unit/netperf/test_cron.py, with hypothesis) and against robfig/cron v3.
    """

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday .. 6
    days_any: bool  # day of month is a star (see ``Cron``'s docstring): both day fields must match
    weekdays_any: bool

    def day_matches(self, date: datetime.date) -> bool:
        if date.month not in self.months:
            return False
        dom = date.day in self.days
        dow = (date.isoweekday() % 7) in self.weekdays
        if self.days_any or self.weekdays_any:
            return dom and dow
        return dom or dow

    def matches(self, wall: datetime.datetime) -> bool:
        """Whether the wall-clock minute ``wall`` (naive or aware; its own fields) is a time."""
        return wall.minute in self.minutes and wall.hour in self.hours and self.day_matches(wall.date())


def _value(text: str, low: int, names: tuple[str, ...], field: str) -> int:
    if text.isdigit():
        return int(text)
    if text.upper() in names:
        return low + names.index(text.upper())
    raise ValueError(f"{field}: {text!r} is not a number" + (" or a name" if names else ""))


def _field(text: str, field: str, low: int, high: int, names: tuple[str, ...]) -> tuple[frozenset[int], bool]:
    """The field's values, and whether it is a star (an item ``*`` or ``?`` with no step above 1)."""
    values: set[int] = set()
    star = False
    for item in text.split(","):
        m = _ITEM.match(item)
        if not m:
            raise ValueError(f"{field}: {item!r} is not n, a-b, * (or ?) or one of them /step")
        span, step_text = m.group(1), m.group(2)
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"{field}: step must be at least 1 in {item!r}")
        implicit = _IMPLICIT_HIGH.get(field, high)
        if span in _STAR:
            start, end = low, implicit
            star = star or step == 1
        elif "-" in span:
            a, b = span.split("-", 1)
            start, end = _value(a, low, names, field), _value(b, low, names, field)
        else:
            start = _value(span, low, names, field)
            end = max(start, implicit) if step_text else start
        for v in (start, end):
            if not low <= v <= high:
                raise ValueError(f"{field}: {v} is outside {low}-{high}")
        if end < start:
            raise ValueError(f"{field}: range {span!r} ends before it starts")
        values.update(range(start, end + 1, step))
    return frozenset(values), star


def parse(text: str) -> Cron:
    """The expression; ValueError naming the field when it is not standard cron."""
    expression = MACROS.get(text.strip().lower(), text.strip())
    parts = expression.split()
    if len(parts) != len(_FIELDS):
        raise ValueError(
            f"{text!r} has {len(parts)} fields; expected 5 (minute hour day-of-month month day-of-week) "
            "or a macro such as @hourly"
        )
    fields = [_field(p, *spec) for p, spec in zip(parts, _FIELDS, strict=True)]
    sets = [values for values, _ in fields]
    weekdays = frozenset(d % 7 for d in sets[4])
    return Cron(sets[0], sets[1], sets[2], sets[3], weekdays, fields[2][1], fields[4][1])


def next_after(cron: Cron, after: datetime.datetime, zone: zoneinfo.ZoneInfo) -> datetime.datetime | None:
    """The first time of ``cron`` strictly after the instant ``after``, read on ``zone``'s wall
    clock (UTC result); None when there is none within ``SEARCH_YEARS`` (or before
    ``LAST``; from ``FIRST`` on when ``after`` is earlier).

    Walks UTC minutes, so a skipped wall time (spring forward) is never seen and a repeated one
    is seen twice: the second reading (``fold=1``) is ignored. Whole hours without a match are
    stepped over at once: from a wall time ``h:m`` the instant ``60 - m`` minutes on shows
    ``h+1:00`` or, across an offset change, a time after no existing time of that hour.
    """
    t = max(after.astimezone(datetime.UTC), FIRST).replace(second=0, microsecond=0)
    if t >= LAST:
        return None
    t += _MINUTE
    search = datetime.timedelta(days=366 * SEARCH_YEARS)
    limit = LAST if t > LAST - search else t + search
    while t < limit:
        wall = t.astimezone(zone)
        if wall.hour not in cron.hours or not cron.day_matches(wall.date()):
            t += datetime.timedelta(minutes=60 - wall.minute)
            continue
        if wall.minute in cron.minutes and not wall.fold:
            return t
        t += _MINUTE
    return None


def missed(
    cron: Cron, after: datetime.datetime, until: datetime.datetime, zone: zoneinfo.ZoneInfo
) -> tuple[int, datetime.datetime | None]:
    """How many times lie in ``(after, until]`` and the latest of them (None when none).

    The cost is the minutes in between at worst (every-minute schedules), stepped an hour at a
    time where no time can be: a month of downtime is some 40 000 steps.
    """
    count, latest = 0, None
    t = next_after(cron, after, zone)
    while t is not None and t <= until:
        count, latest = count + 1, t
        t = next_after(cron, t, zone)
    return count, latest
