"""The regression rule: the t distribution against reference values, Welch's test, and the
rule's false-alarm rate and power on synthetic samples (figures in docs/operators/netperf.md)."""

from __future__ import annotations

import math
import random

import pytest

from operators.netperf import regression

SEED = 27
TRIALS = 2000


@pytest.mark.parametrize(
    ("t", "df", "cdf"),
    [
        # scipy.stats.t.cdf(-2, 5) and t.cdf(1.5, 10)
        (-2.0, 5, 0.050969739414929174),
        (1.5, 10, 0.9177463367772799),
        (0.0, 3, 0.5),
        # closed forms: df = 1 is Cauchy, 0.5 + atan(t) / pi; df = 2: 0.5 + t / (2 sqrt(2 + t^2))
        *[(t, 1, 0.5 + math.atan(t) / math.pi) for t in (-30.0, -4.0, -0.3, 2.5)],
        *[(t, 2, 0.5 + t / (2 * math.sqrt(2 + t * t))) for t in (-30.0, -4.0, -0.3, 2.5)],
        # large df: the normal distribution, 0.5 * erfc(-t / sqrt(2))
        (-1.6448536269514722, 1e7, 0.05),
    ],
)
def test_t_cdf_matches_reference_values(t, df, cdf):
    assert regression.t_cdf(t, df) == pytest.approx(cdf, abs=1e-6)


def test_welch_on_a_textbook_case():
    w = regression.welch([1, 2, 3], [4, 5, 6, 7])
    assert w.t == pytest.approx(-4.0415, abs=1e-4)
    assert w.df == pytest.approx(4.9592, abs=1e-4)
    assert w.p_lower == pytest.approx(0.00504, abs=1e-4)


def test_both_conditions_are_needed():
    steady = [100.0, 100.1, 99.9, 100.0, 100.05, 99.95]
    small_drop = [98.0, 98.1, 97.9]  # -2 %: significant, too small
    assert not regression.judge(small_drop, steady, min_change_percent=10, p_value=0.05).regressed
    noisy = [100.0, 40.0, 160.0, 70.0, 130.0, 100.0]
    big_noise = [80.0, 20.0, 140.0]  # -20 %: large, not significant
    v = regression.judge(big_noise, noisy, min_change_percent=10, p_value=0.05)
    assert not v.regressed and v.p_value > 0.05
    v = regression.judge([50.0, 51.0, 49.0], steady, min_change_percent=10, p_value=0.05)
    assert v.regressed and v.change_percent == pytest.approx(-50.0, abs=0.1)


def test_too_few_samples_is_no_verdict():
    v = regression.judge([1.0], [5.0, 6.0], min_change_percent=10, p_value=0.05)
    assert not v.regressed and math.isnan(v.p_value)


def rates(cv: float) -> tuple[int, int]:
    """False alarms on equal distributions and detections of a 2x drop, in TRIALS trials of a
    3-sample result against a 15-sample baseline (5 runs x 3), normal with this CV."""
    rng = random.Random(SEED)
    false_alarms = detections = 0
    for _ in range(TRIALS):
        old = [rng.gauss(1e9, cv * 1e9) for _ in range(15)]
        same = [rng.gauss(1e9, cv * 1e9) for _ in range(3)]
        half = [rng.gauss(0.5e9, cv * 0.5e9) for _ in range(3)]
        false_alarms += regression.judge(same, old, min_change_percent=10, p_value=0.05).regressed
        detections += regression.judge(half, old, min_change_percent=10, p_value=0.05).regressed
    return false_alarms, detections


@pytest.mark.parametrize(
    ("cv", "max_false_alarms", "min_detections"),
    [
        (0.05, 0.01 * TRIALS, TRIALS),  # a steady link: the 10 % floor keeps alarms rare
        (0.10, 0.05 * TRIALS, TRIALS),
        (0.20, 0.06 * TRIALS, 0.99 * TRIALS),  # n = 3 against 15: Welch's df is small
        (0.40, 0.06 * TRIALS, 0.80 * TRIALS),  # kind's CV (Karpenter #2997): power drops
    ],
)
def test_false_alarm_rate_and_power_on_synthetic_samples(cv, max_false_alarms, min_detections):
    false_alarms, detections = rates(cv)
    assert false_alarms <= max_false_alarms
    assert detections >= min_detections
