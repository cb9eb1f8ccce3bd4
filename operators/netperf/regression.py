"""Is a scheduled result a regression? Welch's t-test plus a minimum effect size (pure, stdlib).

The rule (also in docs/operators/netperf.md): a result *regressed* when, compared with the
baseline samples (the previous ``baselineRuns`` results' samples pooled, or the pinned
``regression.baseline``),

- its mean is lower by at least ``minChangePercent`` (default 10 %) of the baseline mean, and
- Welch's one-sided t-test (unequal variances, Welch-Satterthwaite degrees of freedom) says a
  drop at least this large is unlikely by chance: p < ``pValue`` (default 0.05).

Higher is better for every figure compared (bits/s, transactions/s, connections/s). Both
conditions are needed: the t-test alone flags 1 % drops of a very steady link, the effect size
alone flags noise of a very noisy one. The false-alarm rate on equal distributions and the power
on a 2x drop are measured on synthetic samples in tests/unit/netperf/test_regression.py.

Why no scipy: it is not a dependency of the operator image (pyproject.toml); the t
distribution's CDF is the regularized incomplete beta function, computed below by its continued
fraction (Lentz), accurate to ~1e-12 -- far finer than a 0.05 threshold needs.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

_EPS = 1e-14
_TINY = 1e-300


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (Numerical Recipes' betacf)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = 1.0 + aa / c
        c = c if abs(c) > _TINY else _TINY
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t < 0 else 1.0 - tail


@dataclass(frozen=True)
class Welch:
    t: float
    df: float
    p_lower: float  # one-sided: P(a difference this negative or more | equal means)


def welch(new: Sequence[float], old: Sequence[float]) -> Welch:
    """Welch's t-test of mean(new) < mean(old); each needs at least 2 samples."""
    if len(new) < 2 or len(old) < 2:
        raise ValueError("Welch's t-test needs at least 2 samples on each side")
    m1, m2 = statistics.fmean(new), statistics.fmean(old)
    v1, v2 = statistics.variance(new) / len(new), statistics.variance(old) / len(old)
    se2 = v1 + v2
    if se2 == 0.0:  # both constant: any difference is certain, none is none
        diff = m1 - m2
        t = -math.inf if diff < 0 else (math.inf if diff > 0 else 0.0)
        return Welch(t, math.inf, 0.0 if diff < 0 else (1.0 if diff > 0 else 0.5))
    t = (m1 - m2) / math.sqrt(se2)
    df = se2 * se2 / ((v1 * v1 / (len(new) - 1) if v1 else 0.0) + (v2 * v2 / (len(old) - 1) if v2 else 0.0))
    return Welch(t, df, t_cdf(t, df))


@dataclass(frozen=True)
class Verdict:
    regressed: bool
    old_mean: float
    new_mean: float
    change_percent: float  # negative: a drop
    p_value: float
    baseline_samples: int

    def summary(self) -> str:
        return (
            f"mean {self.new_mean:.4g} vs baseline {self.old_mean:.4g} "
            f"({self.change_percent:+.1f} %, p = {self.p_value:.3g}, "
            f"{self.baseline_samples} baseline samples)"
        )


def judge(
    new: Sequence[float], old: Sequence[float], *, min_change_percent: float, p_value: float
) -> Verdict:
    """The rule of the module docstring; ``regressed`` False whatever the data when a side has
    fewer than 2 samples (no variance, no test)."""
    old_mean = statistics.fmean(old) if old else math.nan
    new_mean = statistics.fmean(new) if new else math.nan
    if len(new) < 2 or len(old) < 2 or old_mean <= 0:
        return Verdict(False, old_mean, new_mean, math.nan, math.nan, len(old))
    change = (new_mean - old_mean) / old_mean * 100.0
    p = welch(new, old).p_lower
    return Verdict(change <= -min_change_percent and p < p_value, old_mean, new_mean, change, p, len(old))
