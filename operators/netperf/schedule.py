"""When a scheduled Netperf runs, and what its history and regression verdict say (pure)."""

from __future__ import annotations

import datetime
import math
import statistics
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from operators.netperf import cron, detector
from shared.api.validation import FieldError

DEFAULT_TIME_ZONE = "UTC"
DEFAULT_HISTORY = 24
MAX_HISTORY = 100
DIRECTIONS = detector.DIRECTIONS
DEFAULT_DIRECTION = detector.DEFAULT_DIRECTION
# The detector's window: the results before the latest it looks at (the default history keeps
# 24 results in all).
DEFAULT_BASELINE_RUNS = 23
MAX_BASELINE_RUNS = MAX_HISTORY - 1
DEFAULT_MIN_CHANGE_PERCENT = detector.DEFAULT_MIN_CHANGE_PERCENT
DEFAULT_P_VALUE = detector.DEFAULT_P_VALUE
MAX_BASELINE_SAMPLES = 100
# The spec fields that are about when to run, not what: everything else is the test, copied into
# status.runSpec when a run starts.
SCHEDULE_FIELDS = (
    "schedule",
    "timeZone",
    "window",
    "suspend",
    "startingDeadlineSeconds",
    "historyLimit",
    "regression",
)
SKIP_REASONS = ("overlapping", "missed", "outsideWindow", "suspended")
REGRESSED = "Regressed"


@dataclass(frozen=True)
class Schedule:
    """A Netperf with ``spec.schedule`` (``.cron``, on the wall clock of ``spec.timeZone``) runs
    again at each due time. The rules (also in docs/operators/netperf.md):

    - **No overlap.** A due time that comes while a run is in progress is skipped, and counted in
      ``status.skippedRuns.overlapping``.
    - **Catch-up: one run, not many.** Due times are consumed in order from
      ``status.lastScheduleTime`` (at first, the object's creation). If several passed unseen (the
      operator was down across them), only the latest one runs, at once; the earlier ones are
      counted in ``skippedRuns.missed``. With ``startingDeadlineSeconds`` (as in CronJob) even the
      latest is skipped (``missed``) when it is older than that.
    - **Quiet window.** With ``spec.window`` (``startHour``/``endHour``, TDSet's grammar: the wall
      clock of ``timeZone``, end exclusive, ``end < start`` crosses midnight), a due time outside
      the window starts no run (``skippedRuns.outsideWindow``); it is not deferred.
    - **Suspend.** While ``spec.suspend`` is true no run starts; due times pass and are counted
      (``skippedRuns.suspended``), and resuming does not catch up on them. A run in progress when
      suspended finishes.
    - **A run is its spec as claimed.** The run's test fields are copied into ``status.runSpec``
      when it starts and its pods are made from that copy: an edit mid-run (a new schedule, another
      test type) applies from the next run and never mixes two specs in one result.

    Each finished run adds an entry to ``status.history`` (newest last, at most ``historyLimit``):
    its number, times, the headline figure's mean, CI and samples (bits/s for STREAM tests,
    transactions/s for the RR types, connections/s for TCP_CRR), p99 latency for the RR types, or
    the error's reason, and the key of what it measured (``.measurement``). Each result is
    judged with the earlier results of the same measurement by the change-point detector
    (``judge``, ``.detector``); the verdict in the status, and when it stops applying, are
    ``.verdicts``'.
    """

    cron: cron.Cron
    zone: zoneinfo.ZoneInfo
    window: tuple[int, int] | None = None  # start, end hour (end exclusive)
    suspend: bool = False
    deadline: datetime.timedelta | None = None
    history_limit: int = DEFAULT_HISTORY

    def in_window(self, now: datetime.datetime) -> bool:
        if self.window is None:
            return True
        start, end = self.window
        hour = now.astimezone(self.zone).hour
        return start <= hour < end if start < end else (hour >= start or hour < end)


def parse(spec: Mapping[str, Any]) -> tuple[Schedule | None, list[FieldError]]:
    """The schedule of ``spec`` (None when it has none) and what is wrong with it, by field."""
    if not spec.get("schedule"):
        return None, []
    errors: list[FieldError] = []
    try:
        expression = cron.parse(str(spec["schedule"]))
    except ValueError as exc:
        errors.append(FieldError("spec.schedule", str(exc)))
        expression = cron.parse("@daily")
    try:
        zone = cron.load_zone(str(spec.get("timeZone") or DEFAULT_TIME_ZONE))
    except ValueError as exc:
        errors.append(FieldError("spec.timeZone", str(exc)))
        zone = zoneinfo.ZoneInfo("UTC")
    window = None
    if spec.get("window"):
        start, end = int(spec["window"].get("startHour", 0)), int(spec["window"].get("endHour", 0))
        if start == end:
            errors.append(FieldError("spec.window", "startHour and endHour must differ"))
        window = (start, end)
    deadline = spec.get("startingDeadlineSeconds")
    return (
        Schedule(
            cron=expression,
            zone=zone,
            window=window,
            suspend=bool(spec.get("suspend")),
            deadline=datetime.timedelta(seconds=int(deadline)) if deadline else None,
            history_limit=int(spec.get("historyLimit") or DEFAULT_HISTORY),
        ),
        errors,
    )


