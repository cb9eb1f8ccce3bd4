"""Did the latest scheduled result regress? Change points in the run history (pure, stdlib).

A single run is noisy; a regression is a lasting shift in level, judged with a t-test at the
significance the spec sets, so that false alarms over months of hourly runs stay rare.
The method: ``judge``.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from operators.netperf.regression import t_cdf

DIRECTIONS = ("Decrease", "Increase", "Either")
DEFAULT_DIRECTION = "Decrease"


# The shipped defaults, measured by tools/bench/regression_detector.py (docs/benchmarks.md): at
# most one false Regressed per 720 hourly runs at a coefficient of variation of 2-20 % between
# samples, and a sustained 15 % drop found within 3 runs in 95 % of cases up to 10 % with a
# scheduled Netperf's default 5 samples a run (schema.DETECTION_SAMPLES).
DEFAULT_MIN_CHANGE_PERCENT = 10.0
DEFAULT_P_VALUE = 0.0005


@dataclass(frozen=True)
class Options:
    direction: str = DEFAULT_DIRECTION  # which change is a regression
    min_change_percent: float = DEFAULT_MIN_CHANGE_PERCENT
    p_value: float = DEFAULT_P_VALUE
    # The latest k runs are tested for a new regression, k = 1, 2, ..., each at its share of
    # p_value: most to the longest tail (the most power for a moderate drop), a little to the
    # short ones (a collapse is flagged at once).
    tail_shares: tuple[float, ...] = (0.05, 0.05, 0.9)


@dataclass(frozen=True)
class Verdict:
    regressed: bool
    old_mean: float  # the baseline's mean of run values
    new_mean: float  # the latest segment's (regressed) or the latest run's
    change_percent: float  # negative: a drop
    p_value: float
    baseline_runs: int  # run values in the baseline (pinned: its values)
    change_index: int | None  # index in the series where the latest regressed segment starts

    def summary(self) -> str:
        return (
            f"mean {self.new_mean:.4g} vs baseline {self.old_mean:.4g} "
            f"({self.change_percent:+.1f} %, p = {self.p_value:.3g}, "
            f"{self.baseline_runs} baseline runs)"
        )


def _moments(values: Sequence[float]) -> tuple[list[float], list[float]]:
    s, q = [0.0], [0.0]
    for v in values:
        s.append(s[-1] + v)
        q.append(q[-1] + v * v)
    return s, q


@dataclass(frozen=True)
class _Side:
    n: int
    mean: float
    ss: float  # sum of squared deviations from the mean


def _side(values: Sequence[float]) -> _Side:
    m = statistics.fmean(values)
    return _Side(len(values), m, sum((v - m) ** 2 for v in values))


def _t(old: _Side, new: _Side) -> float:
    """Student's two-sample t statistic of new's mean minus old's (pooled variance); ±inf when
    both sides are constant and differ."""
    var = max(old.ss + new.ss, 0.0) / (old.n + new.n - 2)
    diff = new.mean - old.mean
    if var <= 1e-24 * max(old.mean * old.mean, new.mean * new.mean, 1e-300):
        return 0.0 if diff == 0 else math.copysign(math.inf, diff)
    return diff / math.sqrt(var * (1.0 / old.n + 1.0 / new.n))


def _p_greater(t: float, df: int) -> float:
    """One-sided p of a t this large or larger."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    return 1.0 - t_cdf(t, df)


def _relative(old: float, new: float) -> float:
    return (new - old) / abs(old) * 100.0 if old else math.inf


