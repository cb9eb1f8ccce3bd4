"""The TDSet calendar as a pure function of (spec, annotations, now): replicas, the layer and
entry that decided them, the next transitions.
"""

from __future__ import annotations

import bisect
import datetime
import functools
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.api.validation import FieldError

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MINUTES_PER_DAY = 24 * 60
MINUTES_PER_WEEK = 7 * MINUTES_PER_DAY
DEFAULT_TIME_ZONE = "UTC"
# Re-check interval when spec.intervalMint is unset (the next boundary is still exact).
DEFAULT_RECHECK_MINUTES = 60
# Far enough to see every weekday once more; a weekly schedule that does not change within it
# does not change at all.
HORIZON = datetime.timedelta(days=8)
# How far ahead dated entries (overrides, holidays) are looked for once the weekly part is
# known not to change: a year and a bit, so next year's holidays show up in status.upcoming.
FAR_HORIZON = datetime.timedelta(days=400)
_OFFSET_PROBE = datetime.timedelta(hours=6)
_SECOND = datetime.timedelta(seconds=1)

# The layers, highest first, and the pre-warm "layer" on top of them.
OVERRIDE, HOLIDAY, WINDOW, DEFAULT, LEAD_TIME = "override", "holiday", "window", "default", "leadTime"
LAYERS = (OVERRIDE, HOLIDAY, WINDOW, DEFAULT)
# kubectl annotate tds shop tdset.k8s-operators-py.dev/override="replicas=10,until=2026-11-25T18:00:00Z"
OVERRIDE_ANNOTATION = "tdset.k8s-operators-py.dev/override"
ANNOTATION_ENTRY = "annotation"
ANNOTATION_FORM = "replicas=<n>,until=<time>[,from=<time>]"
# Dates read from one ConfigMap at most (a decade of public holidays fits many times over).
MAX_CONFIGMAP_DATES = 1000
# How many transitions status.upcoming lists.
UPCOMING = 5
MAX_LEAD_TIME = datetime.timedelta(hours=24)
MAX_REPLICAS = 10000
# status.warnings stays small however many windows overlap: this many notes, then a summary.
MAX_OVERLAP_NOTES = 5

# RFC 3339 (seconds required with an offset, as CEL's timestamp() needs) or a local date-time.
TIME_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}((:[0-9]{2})?|:[0-9]{2}(Z|[+-][0-9]{2}:[0-9]{2}))$"
)
DATE_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
# The years a date or time of the calendar may name (overrides, the annotation, holidays): far
# wider than any schedule needs, and far enough inside datetime's years 1 to 9999 that no
# offset, midnight or horizon added to them leaves its range. Admission says the same
# (``in_range_rule``); the controller checks again (objects stored before the rule, the
# annotation, a holidays ConfigMap).
EARLIEST_YEAR, LATEST_YEAR = 1970, 2999
# A Go/CEL duration of hours, minutes and seconds: 5m, 1h30m, 90s.
DURATION_PATTERN = r"^([0-9]{1,2}h)?([0-9]{1,4}m)?([0-9]{1,5}s)?$"
_DURATION = re.compile(r"^(?:([0-9]{1,2})h)?(?:([0-9]{1,4})m)?(?:([0-9]{1,5})s)?$")
_OFFSET_SUFFIX = re.compile(r"(Z|[+-][0-9]{2}:[0-9]{2})$")


@dataclass(frozen=True)
class Bounds:
    """The HPA's ``minReplicas`` and ``maxReplicas`` an instant asks for (None: not set: the
    scheduled replicas are the floor, the HPA's own maxReplicas the cap), and which entry set
    each (``window/peak``, ``override/sale``, ``leadTime/peak``, ``spec``)."""

    min_replicas: int | None = None
    max_replicas: int | None = None
    min_from: str | None = None
    max_from: str | None = None

    def over(self, below: Bounds) -> Bounds:
        """These, each unset one taken from ``below`` (an entry's over the spec's)."""
        low = (
            (self.min_replicas, self.min_from)
            if self.min_replicas is not None
            else (below.min_replicas, below.min_from)
        )
        high = (
            (self.max_replicas, self.max_from)
            if self.max_replicas is not None
            else (below.max_replicas, below.max_from)
        )
        return Bounds(low[0], high[0], low[1], high[1])


def bounds_of(item: Mapping[str, Any], source: str) -> Bounds:
    """The ``minReplicas``/``maxReplicas`` of a spec entry (a window, an override, the spec)."""
    low, high = item.get("minReplicas"), item.get("maxReplicas")
    return Bounds(
        int(low) if low is not None else None,
        int(high) if high is not None else None,
        source if low is not None else None,
        source if high is not None else None,
    )


