"""The retry policy shared by all operators: per-object exponential backoff.

In the spirit of client-go's default controller rate limiter (5 ms * 2^failures, capped at
1000 s): the first retries come after milliseconds, so a transient conflict costs nothing,
while a persistent failure backs off to minutes instead of hammering the API server. kopf
counts the retries of each handler per object (the ``retry`` keyword argument, persisted in the
object's annotations), so the policy needs no memory of its own and survives restarts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """``base * factor**attempt`` seconds, capped at ``cap``. ``attempt`` counts from 0."""

    base: float = 0.005
    factor: float = 2.0
    cap: float = 1000.0

    def delay(self, attempt: int) -> float:
        if attempt < 0:
            raise ValueError("attempt must be >= 0")
        # Compare exponents rather than computing huge powers for large attempt counts.
        if attempt > 64:
            return self.cap
        return min(self.cap, self.base * self.factor**attempt)


DEFAULT = Backoff()