def change_points(values: Sequence[float], options: Options) -> list[int]:
    """Indices where a new segment starts (rule 1 of ``judge``'s docstring), ascending."""
    s, q = _moments(values)
    found: list[int] = []
    stack = [(0, len(values))]
    while stack:
        a, b = stack.pop()
        if b - a < 3:
            continue
        best, best_t = -1, 0.0
        for tau in range(a + 1, b):
            n1, n2 = tau - a, b - tau
            m1, m2 = (s[tau] - s[a]) / n1, (s[b] - s[tau]) / n2
            left = _Side(n1, m1, q[tau] - q[a] - n1 * m1 * m1)
            right = _Side(n2, m2, q[b] - q[tau] - n2 * m2 * m2)
            t = abs(_t(left, right))
            if t > best_t:
                best, best_t = tau, t
        if best < 0:
            continue
        change = _relative(statistics.fmean(values[a:best]), statistics.fmean(values[best:b]))
        if (
            abs(change) >= options.min_change_percent
            and 2.0 * _p_greater(best_t, b - a - 2) < options.p_value
        ):
            found.append(best)
            stack += [(a, best), (best, b)]
    return sorted(found)


def _compare(old: Sequence[float], new: Sequence[float], direction: str) -> tuple[float, float]:
    """(change %, one-sided p in ``direction``) of ``new`` against ``old``."""
    o, n = _side(old), _side(new)
    change = _relative(o.mean, n.mean)
    if o.n + n.n < 3:
        return change, math.nan
    t, df = _t(o, n), o.n + n.n - 2
    if direction == "Increase":
        return change, _p_greater(t, df)
    if direction == "Decrease":
        return change, _p_greater(-t, df)
    return change, min(1.0, 2.0 * _p_greater(abs(t), df))


def _worse(change: float, direction: str, minimum: float) -> bool:
    if direction == "Increase":
        return change >= minimum
    if direction == "Decrease":
        return change <= -minimum
    return abs(change) >= minimum


def _regressed(
    base: Sequence[float], new: Sequence[float], options: Options, p_value: float, *, p_needed: bool = False
) -> Verdict:
    """``new`` against ``base``; the t-test is left out (p NaN) when the change is too small to
    count anyway, unless ``p_needed``."""
    old_mean, new_mean = statistics.fmean(base), statistics.fmean(new)
    change = _relative(old_mean, new_mean)
    big = _worse(change, options.direction, options.min_change_percent)
    p = _compare(base, new, options.direction)[1] if big or p_needed else math.nan
    return Verdict(big and p < p_value, old_mean, new_mean, change, p, len(base), None)


def _baseline(accepted: Sequence[float], options: Options) -> list[float]:
    """The latest level of the runs that are no regression: their segments oldest first, each
    the new baseline unless it is worse than the one before (rule 2)."""
    cuts = [0, *change_points(accepted, options), len(accepted)]
    base: list[float] = list(accepted[: cuts[1]])
    for a, b in itertools.pairwise(cuts[1:]):
        if not _regressed(base, accepted[a:b], options, options.p_value).regressed:
            base = list(accepted[a:b])
    return base


@dataclass
class _Replay:
    """The verdicts on a series' runs, oldest first, each given those before it."""

    values: Sequence[float]
    options: Options
    pinned: Sequence[float]
    regressed: list[bool]
    known: dict[int, list[float]] = field(default_factory=dict)  # baselines, until a run regresses

    def mark(self, start: int, end: int) -> None:
        """Runs ``start`` to ``end`` regressed: they are no baseline."""
        self.regressed[start : end + 1] = [True] * (end + 1 - start)
        self.known.clear()

    def baseline(self, before: int) -> list[float]:
        """The level the runs before ``before`` that are no regression settled at."""
        if self.pinned:
            return list(self.pinned)
        if before not in self.known:
            self.known[before] = self._baseline(before)
        return self.known[before]

    def _baseline(self, before: int) -> list[float]:
        return _baseline(
            [v for v, r in zip(self.values[:before], self.regressed, strict=False) if not r], self.options
        )

    def step(self, i: int, episode: int | None) -> Verdict | None:
        """The verdict on run ``i``; ``episode``: where the regression run ``i - 1`` was in began."""
        values, options = self.values, self.options
        if episode is not None and len(base := self.baseline(episode)) >= 2:
            v = _regressed(base, values[episode : i + 1], options, options.p_value)
            # ... and the latest run is nearer the regressed level than the baseline's.
            if v.regressed and abs(values[i] - v.new_mean) < abs(values[i] - v.old_mean):
                return replace(v, change_index=episode)
        best: Verdict | None = None
        latest: Verdict | None = None
        for k, share in enumerate(options.tail_shares, start=1):
            start = i - k + 1
            if start < 0 or any(self.regressed[start:i]):
                break
            old = self.baseline(start)
            if len(old) < 2:
                continue
            shown = k == 1 and i == len(values) - 1  # the verdict reported: with its p
            v = _regressed(old, values[start : i + 1], options, options.p_value * share, p_needed=shown)
            if k == 1:
                latest = v
            if v.regressed and (best is None or v.p_value < best.p_value):
                best = replace(v, change_index=start)
        return best or latest