@dataclass(frozen=True)
class Window:
    index: int
    start: int  # minute of the day
    end: int
    replicas: int
    days: frozenset[int]  # datetime.weekday() numbers of the days the window starts on
    name: str | None = None
    lead: datetime.timedelta = datetime.timedelta(0)  # pre-warm: scale up this long before it opens
    bounds: Bounds = Bounds()  # its own minReplicas/maxReplicas for an HPA

    @property
    def crosses_midnight(self) -> bool:
        return self.end <= self.start

    @property
    def entry(self) -> str:
        """How status names it: its name, else its index."""
        return self.name if self.name else str(self.index)

    def contains(self, weekday: int, minute: int) -> bool:
        if not self.crosses_midnight:
            return weekday in self.days and self.start <= minute < self.end
        if minute >= self.start:
            return weekday in self.days
        return minute < self.end and (weekday - 1) % 7 in self.days

    def label(self) -> str:
        """``09:00-17:00`` (plus the days when not every day), for messages and Events."""
        text = f"{self.start // 60:02d}:{self.start % 60:02d}-{self.end // 60:02d}:{self.end % 60:02d}"
        if len(self.days) < 7:
            text += " " + ",".join(DAYS[d] for d in sorted(self.days))
        return text


@dataclass(frozen=True)
class Schedule:
    """The weekly windows and the default: layers 3 and 4."""

    windows: tuple[Window, ...]
    default: int
    zone: zoneinfo.ZoneInfo

    def at(self, now: datetime.datetime) -> tuple[int, int | None]:
        """(replicas, index of the active window or None) at the instant ``now`` (aware)."""
        local = now.astimezone(self.zone)
        weekday, minute = local.weekday(), local.hour * 60 + local.minute
        for window in self.windows:
            if window.contains(weekday, minute):
                return window.replicas, window.index
        return self.default, None

    @functools.cached_property
    def edges(self) -> tuple[int, ...]:
        """Minutes of the day at which a window starts or ends, and midnight."""
        return tuple(sorted({0} | {w.start for w in self.windows} | {w.end for w in self.windows}))


@dataclass(frozen=True)
class Decided:
    """What one instant's replicas are and which layer and entry decided them."""

    replicas: int
    layer: str
    entry: str | None = None
    window: Window | None = None  # the window deciding (layer window), or pre-warmed for (leadTime)
    opens: datetime.datetime | None = None  # leadTime: when that window opens
    bounds: Bounds = Bounds()  # the HPA's floor and cap, the spec's filled in


@dataclass(frozen=True)
class Override:
    entry: str  # its name, or "annotation"
    start: datetime.datetime
    end: datetime.datetime
    replicas: int
    bounds: Bounds = Bounds()


@dataclass(frozen=True)
class Calendar:
    """Every layer of one TDSet, parsed: ``at`` is the replicas before pre-warm.

    Layers, highest first (also in docs/operators/tdset-calendar.md):

    1. **override**: the override annotation (``OVERRIDE_ANNOTATION``, ``replicas=10,until=…``,
       for on-call use), then ``spec.overrides[]`` in list order; each applies on ``[start, end)``
       and expires at its end. Times are RFC 3339 (``2026-11-27T00:00:00Z``, ``…+01:00``) or a date
       and time without offset (``2026-11-27T00:00``), read on the wall clock of ``spec.timeZone``.
    2. **holiday**: on a date of ``spec.holidays.dates`` or of the ConfigMap that
       ``spec.holidays.configMapRef`` names (``parse_holiday_data``; the reconciler reads it),
       a whole day, 00:00 to 24:00 on the wall clock of ``spec.timeZone``: ``spec.holidays.replicas``.
    3. **window**: the weekly ``schedulingConfig`` windows, rules below, unchanged.
    4. **default**: ``defaultReplica``.

    **Autoscaler bounds**: with an HPA on the target, the entry that decides may
    also set the HPA's ``minReplicas`` (floor) and ``maxReplicas`` (cap); each one it leaves unset
    falls back to ``spec.minReplicas``/``spec.maxReplicas``, then to the scheduled replicas (the
    floor, as before) and to the HPA's own ``maxReplicas`` (the cap) (``Bounds``,
    ``Decided.bounds``). Holidays and the default have no bounds of their own.

    On top of them, **pre-warm**: a window with a ``leadTime`` (its own, else ``spec.leadTime``)
    raises the replicas that long before it opens (layer ``leadTime``), never lowers them: the
    replicas are the larger of what the layers say now and what they will say when the window
    opens.

    Weekly windows:

    - A window is ``[start, end)`` on the wall clock of ``spec.timeZone`` (IANA name, default
      UTC), at minute precision (``startTime``/``startMinute``, ``endTime``/``endMinute``).
    - ``end <= start`` crosses midnight: ``19 -> 0`` is 19:00-24:00, ``22 -> 6`` is 22:00-06:00.
      ``start == end`` is rejected (at admission by CEL, and again here).
    - ``days`` (default: every day) names the days on which a window *starts*; the part of a
      midnight-crossing window after 00:00 belongs to the day before. A Friday ``22 -> 6`` window
      covers Friday 22:00 to Saturday 06:00.
    - The first window that contains the current wall-clock time wins (list order); overlaps are
      allowed and reported (``overlaps``, bounded). Outside every window: ``defaultReplica``.

    Daylight-saving time follows what a wall clock shows, because that is what the person who
    wrote "9 to 17" reads:

    - spring forward (e.g. 02:00 -> 03:00): the skipped times never occur, so a window lying
      entirely inside the skipped hour does not apply that day, and a window (or an override given
      in local time) that starts inside it (02:30 -> 04:00) starts when the clock jumps to 03:00;
    - fall back (e.g. 03:00 -> 02:00): the repeated hour happens twice and a window covering it is
      active both times (a 02:00 -> 03:00 window lasts two real hours that night).

    ``next_transition`` finds the first instant after ``now`` at which the weekly result
    changes, so the controller can wake exactly then. Between UTC-offset changes the wall clock
    runs linearly, so only window edges (and midnight, where the weekday and the date change: the
    holidays' edges too) can change the result; offset changes are located by sampling every 6
    hours and bisecting to the second (no zone changes its offset twice within 6 hours). The
    layered calendar adds its absolute instants (override starts and ends, holiday midnights) to
    that walk, and pre-warm adds each opening minus its lead time (``upcoming``), so every
    layer's boundary is acted on when it is reached.
    """

    schedule: Schedule
    overrides: tuple[Override, ...] = ()  # the annotation's first
    holidays: frozenset[datetime.date] = frozenset()
    holiday_replicas: int | None = None
    bounds: Bounds = Bounds()  # spec.minReplicas/maxReplicas: under every entry's own

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        return self.schedule.zone

    def at(self, now: datetime.datetime) -> Decided:
        for o in self.overrides:
            if o.start <= now < o.end:
                return Decided(o.replicas, OVERRIDE, o.entry, bounds=o.bounds.over(self.bounds))
        if self.holiday_replicas is not None and self.holidays:
            day = now.astimezone(self.zone).date()
            if day in self.holidays:
                return Decided(self.holiday_replicas, HOLIDAY, day.isoformat(), bounds=self.bounds)
        replicas, index = self.schedule.at(now)
        if index is None:
            return Decided(replicas, DEFAULT, bounds=self.bounds)
        window = self.schedule.windows[index]
        return Decided(replicas, WINDOW, window.entry, window, bounds=window.bounds.over(self.bounds))

    @functools.cached_property
    def instants(self) -> tuple[datetime.datetime, ...]:
        """The absolute instants at which a dated layer can change: override starts and ends,
        holidays' midnights (sorted)."""
        found: set[datetime.datetime] = set()
        for o in self.overrides:
            found |= {o.start, o.end}
        if self.holiday_replicas is not None:
            for day in self.holidays:
                for d in (day, day + datetime.timedelta(days=1)):
                    found.add(wall_to_instant(datetime.datetime.combine(d, datetime.time()), self.zone))
        return tuple(sorted(found))

    @functools.cached_property
    def max_lead(self) -> datetime.timedelta:
        return max((w.lead for w in self.schedule.windows), default=datetime.timedelta(0))


