"""The TDSet schedule as a pure function of (spec, now): replicas, active window, next change.

Rules (also in docs/operators/tdset.md):

- A window is ``[start, end)`` on the wall clock of ``spec.timeZone`` (IANA name, default
  UTC), at minute precision (``startTime``/``startMinute``, ``endTime``/``endMinute``).
- ``end <= start`` crosses midnight: ``19 -> 0`` is 19:00-24:00, ``22 -> 6`` is 22:00-06:00.
  ``start == end`` is rejected (at admission by CEL, and again here).
- ``days`` (default: every day) names the days on which a window *starts*; the part of a
  midnight-crossing window after 00:00 belongs to the day before. A Friday ``22 -> 6`` window
  covers Friday 22:00 to Saturday 06:00.
- The first window that contains the current wall-clock time wins (list order); overlaps are
  allowed and reported (:func:`overlaps`). Outside every window: ``defaultReplica``.

Daylight-saving time follows what a wall clock shows, because that is what the person who
wrote "9 to 17" reads:

- spring forward (e.g. 02:00 -> 03:00): the skipped times never occur, so a window lying
  entirely inside the skipped hour does not apply that day, and a window that starts inside
  it (02:30 -> 04:00) starts when the clock jumps to 03:00;
- fall back (e.g. 03:00 -> 02:00): the repeated hour happens twice and a window covering it is
  active both times (a 02:00 -> 03:00 window lasts two real hours that night).

:func:`next_transition` finds the first instant after ``now`` at which the result changes, so
the controller can wake exactly then. Between UTC-offset changes the wall clock runs linearly,
so only window edges (and midnight, where the weekday changes) can change the result; offset
changes are located by sampling every 6 hours and bisecting to the second (no zone changes its
offset twice within 6 hours).
"""

from __future__ import annotations

import datetime
import functools
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.api.validation import FieldError

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MINUTES_PER_DAY = 24 * 60
DEFAULT_TIME_ZONE = "UTC"
# Re-check interval when spec.intervalMint is unset (the next boundary is still exact).
DEFAULT_RECHECK_MINUTES = 60
# Far enough to see every weekday once more; a schedule that does not change within it has no
# next transition (the controller still re-checks at its safety interval).
HORIZON = datetime.timedelta(days=8)
_OFFSET_PROBE = datetime.timedelta(hours=6)
_SECOND = datetime.timedelta(seconds=1)


@dataclass(frozen=True)
class Window:
    index: int
    start: int  # minute of the day
    end: int
    replicas: int
    days: frozenset[int]  # datetime.weekday() numbers of the days the window starts on

    @property
    def crosses_midnight(self) -> bool:
        return self.end <= self.start

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


@dataclass(frozen=True)
class Decision:
    replicas: int
    window: Window | None
    next_transition: datetime.datetime | None


def window_from_spec(index: int, item: Mapping[str, Any]) -> Window:
    start = int(item["startTime"]) * 60 + int(item.get("startMinute", 0))
    end = int(item["endTime"]) * 60 + int(item.get("endMinute", 0))
    names = item.get("days") or DAYS
    return Window(index, start, end, int(item["replica"]), frozenset(DAYS.index(d) for d in names))