def run_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The test part of ``spec``: what a run is made from (status.runSpec)."""
    return {k: v for k, v in spec.items() if k not in SCHEDULE_FIELDS}


@dataclass(frozen=True)
class Decision:
    """What to do about due times at ``now``."""

    start: datetime.datetime | None = None  # the due time a run starts for now
    consumed: datetime.datetime | None = None  # the new lastScheduleTime (None: unchanged)
    skipped: dict[str, int] = field(default_factory=dict)
    next_time: datetime.datetime | None = None  # the next due time after those consumed


def decide(schedule: Schedule, last: datetime.datetime, now: datetime.datetime, *, running: bool) -> Decision:
    """The rules of ``Schedule``'s docstring, for due times in ``(last, now]``."""
    count, latest = cron.missed(schedule.cron, last, now, schedule.zone)
    if latest is None:
        return Decision(next_time=cron.next_after(schedule.cron, last, schedule.zone))
    next_time = cron.next_after(schedule.cron, latest, schedule.zone)
    if running:
        return Decision(consumed=latest, skipped={"overlapping": count}, next_time=next_time)
    if schedule.suspend:
        return Decision(consumed=latest, skipped={"suspended": count}, next_time=next_time)
    skipped = {"missed": count - 1} if count > 1 else {}
    if schedule.deadline is not None and now - latest > schedule.deadline:
        return Decision(consumed=latest, skipped={"missed": count}, next_time=next_time)
    if not schedule.in_window(now):
        skipped["outsideWindow"] = 1
        return Decision(consumed=latest, skipped=skipped, next_time=next_time)
    return Decision(start=latest, consumed=latest, skipped=skipped, next_time=next_time)


def add_skipped(current: Mapping[str, Any] | None, skipped: Mapping[str, int]) -> dict[str, int]:
    total = {k: int(v) for k, v in (current or {}).items()}
    for reason, n in skipped.items():
        if n:
            total[reason] = total.get(reason, 0) + n
    return total


