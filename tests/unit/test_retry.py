import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.controller.retry import DEFAULT, Backoff


def test_default_follows_client_go_rate_limiter():
    steady = Backoff(jitter=0)  # the schedule without jitter
    assert steady.delay(0) == pytest.approx(0.005)
    assert steady.delay(1) == pytest.approx(0.01)
    assert steady.delay(10) == pytest.approx(5.12)
    assert steady.delay(17) == pytest.approx(655.36)
    assert steady.delay(18) == 1000.0
    assert steady.delay(10_000) == 1000.0
    assert (DEFAULT.base, DEFAULT.factor, DEFAULT.cap) == (steady.base, steady.factor, steady.cap)


def test_negative_attempt_rejected():
    with pytest.raises(ValueError):
        DEFAULT.delay(-1)
    with pytest.raises(ValueError):
        Backoff(jitter=-0.1)


@given(st.integers(0, 200))
def test_monotonic_and_capped_without_jitter(attempt):
    b = Backoff(base=0.1, cap=30, jitter=0)
    assert b.delay(attempt) <= b.delay(attempt + 1) <= 30


def test_objects_that_failed_together_do_not_retry_together():
    """Two objects at the same attempt (an outage failed both) get different delays."""
    first = Backoff(rng=random.Random(1)).delay(10)
    second = Backoff(rng=random.Random(2)).delay(10)
    assert first != second


@given(st.integers(0, 200), st.integers(0, 2**32), st.sampled_from([0.0, 0.1, 0.5, 1.0]))
def test_jittered_delay_stays_within_documented_bounds(attempt, seed, jitter):
    """``[min(cap, base*factor**n), min(cap, base*factor**n) * (1 + jitter)]``, so never above
    ``cap * (1 + jitter)``: jitter only lengthens a delay, it never shortens the backoff."""
    b = Backoff(base=0.1, cap=30, jitter=jitter, rng=random.Random(seed))
    low = min(30, 0.1 * 2**attempt)
    delay = b.delay(attempt)
    assert low <= delay <= low * (1 + jitter) <= 30 * (1 + jitter)
    assert b.steady(attempt) == pytest.approx(low)


def test_seeded_random_is_deterministic():
    a, b = Backoff(rng=random.Random(42)), Backoff(rng=random.Random(42))
    assert [a.delay(n) for n in range(20)] == [b.delay(n) for n in range(20)]
