"""The change-point regression detector: examples and properties over its whole input space.

How often it is wrong on noisy series (false alarms per 720 runs, runs to detect a drop) is a
benchmark figure (tools/bench/regression_detector.py, docs/benchmarks.md), not asserted here.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.netperf import detector, schedule
from tests.framework.properties import examples

DEFAULTS = detector.Options()

LEVELS = st.floats(1.0, 1e11)
OPTIONS = st.builds(
    detector.Options,
    direction=st.sampled_from(detector.DIRECTIONS),
    min_change_percent=st.floats(1, 100),
    p_value=st.floats(0.0001, 0.5),
)


def noisy(level: float, n: int, spread: float):
    """``n`` values within ``spread`` of ``level``."""
    return st.lists(st.floats(1 - spread, 1 + spread), min_size=n, max_size=n).map(
        lambda xs: [level * x for x in xs]
    )


@st.composite
def drops(draw, factor: float = 0.3):
    """A level held for 6 to 23 runs, then a sustained change to ``factor`` of it for 3 to 10
    runs, each run within 4 % of its level (no two runs of a level differ by the default
    minimum effect): (values, index of the first changed run)."""
    level = draw(LEVELS)
    before = draw(noisy(level, draw(st.integers(6, 23)), spread=0.04))
    after = draw(noisy(level * factor, draw(st.integers(3, 10)), spread=0.04))
    return before + after, len(before)


def test_a_halved_link_is_flagged_from_the_run_it_halved():
    values = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 50.0]
    v = detector.judge(values, DEFAULTS)
    assert v is not None and v.regressed and v.change_index == 6
    assert (
        v.old_mean == pytest.approx(100.0) and v.new_mean == 50.0 and v.change_percent == pytest.approx(-50.0)
    )
    assert v.baseline_runs == 6 and v.p_value < DEFAULTS.p_value
    assert "-50.0 %" in v.summary()


def test_too_little_history_is_not_judged():
    assert detector.judge([], DEFAULTS) is None
    assert detector.judge([1.0], DEFAULTS) is None
    assert detector.judge([1.0, 0.1], DEFAULTS) is None  # one baseline run: no variance
    assert detector.judge([0.1], DEFAULTS, pinned=[1.0, 1.01]) is not None


def test_a_pinned_baseline_judges_every_run_against_it():
    v = detector.judge([50.0, 51.0, 49.0], DEFAULTS, pinned=[100.0, 101.0, 99.0, 100.0])
    assert v is not None and v.regressed and v.change_index == 0 and v.baseline_runs == 4


def test_one_low_run_of_a_noisy_link_is_not_yet_a_regression_three_are():
    base = [100.0, 112.0, 91.0, 104.0, 96.0, 108.0, 89.0, 103.0, 97.0, 100.0]
    one = detector.judge([*base, 80.0], DEFAULTS)
    assert one is not None and not one.regressed
    three = detector.judge([*base, 80.0, 79.0, 81.0], DEFAULTS)
    assert three is not None and three.regressed and three.change_index == len(base)


def test_change_points_split_where_the_level_moves():
    wobble = (0.0, 0.1, -0.1, 0.0, -0.05, 0.05)
    values = [level + w for level in (10.0, 20.0, 5.0) for w in wobble]
    assert detector.change_points(values, DEFAULTS) == [6, 12]
    assert detector.change_points([10.0] * 12, DEFAULTS) == []


@settings(max_examples=examples(200), deadline=None)
@given(level=LEVELS, n=st.integers(1, 60), options=OPTIONS, pinned=st.booleans())
def test_a_constant_series_never_flags(level, n, options, pinned):
    v = detector.judge([level] * n, options, pinned=[level] * 3 if pinned else ())
    assert v is None or not v.regressed
    assert detector.change_points([level] * n, options) == []


@settings(max_examples=examples(200), deadline=None)
@given(series=drops())
def test_a_huge_sustained_drop_is_always_flagged_from_its_first_run(series):
    values, first = series
    v = detector.judge(values, DEFAULTS)
    assert v is not None and v.regressed and v.change_index == first
    # The regressed runs are kept out of the baseline they are judged against.
    assert v.baseline_runs <= first
    assert min(values[:first]) <= v.old_mean <= max(values[:first])


@settings(max_examples=examples(150), deadline=None)
@given(series=drops())
def test_direction_is_respected(series):
    values, _ = series

    def verdict(series, direction):
        v = detector.judge(series, detector.Options(direction=direction))
        assert v is not None
        return v

    assert verdict(values, "Either").regressed and verdict(values, "Decrease").regressed
    assert not verdict(values, "Increase").regressed
    # The mirror image: the same series upside down is a rise.
    top = max(values)
    risen = [top * top / v for v in values]
    assert verdict(risen, "Increase").regressed and verdict(risen, "Either").regressed
    assert not verdict(risen, "Decrease").regressed


@settings(max_examples=examples(150), deadline=None)
@given(
    level=LEVELS,
    n=st.integers(3, 20),
    k=st.integers(1, 10),
    drop=st.floats(0.0, 0.99),
    options=OPTIONS,
)
def test_a_change_smaller_than_the_minimum_effect_never_flags(level, n, k, drop, options):
    """Steady levels (no noise: every test significant), a drop below the minimum effect."""
    change = min(drop, options.min_change_percent / 100 * 0.999)
    values = [level] * n + [level * (1 - change)] * k
    v = detector.judge(values, options)
    assert v is not None and not v.regressed


@settings(max_examples=examples(100), deadline=None)
@given(series=drops())
def test_an_acknowledged_change_is_not_flagged(series):
    """Acknowledging the run the drop began at: the runs before it are no baseline."""
    values, first = series
    history = [
        {"run": i + 1, "result": "Done", "testType": "TCP_STREAM", "measurement": "m", "samples": [v]}
        for i, v in enumerate(values)
    ]
    *earlier, latest = history
    flagged = schedule.verdict(earlier, latest, schedule.Settings())
    assert isinstance(flagged, schedule.Judgement) and flagged.regressed and flagged.change_run == first + 1
    accepted = schedule.verdict(earlier, latest, schedule.Settings(acknowledged_run=first + 1))
    assert isinstance(accepted, schedule.NotJudged) or not accepted.regressed


@settings(max_examples=examples(100), deadline=None)
@given(series=drops(), recovered=st.integers(1, 5), data=st.data())
def test_a_recovery_clears_the_regression_at_once(series, recovered, data):
    values, _ = series
    back = data.draw(noisy(values[0], recovered, spread=0.02))
    v = detector.judge(values + back, DEFAULTS)
    assert v is not None and not v.regressed


@settings(max_examples=examples(100), deadline=None)
@given(
    values=st.lists(st.floats(0.0, 1e12), min_size=0, max_size=40),
    options=OPTIONS,
    scale=st.floats(1e-3, 1e3),
)
def test_the_verdict_is_deterministic_and_does_not_depend_on_the_unit(values, options, scale):
    first = detector.judge(values, options)
    assert first == detector.judge(list(values), options)
    scaled = detector.judge([v * scale for v in values], options)
    assert (first is None) == (scaled is None)
    if first is not None and scaled is not None:
        assert (first.regressed, first.change_index) == (scaled.regressed, scaled.change_index)
        assert scaled.old_mean == pytest.approx(first.old_mean * scale, rel=1e-9, abs=1e-300)
