"""The operators' notion of "now": the system clock, optionally shifted (tests and demos).

Controllers that act on time (TDSet's schedule, Netperf's timeouts) take ``now`` from a
``Clock`` instead of calling ``datetime.now()`` themselves, so the pure parts are tested
with any instant and a whole operator process can be run "at" another time of day.

``OPERATOR_CLOCK_OFFSET`` (seconds, may be negative or fractional) shifts the clock of a whole
process. Time still advances at the real rate, so asyncio timers computed from the shifted
clock fire at the right shifted instant. Integration tests use it to put a schedule boundary a
few seconds ahead, or to start an operator "during" a DST transition; production leaves it unset.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from dataclasses import dataclass

OFFSET_ENV = "OPERATOR_CLOCK_OFFSET"


@dataclass(frozen=True)
class Clock:
    """UTC wall-clock time plus a fixed offset."""

    offset: datetime.timedelta = datetime.timedelta(0)

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.UTC) + self.offset

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Clock:
        raw = (os.environ if env is None else env).get(OFFSET_ENV, "").strip()
        if not raw:
            return cls()
        try:
            seconds = float(raw)
        except ValueError as exc:
            raise ValueError(f"{OFFSET_ENV} must be a number of seconds, not {raw!r}") from exc
        return cls(datetime.timedelta(seconds=seconds))
