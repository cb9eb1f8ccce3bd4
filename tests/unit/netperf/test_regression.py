"""Student's t distribution (what the change-point detector tests with) against reference values."""

from __future__ import annotations

import math

import pytest

from operators.netperf import regression


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