@dataclass(frozen=True)
class Transition:
    """One entry of status.upcoming: from ``time`` on, ``decided``."""

    time: datetime.datetime
    decided: Decided


@dataclass(frozen=True)
class Decision:
    replicas: int
    window: Window | None
    next_transition: datetime.datetime | None
    decided: Decided | None = None
    upcoming: tuple[Transition, ...] = ()
    # The override annotation could not be read (it is then ignored): the message.
    annotation_error: str | None = None
    warnings: tuple[str, ...] = field(default=())
    # spec.holidays.configMapRef names a ConfigMap that cannot be read (its dates are left out).
    holidays_error: str | None = None

    @property
    def layer(self) -> str:
        return self.decided.layer if self.decided is not None else (WINDOW if self.window else DEFAULT)


def parse_duration(text: str) -> datetime.timedelta:
    """``5m``, ``1h30m``, ``90s`` (a Go duration of h, m and s); ValueError otherwise."""
    match = _DURATION.match(text)
    if not text or match is None:
        raise ValueError(f"{text!r} is not a duration such as 5m, 1h30m or 90s")
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds)


def format_duration(delta: datetime.timedelta) -> str:
    seconds = int(delta.total_seconds())
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (
        (f"{hours}h" if hours else "")
        + (f"{minutes}m" if minutes else "")
        + (f"{seconds}s" if seconds else "")
    )
    return sign + (text or "0s")


def window_from_spec(index: int, item: Mapping[str, Any], lead: datetime.timedelta | None = None) -> Window:
    start = int(item["startTime"]) * 60 + int(item.get("startMinute", 0))
    end = int(item["endTime"]) * 60 + int(item.get("endMinute", 0))
    names = item.get("days") or DAYS
    own = item.get("leadTime")
    return Window(
        index,
        start,
        end,
        int(item["replica"]),
        frozenset(DAYS.index(d) for d in names),
        name=item.get("name") or None,
        lead=parse_duration(str(own)) if own else (lead or datetime.timedelta(0)),
        bounds=bounds_of(item, f"{WINDOW}/{item.get('name') or index}"),
    )


def in_range_rule(field: str = "self") -> str:
    """The CEL rule that a date or time string (``YYYY-MM-DD…``) lies within the calendar's years."""
    return f"{field} >= '{EARLIEST_YEAR:04d}-01-01' && {field} < '{LATEST_YEAR + 1:04d}-01-01'"