def headline_stats(st: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    """The unit and statistics of a finished status' headline figure."""
    if st.get("throughputBitsPerSec"):
        return "bitsPerSec", st["throughputBitsPerSec"]
    if st.get("transactionsPerSec"):
        return "perSec", st["transactionsPerSec"]
    return "", None


def entry(
    st: Mapping[str, Any], *, run: int, test_type: str, measurement: str | None = None
) -> dict[str, Any]:
    """One history entry of a finished run's status (compact: figures, not the whole status);
    ``measurement``: the key of what it measured (``.measurement``), what baselines match on."""
    item: dict[str, Any] = {
        "run": run,
        "scheduledTime": st.get("scheduledTime"),
        "completedAt": st.get("completedAt"),
        "testType": test_type,
        "measurement": measurement,
        "result": st.get("status"),
    }
    if st.get("status") != "Done":
        item["reason"] = st.get("reason")
        return {k: v for k, v in item.items() if v is not None}
    unit, stats = headline_stats(st)
    if stats is not None:
        item.update(
            unit=unit,
            mean=stats.get("mean"),
            ci95Low=stats.get("ci95Low"),
            ci95High=stats.get("ci95High"),
            samples=list(stats.get("samples") or []),
        )
    latency = st.get("latencySeconds") or {}
    for percentile in ("p50", "p90", "p99"):
        if latency.get(percentile) is not None:
            item[f"{percentile}Seconds"] = latency[percentile]
    return {k: v for k, v in item.items() if v is not None}


def appended(history: Sequence[Mapping[str, Any]] | None, item: Mapping[str, Any], limit: int) -> list[Any]:
    """``history`` with ``item`` last, the oldest dropped beyond ``limit``."""
    return [*(history or []), dict(item)][-limit:]


@dataclass(frozen=True)
class Settings:
    baseline_runs: int = DEFAULT_BASELINE_RUNS
    min_change_percent: float = DEFAULT_MIN_CHANGE_PERCENT
    p_value: float = DEFAULT_P_VALUE
    pinned: tuple[float, ...] = ()
    direction: str = detector.DEFAULT_DIRECTION
    acknowledged_run: int | None = None

    @property
    def options(self) -> detector.Options:
        return detector.Options(
            direction=self.direction, min_change_percent=self.min_change_percent, p_value=self.p_value
        )


def settings(spec: Mapping[str, Any]) -> Settings:
    r = spec.get("regression") or {}
    acknowledged = r.get("acknowledgedRun")
    return Settings(
        baseline_runs=int(r.get("baselineRuns") or DEFAULT_BASELINE_RUNS),
        min_change_percent=float(r.get("minChangePercent") or DEFAULT_MIN_CHANGE_PERCENT),
        p_value=float(r.get("pValue") or DEFAULT_P_VALUE),
        pinned=tuple(float(x) for x in r.get("baseline") or ()),
        direction=str(r.get("direction") or detector.DEFAULT_DIRECTION),
        acknowledged_run=int(acknowledged) if acknowledged is not None else None,
    )


def comparable(history: Sequence[Mapping[str, Any]], item: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The earlier results ``item`` is judged with: the Done results of ``history`` that measured
    what ``item`` measured (``.measurement``), oldest first. Errors are no measurement, and
    entries recorded without a measurement key match nothing: what they measured is unknown."""
    key = item.get("measurement")
    return [
        h
        for h in history
        if h.get("result") == "Done" and key is not None and h.get("measurement") == key and h.get("samples")
    ]


def series(
    history: Sequence[Mapping[str, Any]], item: Mapping[str, Any], s: Settings
) -> list[Mapping[str, Any]]:
    """The runs the detector sees, ``item`` last: the comparable ones since the acknowledged run
    (when ``item`` is that run or later), at most ``baseline_runs`` before ``item``."""
    earlier = comparable(history, item)
    ack = s.acknowledged_run
    if ack is not None and int(item.get("run") or 0) >= ack:
        earlier = [h for h in earlier if int(h.get("run") or 0) >= ack]
    return [*earlier[max(0, len(earlier) - s.baseline_runs) :], item]


@dataclass(frozen=True)
class Judgement:
    """The detector's verdict on a run, and the run its regression started at."""

    verdict: detector.Verdict
    change_run: int | None  # the first run of the regression (None: not regressed)

    @property
    def regressed(self) -> bool:
        return self.verdict.regressed

    def status(self, run: int) -> dict[str, Any]:
        """The figures of ``status.regression`` for the judged ``run`` (finite numbers only)."""
        v = self.verdict
        out: dict[str, Any] = {
            "run": run,
            "regressed": v.regressed,
            "baselineMean": v.old_mean,
            "mean": v.new_mean,
            "changePercent": round(v.change_percent, 2),
            "baselineRuns": v.baseline_runs,
        }
        if math.isfinite(v.p_value):  # NaN: no t-test, the change is too small to count
            out["pValue"] = float(f"{v.p_value:.4g}")
        if self.change_run is not None:
            out["changeRun"] = self.change_run
        return out

    def summary(self) -> str:
        since = f", since run {self.change_run}" if self.change_run is not None else ""
        return self.verdict.summary() + since


@dataclass(frozen=True)
class NotJudged:
    """A Done result the detector cannot judge, and why (a CamelCase reason and a sentence)."""

    reason: str
    message: str


def _detected(runs: Sequence[Mapping[str, Any]], s: Settings) -> detector.Verdict | NotJudged | None:
    """The detector's verdict on the last of ``runs`` (None: fewer than 2 baseline runs)."""
    try:
        values = [statistics.fmean(float(x) for x in h["samples"]) for h in runs]
        return detector.judge(values, s.options, s.pinned)
    except (ArithmeticError, ValueError) as exc:  # sums that overflow, and the like
        return NotJudged("NotFinite", f"the samples give no finite test statistic ({exc})")


def judge(
    earlier: Sequence[Mapping[str, Any]], item: Mapping[str, Any], s: Settings
) -> Judgement | NotJudged:
    """The judgement of a Done ``item`` with ``earlier`` (the Done results of its measurement,
    oldest first, ``comparable``): the one call that applies the detector, so another rule
    replaces it here. A judgement's figures are finite; where there is nothing to judge,
    ``NotJudged``."""
    runs = series(earlier, item, s)
    ack = s.acknowledged_run
    reached = ack is not None and int(item.get("run") or 0) >= ack
    since = f" since the acknowledged run {ack}" if reached else ""
    if len(runs) == 1 and not s.pinned:
        return NotJudged(
            "NewBaseline", f"the first result of this measurement{since}: it starts the baseline"
        )
    found = _detected(runs, s)
    if found is None:
        before = len(runs) - 1
        return NotJudged(
            "TooFewSamples",
            f"{before} earlier result{'s' if before != 1 else ''} of this measurement{since} give no "
            "baseline of 2 runs: the detector needs at least 2",
        )
    if isinstance(found, NotJudged):
        return found
    if found.old_mean <= 0:
        return NotJudged("ZeroBaseline", "the baseline's mean is 0: a change from it cannot be measured")
    figures = (found.old_mean, found.new_mean, found.change_percent)
    if not all(math.isfinite(x) for x in figures) or math.isinf(found.p_value):  # NaN p: no t-test
        return NotJudged("NotFinite", f"the samples give no finite figures ({found.summary()})")
    index = found.change_index
    return Judgement(found, int(runs[index]["run"]) if index is not None else None)


def verdict(
    history: Sequence[Mapping[str, Any]], item: Mapping[str, Any], s: Settings
) -> Judgement | NotJudged | None:
    """The judgement of ``item`` with the results before it (None for an Error: no figure)."""
    if item.get("result") != "Done" or not item.get("samples"):
        return None
    return judge(comparable(history, item), item, s)
