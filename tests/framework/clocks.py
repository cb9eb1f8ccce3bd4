"""A stand-in for the operators' clock in tests of one pass: ``FrozenClock`` always answers the
same instant, so a delay a pass returns is exactly what its logic computed, however long the
machine took to run it (``shared.api.clock.Clock`` moves with the wall clock)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from shared.api.clock import Clock


@dataclass(frozen=True)
class FrozenClock(Clock):
    """``now`` is always ``at`` (``offset`` is not used)."""

    at: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))

    def now(self) -> datetime.datetime:
        return self.at