RANGE_MESSAGE = f"must lie in the years {EARLIEST_YEAR} to {LATEST_YEAR}"


def _check_year(text: str, year: int) -> None:
    if not EARLIEST_YEAR <= year <= LATEST_YEAR:
        raise ValueError(f"{text!r} {RANGE_MESSAGE}")


def load_zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone ``name``; raises ValueError with a readable message when unknown (or when
    the name is a file of the zone database that is no zone)."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown time zone {name!r} (expected an IANA name such as Europe/Berlin)") from exc


def wall_to_instant(wall: datetime.datetime, zone: zoneinfo.ZoneInfo) -> datetime.datetime:
    """The first instant at which the wall clock of ``zone`` shows ``wall`` (naive) or later:
    the first of a repeated time (fall back), the jump for a skipped one (spring forward)."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(datetime.UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # Skipped: the clock jumps over it at the offset change just before the fold=0 reading.
    earlier = min(first, wall.replace(tzinfo=zone, fold=1).astimezone(datetime.UTC))
    return next_offset_change(zone, earlier, first)


def parse_time(text: str, zone: zoneinfo.ZoneInfo) -> datetime.datetime:
    """An RFC 3339 time, or a local date-time on ``zone``'s wall clock, as a UTC instant."""
    if not re.match(TIME_PATTERN, text):
        raise ValueError(
            f"{text!r} is not a time such as 2026-11-27T09:00:00Z, 2026-11-27T09:00:00+01:00 or "
            "2026-11-27T09:00 (the TDSet's time zone)"
        )
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from exc
    _check_year(text, parsed.year)
    if parsed.tzinfo is None:
        return wall_to_instant(parsed, zone)
    return parsed.astimezone(datetime.UTC)


def parse_date(text: str) -> datetime.date:
    if not re.match(DATE_PATTERN, text):
        raise ValueError(f"{text!r} is not a date such as 2026-12-25")
    try:
        parsed = datetime.date.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from exc
    _check_year(text, parsed.year)
    return parsed


def parse_holiday_data(data: Mapping[str, Any] | None) -> tuple[frozenset[datetime.date], list[str]]:
    """The dates in a holiday ConfigMap's ``data``: every value lists dates separated by
    whitespace or commas, ``#`` starting a comment to the end of the line. Returns the dates
    (at most ``MAX_CONFIGMAP_DATES``, the earliest) and what could not be read."""
    found: set[datetime.date] = set()
    problems: list[str] = []
    for key in sorted(data or {}):
        for line in str((data or {})[key]).splitlines():
            for word in line.split("#", 1)[0].replace(",", " ").split():
                try:
                    found.add(parse_date(word))
                except ValueError as exc:
                    if len(problems) < MAX_OVERLAP_NOTES:
                        problems.append(f"data.{key}: {exc}")
    if len(found) > MAX_CONFIGMAP_DATES:
        problems.append(f"holds {len(found)} dates; only the first {MAX_CONFIGMAP_DATES} are read")
        found = set(sorted(found)[:MAX_CONFIGMAP_DATES])
    return frozenset(found), problems