def judge(values: Sequence[float], options: Options, pinned: Sequence[float] = ()) -> Verdict | None:
    """The verdict on the last of ``values`` (the rules below), the runs before it
    judged in turn; None when there is nothing to judge (fewer than two baseline runs).

    The series is one value per run (the mean of its samples), oldest first: the runs of the same
    measurement since the acknowledged change, at most the detector's window. The rule (also in
    docs/operators/netperf.md):

    1. **Change points**, by binary segmentation as Hunter/Apache Otava do it with E-divisive
       means: in a segment, the split that best separates the values before it from those after
       it is a candidate; it is a change point when Student's two-sample t-test between the two
       sides gives p < ``p_value`` and the two means differ by at least ``min_change_percent``;
       then both sides are split again. The split statistic is E-divisive's with exponent 2 (the
       squared difference of the two means weighted by ``m k / (m + k)``) over the pooled
       variance, i.e. the two-sample t statistic itself: for a shift of the mean, the figure a
       network benchmark moves by, it is the likelihood ratio; exponent 1 (Otava's default) also
       finds changes of the distribution's shape, which need tens of runs to see, more than an
       alert may wait.
    2. **The baseline** of a run: the runs before it that are no regression, segmented by rule 1;
       oldest first, each segment becomes the baseline unless it is worse than the baseline so far
       (the test of rule 3). So regressed runs, and a drop not flagged yet, are never part of the
       baseline a later run is judged against, while a level that rose (or fell less than the
       minimum effect) is the new normal.
    3. **Verdicts**, each run in turn, given those before it (a replay: the verdict is a function of
       the history alone). A run is *regressed* when the latest ``k`` runs (k = 1, 2, 3, each at its
       share ``tail_shares`` of ``p_value``) are worse than their baseline, one-sided in
       ``direction``, by Student's t-test at that level and by at least ``min_change_percent``; the
       regression starts at the first of them. While it lasts, each next run is judged with all
       the runs since it started (at ``p_value``), and it ends with the first run nearer the
       baseline's mean than the regressed runs' (a recovery clears it at once).

    Values are judged per run, not per sample: runs vary more among themselves (other tenants,
    placement, time of day) than samples within a run, and the per-run mean carries that variance
    into the test. The false-alarm rate and the detection delay of the defaults are measured by
    ``tools/bench/regression_detector.py`` (docs/benchmarks.md).
    """
    # In units of the largest value: the running sums of squares keep their precision.
    scale = max((abs(v) for v in (*values, *pinned)), default=0.0) or 1.0
    values = [v / scale for v in values]
    pinned = [v / scale for v in pinned]
    replay = _Replay(values, options, pinned, [False] * len(values))
    verdict: Verdict | None = None
    for i in range(len(values)):
        episode = verdict.change_index if verdict is not None and verdict.regressed else None
        verdict = replay.step(i, episode)
        if verdict is not None and verdict.regressed and verdict.change_index is not None:
            replay.mark(verdict.change_index, i)
    if verdict is None:
        return None
    return replace(verdict, old_mean=verdict.old_mean * scale, new_mean=verdict.new_mean * scale)
