"""The retry policy shared by all operators: per-object exponential backoff with jitter.

In the spirit of client-go's default controller rate limiter (5 ms * 2^failures, capped at
1000 s): the first retries come after milliseconds, so a transient conflict costs nothing,
while a persistent failure backs off to minutes instead of hammering the API server. Callers
count the failures of each object themselves (``shared.controller.workqueue`` in its loop), so
the policy needs no memory of its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Backoff:
    """``min(cap, base * factor**attempt) * U[1, 1 + jitter)`` seconds. ``attempt`` counts from 0.

    Bounds: ``steady(attempt) <= delay(attempt) <= steady(attempt) * (1 + jitter)``, hence never
    more than ``cap * (1 + jitter)``. ``jitter=0`` gives the plain exponential schedule.

    Jitter: objects that failed together (an API server outage, a webhook down) have the same
    failure count, so a plain exponential schedule retries them all in the same instant, again and
    again, and the recovering server gets every object at once. Each delay is therefore stretched
    by a random factor in ``[1, 1 + jitter)`` (client-go's ``wait.Jitter``), applied after the cap
    so objects stuck at the cap spread out too. Why proportional jitter and not AWS's "full
    jitter" (uniform in ``[0, delay)``): full jitter can retry at once after any number of failures,
    so it gives up the one promise the backoff makes to the API server (at least this long between
    attempts); a factor >= 1 keeps that lower bound and the schedule that logs and docs show. The
    default 0.1 spreads a burst over a tenth of the delay (100 s at the cap), enough to break the
    lock-step, which compounds with every further retry, while each delay stays within 10 % of the
    documented schedule. The random source is injectable, so tests are deterministic.
    """

    base: float = 0.005
    factor: float = 2.0
    cap: float = 1000.0
    jitter: float = 0.1
    # A generator of its own, seeded from the OS; tests pass a seeded random.Random.
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.jitter < 0:
            raise ValueError("jitter must be >= 0")

    def steady(self, attempt: int) -> float:
        """The delay without jitter: the documented schedule, and the lower bound of ``delay``."""
        if attempt < 0:
            raise ValueError("attempt must be >= 0")
        # Compare exponents rather than computing huge powers for large attempt counts.
        if attempt > 64:
            return self.cap
        return min(self.cap, self.base * self.factor**attempt)

    def delay(self, attempt: int) -> float:
        steady = self.steady(attempt)
        if not self.jitter:
            return steady
        return steady * (1 + self.jitter * self.rng.random())


DEFAULT = Backoff()
