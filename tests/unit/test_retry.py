import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.retry import DEFAULT, Backoff


def test_default_follows_client_go_rate_limiter():
    assert DEFAULT.delay(0) == pytest.approx(0.005)
    assert DEFAULT.delay(1) == pytest.approx(0.01)
    assert DEFAULT.delay(10) == pytest.approx(5.12)
    assert DEFAULT.delay(17) == pytest.approx(655.36)
    assert DEFAULT.delay(18) == 1000.0
    assert DEFAULT.delay(10_000) == 1000.0


def test_negative_attempt_rejected():
    with pytest.raises(ValueError):
        DEFAULT.delay(-1)


@given(st.integers(0, 200))
def test_monotonic_and_capped(attempt):
    b = Backoff(base=0.1, cap=30)
    assert b.delay(attempt) <= b.delay(attempt + 1) <= 30