def parse_annotation(text: str, zone: zoneinfo.ZoneInfo) -> Override:
    """The override annotation's value (``ANNOTATION_FORM``); ValueError saying what is wrong."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or key not in ("replicas", "until", "from") or key in fields:
            raise ValueError(f"{OVERRIDE_ANNOTATION}={text!r}: expected {ANNOTATION_FORM}")
        fields[key] = value.strip()
    if "replicas" not in fields or "until" not in fields:
        raise ValueError(f"{OVERRIDE_ANNOTATION}={text!r}: expected {ANNOTATION_FORM}")
    if not fields["replicas"].isdigit() or int(fields["replicas"]) > MAX_REPLICAS:
        raise ValueError(f"{OVERRIDE_ANNOTATION}: replicas must be an integer from 0 to {MAX_REPLICAS}")
    try:
        until = parse_time(fields["until"], zone)
        start = (
            parse_time(fields["from"], zone)
            if "from" in fields
            else datetime.datetime.min.replace(tzinfo=datetime.UTC)
        )
    except ValueError as exc:
        raise ValueError(f"{OVERRIDE_ANNOTATION}: {exc}") from exc
    if until <= start:
        raise ValueError(f"{OVERRIDE_ANNOTATION}: until must be after from")
    return Override(ANNOTATION_ENTRY, start, until, int(fields["replicas"]))


def check(spec: Mapping[str, Any]) -> list[FieldError]:
    """What the CRD schema cannot say, and what CEL says (again here, for objects stored before
    a rule existed): known time zone, non-empty windows, real dates, overrides that end after
    they start, lead times within a day."""
    errors = []
    try:
        zone = load_zone(str(spec.get("timeZone", DEFAULT_TIME_ZONE)))
    except ValueError as exc:
        errors.append(FieldError("spec.timeZone", str(exc)))
        zone = zoneinfo.ZoneInfo("UTC")
    lead = _checked_duration(spec.get("leadTime"), "spec.leadTime", errors)
    for i, item in enumerate(spec.get("schedulingConfig") or ()):
        own = _checked_duration(item.get("leadTime"), f"spec.schedulingConfig[{i}].leadTime", errors)
        window = window_from_spec(i, {**item, "leadTime": None}, own or lead)
        if window.start == window.end:
            errors.append(
                FieldError(
                    f"spec.schedulingConfig[{i}]",
                    "start and end are equal; a window must not be empty (for all day, use defaultReplica)",
                )
            )
    for i, item in enumerate(spec.get("overrides") or ()):
        times = []
        for key in ("start", "end"):
            try:
                times.append(parse_time(str(item.get(key)), zone))
            except ValueError as exc:
                errors.append(FieldError(f"spec.overrides[{i}].{key}", str(exc)))
        if len(times) == 2 and times[1] <= times[0]:
            errors.append(FieldError(f"spec.overrides[{i}]", "end must be after start"))
    for i, text in enumerate((spec.get("holidays") or {}).get("dates") or ()):
        try:
            parse_date(str(text))
        except ValueError as exc:
            errors.append(FieldError(f"spec.holidays.dates[{i}]", str(exc)))
    return errors + bounds_errors(spec)


def bounds_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """What the CEL rules on minReplicas/maxReplicas say, again: no entry may make an HPA's
    minReplicas exceed its maxReplicas, alone or with the spec's (an entry's own over the
    spec's, each bound on its own)."""
    errors = []
    top = _int_or_none(spec.get("minReplicas")), _int_or_none(spec.get("maxReplicas"))
    if top[0] is not None and top[1] is not None and top[0] > top[1]:
        errors.append(FieldError("spec.maxReplicas", f"must be at least spec.minReplicas ({top[0]})"))
    for field_name in ("schedulingConfig", "overrides"):
        for i, item in enumerate(spec.get(field_name) or ()):
            path = f"spec.{field_name}[{i}]"
            low, high = _int_or_none(item.get("minReplicas")), _int_or_none(item.get("maxReplicas"))
            if low is not None and high is not None:
                if low > high:
                    errors.append(FieldError(f"{path}.maxReplicas", f"must be at least minReplicas ({low})"))
            elif low is not None and top[1] is not None and low > top[1]:
                errors.append(
                    FieldError(
                        f"{path}.minReplicas",
                        f"must not exceed spec.maxReplicas ({top[1]}), the cap while this entry decides",
                    )
                )
            elif high is not None and top[0] is not None and top[0] > high:
                errors.append(
                    FieldError(
                        f"{path}.maxReplicas",
                        f"must be at least spec.minReplicas ({top[0]}), the floor while this entry decides",
                    )
                )
    return errors


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _checked_duration(value: Any, path: str, errors: list[FieldError]) -> datetime.timedelta | None:
    if value is None:
        return None
    try:
        lead = parse_duration(str(value))
    except ValueError as exc:
        errors.append(FieldError(path, str(exc)))
        return None
    if lead > MAX_LEAD_TIME:
        errors.append(FieldError(path, f"must be at most {format_duration(MAX_LEAD_TIME)}"))
        return None
    return lead


def from_spec(spec: Mapping[str, Any]) -> Schedule:
    """The weekly schedule of a spec that passed the schema and ``check``."""
    lead = parse_duration(str(spec["leadTime"])) if spec.get("leadTime") else None
    windows = tuple(
        window_from_spec(i, item, lead) for i, item in enumerate(spec.get("schedulingConfig") or ())
    )
    zone = load_zone(str(spec.get("timeZone", DEFAULT_TIME_ZONE)))
    return Schedule(windows, int(spec["defaultReplica"]), zone)


def calendar_from(
    spec: Mapping[str, Any],
    annotations: Mapping[str, str] | None = None,
    holidays: frozenset[datetime.date] = frozenset(),
) -> tuple[Calendar, str | None]:
    """The calendar of a spec that passed ``check``, and what is wrong with the override
    annotation if anything (it is then left out)."""
    schedule = from_spec(spec)
    zone = schedule.zone
    overrides = []
    error = None
    raw = (annotations or {}).get(OVERRIDE_ANNOTATION)
    if raw is not None:
        try:
            overrides.append(parse_annotation(raw, zone))
        except ValueError as exc:
            error = str(exc)
    for item in spec.get("overrides") or ():
        overrides.append(
            Override(
                str(item["name"]),
                parse_time(str(item["start"]), zone),
                parse_time(str(item["end"]), zone),
                int(item["replicas"]),
                bounds_of(item, f"{OVERRIDE}/{item['name']}"),
            )
        )
    listed = spec.get("holidays") or {}
    replicas = listed.get("replicas")
    return (
        Calendar(
            schedule,
            tuple(overrides),
            frozenset(parse_date(str(d)) for d in listed.get("dates") or ())
            | {d for d in holidays if EARLIEST_YEAR <= d.year <= LATEST_YEAR},
            int(replicas) if replicas is not None else None,
            bounds_of(spec, "spec"),
        ),
        error,
    )


