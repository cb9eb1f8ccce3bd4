import datetime

import pytest

from shared.api.clock import OFFSET_ENV, Clock


def test_unset_means_no_offset():
    assert Clock.from_env({}).offset == datetime.timedelta(0)
    assert Clock.from_env({OFFSET_ENV: "  "}).offset == datetime.timedelta(0)


def test_offset_shifts_now():
    clock = Clock.from_env({OFFSET_ENV: "-3600.5"})
    assert clock.offset == datetime.timedelta(seconds=-3600.5)
    shifted = clock.now()
    real = datetime.datetime.now(datetime.UTC)
    assert shifted.tzinfo is not None
    assert real - shifted >= datetime.timedelta(seconds=3600)


def test_garbage_is_refused_with_the_variable_name():
    with pytest.raises(ValueError, match=OFFSET_ENV):
        Clock.from_env({OFFSET_ENV: "tomorrow"})
