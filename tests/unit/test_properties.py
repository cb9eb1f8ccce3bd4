"""The Hypothesis profiles: the full one keeps each test's count, the inner loop's tries a tenth."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import settings

from tests.framework import properties
from tests.framework.properties import examples

TESTS = Path(__file__).resolve().parents[1]


def test_the_full_profile_keeps_each_count_and_dev_tries_a_tenth():
    current = settings.get_current_profile_name()
    try:
        settings.load_profile(properties.FULL)
        assert [examples(n) for n in (1, 5, 40, 100, 300)] == [1, 5, 40, 100, 300]
        assert settings.default.max_examples == 100 and settings.default.deadline is None
        settings.load_profile(properties.DEV)
        assert [examples(n) for n in (1, 5, 40, 100, 300)] == [1, 1, 4, 10, 30]
        assert settings.default.deadline is None
    finally:
        settings.load_profile(current)


def test_no_test_names_a_count_the_profile_cannot_scale():
    bare = re.compile(r"max_examples=\d")
    found = [str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py") if bare.search(p.read_text())]
    assert found == []
