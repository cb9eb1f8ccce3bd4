"""Waiting without sleeping: poll a condition until it holds or a deadline passes.

A wait that times out names what it waited for and the last error the probe raised. Its
deadline is what the test names times ``SLACK``: the figures in the tests are what the
step takes on an idle machine with room to spare, and the suite runs several workers, each
with a control plane, on two cores, perhaps beside a CPU hog (``make test-loaded``). A
deadline only bounds how long a failing test takes to say so; a passing one never waits for it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

SLACK = float(os.environ.get("TEST_DEADLINE_SLACK", "3"))


def wait_for(probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition") -> T:
    """Call ``probe`` until it returns something truthy; fail with ``what`` after ``timeout * SLACK``."""
    timeout *= SLACK
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = probe()
            if value:
                return value
        except Exception as exc:  # the API may answer 404 until an object appears
            last_exc = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_exc!r})" if last_exc else ""
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(0.2)