def load_zone(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone ``name``; raises ValueError with a readable message when unknown."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, IsADirectoryError) as exc:
        raise ValueError(f"unknown time zone {name!r} (expected an IANA name such as Europe/Berlin)") from exc


def check(spec: Mapping[str, Any]) -> list[FieldError]:
    """What the CRD schema cannot say: known time zone, non-empty windows (CEL, again here)."""
    errors = []
    try:
        load_zone(str(spec.get("timeZone", DEFAULT_TIME_ZONE)))
    except ValueError as exc:
        errors.append(FieldError("spec.timeZone", str(exc)))
    for i, item in enumerate(spec.get("schedulingConfig") or ()):
        window = window_from_spec(i, item)
        if window.start == window.end:
            errors.append(
                FieldError(
                    f"spec.schedulingConfig[{i}]",
                    "start and end are equal; a window must not be empty (for all day, use defaultReplica)",
                )
            )
    return errors


def from_spec(spec: Mapping[str, Any]) -> Schedule:
    """The schedule of a spec that passed the schema and :func:`check`."""
    windows = tuple(window_from_spec(i, item) for i, item in enumerate(spec.get("schedulingConfig") or ()))
    zone = load_zone(str(spec.get("timeZone", DEFAULT_TIME_ZONE)))
    return Schedule(windows, int(spec["defaultReplica"]), zone)


def _offset(zone: zoneinfo.ZoneInfo, t: datetime.datetime) -> datetime.timedelta | None:
    return t.astimezone(zone).utcoffset()


def next_offset_change(
    zone: zoneinfo.ZoneInfo, t: datetime.datetime, limit: datetime.datetime
) -> datetime.datetime:
    """The first instant after ``t`` with another UTC offset, or ``limit`` if none before it."""
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
    edges = sorted({0} | {w.start for w in schedule.windows} | {w.end for w in schedule.windows})
    midnight = local_wall.replace(hour=0, minute=0, second=0, microsecond=0)
    for edge in edges:
        candidate = midnight + datetime.timedelta(minutes=edge)
        if candidate > local_wall:
            return candidate
    return midnight + datetime.timedelta(days=1)


def next_transition(
    schedule: Schedule, now: datetime.datetime, horizon: datetime.timedelta = HORIZON
) -> datetime.datetime | None:
    """The first instant after ``now`` at which :meth:`Schedule.at` changes (None: not within horizon)."""
    now = now.astimezone(datetime.UTC)
    value = schedule.at(now)
    limit = now + horizon
    t = now
    segment_end = next_offset_change(schedule.zone, t, limit)
    while t < limit:
        wall = t.astimezone(schedule.zone).replace(tzinfo=None)
        candidate = t + (_next_edge(schedule, wall) - wall)
        if candidate < segment_end:
            t = candidate
        else:
            t = segment_end
            segment_end = next_offset_change(schedule.zone, t, limit)
        if t >= limit:
            return None
        if schedule.at(t) != value:
            return t
    return None


def decide(spec: Mapping[str, Any], now: datetime.datetime) -> Decision:
    """Replicas the schedule asks for at ``now``, the active window and when that changes next."""
    schedule = from_spec(spec)
    replicas, index = schedule.at(now)
    window = schedule.windows[index] if index is not None else None
    return Decision(replicas, window, next_transition(schedule, now))


def recheck_delay(spec: Mapping[str, Any], decision: Decision, now: datetime.datetime) -> float:
    """Seconds until the next pass: the next transition, but at most ``intervalMint`` minutes."""
    delay = float(int(spec.get("intervalMint") or DEFAULT_RECHECK_MINUTES) * 60)
    if decision.next_transition is not None:
        # A hair late rather than early: an early wake-up would only find the old value.
        delay = min(delay, (decision.next_transition - now).total_seconds() + 0.001)
    return max(delay, 0.001)


def overlaps(spec: Mapping[str, Any]) -> list[str]:
    """Human-readable notes on windows that overlap an earlier one (allowed; the first wins)."""
    windows = tuple(window_from_spec(i, item) for i, item in enumerate(spec.get("schedulingConfig") or ()))
    return list(_overlap_notes(windows))


# Every pass asks, but the answer depends on the windows only: up to 48 windows cost ~0.3 s.
@functools.lru_cache(maxsize=256)
def _overlap_notes(windows: tuple[Window, ...]) -> tuple[str, ...]:
    week = [_week_minutes(w) for w in windows]
    notes = []
    for later in range(len(windows)):
        for earlier in range(later):
            shared = week[earlier] & week[later]
            if shared:
                notes.append(
                    f"spec.schedulingConfig[{later}] ({windows[later].label()}) overlaps "
                    f"spec.schedulingConfig[{earlier}] ({windows[earlier].label()}) for "
                    f"{_minutes_text(len(shared))} a week; the earlier window wins there"
                )
    return tuple(notes)


def _week_minutes(window: Window) -> set[int]:
    length = (window.end - window.start) % MINUTES_PER_DAY
    return {
        (day * MINUTES_PER_DAY + window.start + m) % (7 * MINUTES_PER_DAY)
        for day in window.days
        for m in range(length)
    }


def _minutes_text(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def describe(spec: Mapping[str, Any], window: Window | None) -> str:
    """``window 2 (09:00-17:00 Europe/Berlin)`` or ``outside every window``, for Events."""
    zone = spec.get("timeZone", DEFAULT_TIME_ZONE)
    if window is None:
        return f"outside every window ({zone}): defaultReplica"
    return f"window {window.index} ({window.label()} {zone})"
