"""A per-object reconcile loop: level-based, coalescing, with exact wake-ups.

kopf calls handlers on changes of the object itself; a controller also has to react to its
children (a pod deleted by someone else), to time (a schedule boundary) and to its own
failures (backoff). controller-runtime solves this with a work queue; here each primary object
gets one long-lived kopf daemon running :func:`reconcile_loop`:

- :meth:`Triggers.kick` (from a child's watch event, or the object's own) wakes the loop;
  kicks that arrive while a reconcile runs coalesce into exactly one more pass;
- the reconcile function returns when to look again (``None`` = only on a kick), so a
  schedule boundary is hit exactly instead of at a polling interval;
- a failing pass is retried after the shared :class:`~shared.retry.Backoff` for the number of
  consecutive failures; a success resets it.

With ``metrics``, each pass is one reconcile in controller-runtime's terms: ``success`` when
it returns ``None``, ``requeue_after`` when it returns a delay, ``error`` when it raises.

Only one pass per object runs at a time (the daemon is the only caller), so a reconcile never
races itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable

from shared.metrics import Metrics
from shared.retry import DEFAULT, Backoff

Reconcile = Callable[[], Awaitable[float | None]]


class Triggers:
    """Wake-up events per object key (usually the object's UID); lives on one event loop."""

    def __init__(self) -> None:
        self._events: dict[Hashable, asyncio.Event] = {}

    def event(self, key: Hashable) -> asyncio.Event:
        return self._events.setdefault(key, asyncio.Event())

    def kick(self, key: Hashable) -> bool:
        """Ask for one more pass for ``key``; returns whether a loop for it exists."""
        ev = self._events.get(key)
        if ev is None:
            return False
        ev.set()
        return True

    def forget(self, key: Hashable) -> None:
        self._events.pop(key, None)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._events


async def reconcile_loop(
    key: Hashable,
    reconcile: Reconcile,
    triggers: Triggers,
    stopped: Callable[[], bool],
    *,
    backoff: Backoff = DEFAULT,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
    max_idle: float | None = None,
    metrics: Metrics | None = None,
    controller: str = "",
) -> None:
    """Run ``reconcile`` for ``key`` until ``stopped()``; see the module docstring.

    ``max_idle`` bounds how long the loop sleeps without a kick (a safety net resync).
    """
    event = triggers.event(key)
    failures = 0
    try:
        while not stopped():
            event.clear()
            started = time.monotonic()
            if metrics is not None:
                metrics.active_workers.labels(controller).inc()
            try:
                after = await reconcile()
                failures = 0
                outcome: tuple[str, BaseException | None] = (
                    "success" if after is None else "requeue_after",
                    None,
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                after = backoff.delay(failures)
                failures += 1
                outcome = ("error", exc)
                if logger is not None:
                    logger.warning(f"reconcile failed (attempt {failures}, retrying in {after:.3g}s): {exc}")
            finally:
                if metrics is not None:
                    metrics.active_workers.labels(controller).dec()
            if metrics is not None:
                metrics.observe(controller, outcome[0], time.monotonic() - started, outcome[1])
            if max_idle is not None:
                after = max_idle if after is None else min(after, max_idle)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=after)
    finally:
        triggers.forget(key)
