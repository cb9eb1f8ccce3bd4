"""Waiting without sleeping: poll a condition until it holds or a deadline passes.

Deadlines are sized for a loaded 2-core machine running several control planes at once (the
suite runs in parallel workers): a wait that times out names what it waited for and the last
error the probe raised, never a duration the test expected.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition") -> T:
    """Call ``probe`` until it returns something truthy; fail with ``what`` after ``timeout``."""
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