def _offset(zone: zoneinfo.ZoneInfo, t: datetime.datetime) -> datetime.timedelta | None:
    return t.astimezone(zone).utcoffset()


def next_offset_change(
    zone: zoneinfo.ZoneInfo, t: datetime.datetime, limit: datetime.datetime
) -> datetime.datetime:
    """The first instant after ``t`` with another UTC offset, or ``limit`` if none before it."""
    if zone.key == "UTC" or zone.key.startswith("Etc/"):
        # A fixed offset (the default zone) never changes: probing a week of it would be a large
        # part of the cost of finding a TDSet's next transition.
        return limit
    current = _offset(zone, t)
    lo = t
    while lo < limit:
        hi = min(lo + _OFFSET_PROBE, limit)
        if _offset(zone, hi) != current:
            # Offsets change on whole seconds: bisect over integer seconds.
            lo_s, hi_s = int(lo.timestamp()), int(-(-hi.timestamp() // 1))
            while hi_s - lo_s > 1:
                mid = (lo_s + hi_s) // 2
                if _offset(zone, datetime.datetime.fromtimestamp(mid, datetime.UTC)) == current:
                    lo_s = mid
                else:
                    hi_s = mid
            return datetime.datetime.fromtimestamp(hi_s, datetime.UTC)
        lo = hi
    return limit


def _next_edge(schedule: Schedule, local_wall: datetime.datetime) -> datetime.datetime:
    """The first wall-clock time after ``local_wall`` (naive) that starts or ends a window or a day."""
    midnight = local_wall.replace(hour=0, minute=0, second=0, microsecond=0)
    for edge in schedule.edges:
        candidate = midnight + datetime.timedelta(minutes=edge)
        if candidate > local_wall:
            return candidate
    return midnight + datetime.timedelta(days=1)


def _walk(
    schedule: Schedule,
    at: Callable[[datetime.datetime], object],
    now: datetime.datetime,
    horizon: datetime.timedelta,
    *,
    instants: tuple[datetime.datetime, ...] = (),
    far: datetime.timedelta | None = None,
) -> datetime.datetime | None:
    """The first instant after ``now`` at which ``at`` changes: window edges, midnights and
    offset changes within ``horizon``, plus ``instants`` (sorted) up to ``far``."""
    value = at(now)
    limit = now + horizon
    t = now
    i = bisect.bisect_right(instants, now)
    segment_end = next_offset_change(schedule.zone, t, limit)
    while t < limit:
        wall = t.astimezone(schedule.zone).replace(tzinfo=None)
        candidate = t + (_next_edge(schedule, wall) - wall)
        if i < len(instants) and instants[i] < min(candidate, segment_end):
            t = instants[i]
        elif candidate < segment_end:
            t = candidate
        else:
            t = segment_end
            segment_end = next_offset_change(schedule.zone, t, limit)
        while i < len(instants) and instants[i] <= t:
            i += 1
        if t >= limit:
            break
        if at(t) != value:
            return t
    # The weekly part did not change within a week and more: it never does, so only the
    # dated layers can (ignored when not asked for: the weekly schedule alone).
    if far is not None:
        for instant in instants[bisect.bisect_left(instants, limit) :]:
            if instant > now + far:
                break
            if at(instant) != value:
                return instant
    return None


def next_transition(
    schedule: Schedule, now: datetime.datetime, horizon: datetime.timedelta = HORIZON
) -> datetime.datetime | None:
    """The first instant after ``now`` at which ``Schedule.at`` changes (None: not within horizon)."""
    return _walk(schedule, schedule.at, now.astimezone(datetime.UTC), horizon)


def next_base_transition(calendar: Calendar, now: datetime.datetime) -> datetime.datetime | None:
    """The first instant after ``now`` at which ``Calendar.at`` changes (every layer, no
    pre-warm), up to ``FAR_HORIZON`` for dated entries."""
    return _walk(
        calendar.schedule,
        calendar.at,
        now.astimezone(datetime.UTC),
        HORIZON,
        instants=calendar.instants,
        far=FAR_HORIZON,
    )


class _Timeline:
    """The calendar's transitions (before pre-warm) after ``start``, found as far as asked."""

    def __init__(self, calendar: Calendar, start: datetime.datetime) -> None:
        self.calendar = calendar
        self.points: list[tuple[datetime.datetime, Decided]] = []
        self._cursor = start
        self._done = False

    def until(self, t: datetime.datetime) -> None:
        while not self._done and (not self.points or self.points[-1][0] < t):
            nxt = next_base_transition(self.calendar, self._cursor)
            if nxt is None:
                self._done = True
                return
            self.points.append((nxt, self.calendar.at(nxt)))
            self._cursor = nxt

    def after(self, t: datetime.datetime) -> datetime.datetime | None:
        self.until(t + _SECOND)
        i = bisect.bisect_right([p[0] for p in self.points], t)
        return self.points[i][0] if i < len(self.points) else None

    def between(
        self, lo: datetime.datetime, hi: datetime.datetime
    ) -> list[tuple[datetime.datetime, Decided]]:
        """Transitions in ``(lo, hi]``."""
        self.until(hi)
        return [p for p in self.points if lo < p[0] <= hi]


def _opening(decided: Decided) -> bool:
    """Whether a transition to ``decided`` opens a window with a lead time."""
    return (
        decided.layer == WINDOW and decided.window is not None and decided.window.lead > datetime.timedelta(0)
    )


def _effective(calendar: Calendar, t: datetime.datetime, timeline: _Timeline) -> Decided:
    """The layers' answer at ``t``, raised (never lowered) for a window opening within its lead."""
    best = calendar.at(t)
    if not calendar.max_lead:
        return best
    for opens, decided in timeline.between(t, t + calendar.max_lead):
        assert decided.window is not None or not _opening(decided)
        if _opening(decided) and opens - decided.window.lead <= t and decided.replicas > best.replicas:  # type: ignore[union-attr]
            bounds = _prewarm_bounds(best, decided)
            best = Decided(decided.replicas, LEAD_TIME, decided.entry, decided.window, opens, bounds)
    return best


def _prewarm_bounds(now: Decided, window: Decided) -> Bounds:
    """While pre-warming: the window's floor when it is higher than the one in force (pre-warm
    raises, never lowers), and the cap in force now (the window's cap applies once it opens)."""
    floor_now = now.bounds.min_replicas if now.bounds.min_replicas is not None else now.replicas
    floor_then = window.bounds.min_replicas if window.bounds.min_replicas is not None else window.replicas
    low: int | None
    source: str | None
    if floor_then >= floor_now:
        low = window.bounds.min_replicas
        source = f"{LEAD_TIME}/{window.entry}" if low is not None else None
    else:
        low, source = floor_now, now.bounds.min_from or f"{now.layer}/{now.entry}"
    return Bounds(low, now.bounds.max_replicas, source, now.bounds.max_from)


def _next_effective(
    calendar: Calendar, now: datetime.datetime, timeline: _Timeline
) -> datetime.datetime | None:
    value = _effective(calendar, now, timeline)
    cur = now
    while cur <= now + FAR_HORIZON:
        base = timeline.after(cur)
        if base is None:
            return None
        starts = [
            opens - decided.window.lead  # type: ignore[union-attr]
            for opens, decided in timeline.between(cur, base + calendar.max_lead)
            if _opening(decided) and cur < opens - decided.window.lead <= base  # type: ignore[union-attr]
        ]
        cur = min(starts, default=base)
        if _effective(calendar, cur, timeline) != value:
            return cur
    return None


class _Ahead:
    """The transitions after ``now`` (pre-warm included), found as far as asked and kept: what
    decides at ``now``, then the next ones one by one."""

    def __init__(self, calendar: Calendar, now: datetime.datetime) -> None:
        self.calendar = calendar
        self.now = now
        self._timeline = _Timeline(calendar, now)
        self.current = _effective(calendar, now, self._timeline)
        self._found: list[Transition] = []
        self._end = False

    def take(self, count: int) -> tuple[Transition, ...]:
        """The next ``count`` transitions (fewer if the calendar has no more)."""
        t = self._found[-1].time if self._found else self.now
        while len(self._found) < count and not self._end:
            nxt = _next_effective(self.calendar, t, self._timeline)
            if nxt is None:
                self._end = True
                break
            self._found.append(Transition(nxt, _effective(self.calendar, nxt, self._timeline)))
            t = nxt
        return tuple(self._found[:count])


def upcoming(
    calendar: Calendar, now: datetime.datetime, count: int = UPCOMING
) -> tuple[Decided, tuple[Transition, ...]]:
    """What decides at ``now`` and the next ``count`` transitions (pre-warm included)."""
    ahead = _Ahead(calendar, now.astimezone(datetime.UTC))
    return ahead.current, ahead.take(count)


class Lookahead:
    """The calendar of a spec at ``now``, asked for a ``Decision`` with as many upcoming
    transitions as the caller needs, the walk kept between asks: a pass that only writes the
    target's replicas needs the next transition (its recheck delay), and one that writes the
    status all of ``UPCOMING``; the second ask continues where the first stopped, so a pass that only
    flips never computes ``status.upcoming`` (docs/benchmarks.md)."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        now: datetime.datetime,
        annotations: Mapping[str, str] | None = None,
        holidays: frozenset[datetime.date] = frozenset(),
    ) -> None:
        self.calendar, self.error = calendar_from(spec, annotations, holidays)
        self.now = now
        self._ahead = _Ahead(self.calendar, now.astimezone(datetime.UTC))
        self._expired: tuple[str, ...] | None = None

    def decision(self, count: int = UPCOMING) -> Decision:
        """Replicas, who decides and the next ``count`` transitions (the next one always found)."""
        current, ahead = self._ahead.current, self._ahead.take(max(count, 1))
        if self._expired is None:
            self._expired = tuple(_expired_notes(self.calendar, self.now))
        window = current.window if current.layer == WINDOW else None
        return Decision(
            current.replicas,
            window,
            ahead[0].time if ahead else None,
            current,
            ahead[:count],
            self.error,
            self._expired,
        )


def decide(
    spec: Mapping[str, Any],
    now: datetime.datetime,
    annotations: Mapping[str, str] | None = None,
    count: int = UPCOMING,
    holidays: frozenset[datetime.date] = frozenset(),
) -> Decision:
    """Replicas the calendar asks for at ``now``, who decided, and the next transitions;
    ``holidays`` are dates from outside the spec (the ConfigMap of spec.holidays.configMapRef)."""
    return Lookahead(spec, now, annotations, holidays).decision(count)


def recheck_delay(spec: Mapping[str, Any], decision: Decision, now: datetime.datetime) -> float:
    """Seconds until the next pass: the next transition of any layer (override, holiday,
    pre-warm, window), but at most ``intervalMint`` minutes."""
    delay = float(int(spec.get("intervalMint") or DEFAULT_RECHECK_MINUTES) * 60)
    if decision.next_transition is not None:
        # A hair late rather than early: an early wake-up would only find the old value.
        delay = min(delay, (decision.next_transition - now).total_seconds() + 0.001)
    return max(delay, 0.001)


def _expired_notes(calendar: Calendar, now: datetime.datetime) -> list[str]:
    notes = []
    for o in calendar.overrides:
        if o.end <= now:
            where = OVERRIDE_ANNOTATION if o.entry == ANNOTATION_ENTRY else f"override {o.entry!r}"
            notes.append(f"{where} expired at {_rfc3339(o.end)} and no longer applies; remove it")
    if len(notes) > MAX_OVERLAP_NOTES:
        notes[MAX_OVERLAP_NOTES:] = [f"and {len(notes) - MAX_OVERLAP_NOTES} more expired overrides"]
    return notes


def _rfc3339(t: datetime.datetime) -> str:
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def overlaps(spec: Mapping[str, Any]) -> list[str]:
    """Human-readable notes on windows that overlap an earlier one (allowed; the first wins):
    at most ``MAX_OVERLAP_NOTES`` notes, then one line summing up the rest."""
    windows = tuple(
        window_from_spec(i, {**item, "leadTime": None})
        for i, item in enumerate(spec.get("schedulingConfig") or ())
    )
    return list(_overlap_notes(windows))


# Every pass asks, but the answer depends on the windows only. A window's week is a bit mask
# of 10,080 minutes, so a pair is one AND: 48 windows (1,128 pairs) cost a few milliseconds
# (tools/bench/tdset_calendar.py; set intersections took over a second).
@functools.lru_cache(maxsize=256)
def _overlap_notes(windows: tuple[Window, ...]) -> tuple[str, ...]:
    week = [_week_mask(w) for w in windows]
    notes: list[str] = []
    pairs = 0
    involved: set[int] = set()
    for later in range(len(windows)):
        for earlier in range(later):
            shared = (week[earlier] & week[later]).bit_count()
            if not shared:
                continue
            pairs += 1
            involved |= {earlier, later}
            if len(notes) < MAX_OVERLAP_NOTES:
                notes.append(
                    f"spec.schedulingConfig[{later}] ({windows[later].label()}) overlaps "
                    f"spec.schedulingConfig[{earlier}] ({windows[earlier].label()}) for "
                    f"{_minutes_text(shared)} a week; the earlier window wins there"
                )
    if pairs > len(notes):
        notes.append(
            f"and {pairs - len(notes)} more overlapping pairs ({len(involved)} of {len(windows)} windows "
            "overlap another); the earlier window wins in each"
        )
    return tuple(notes)


def _week_mask(window: Window) -> int:
    length = (window.end - window.start) % MINUTES_PER_DAY
    run = (1 << length) - 1
    mask = 0
    for day in window.days:
        start = day * MINUTES_PER_DAY + window.start
        mask |= run << start
    # A Sunday window crossing midnight wraps into Monday.
    return (mask & ((1 << MINUTES_PER_WEEK) - 1)) | (mask >> MINUTES_PER_WEEK)


def _minutes_text(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def describe(spec: Mapping[str, Any], decided: Window | Decided | None) -> str:
    """``window 2 (09:00-17:00 Europe/Berlin)``, ``override 'sale'``, ``holiday 2026-12-25``,
    ``outside every window``…, for Events."""
    zone = spec.get("timeZone", DEFAULT_TIME_ZONE)
    if isinstance(decided, Decided):
        if decided.layer == OVERRIDE:
            return (
                f"override {decided.entry!r}"
                if decided.entry != ANNOTATION_ENTRY
                else f"override ({OVERRIDE_ANNOTATION})"
            )
        if decided.layer == HOLIDAY:
            return f"holiday {decided.entry} ({zone}): holidays.replicas"
        if decided.layer == LEAD_TIME and decided.window is not None and decided.opens is not None:
            return (
                f"pre-warm for window {decided.window.index} ({decided.window.label()} {zone}), "
                f"opening at {_rfc3339(decided.opens)}"
            )
        decided = decided.window if decided.layer == WINDOW else None
    if decided is None:
        return f"outside every window ({zone}): defaultReplica"
    return f"window {decided.index} ({decided.label()} {zone})"
