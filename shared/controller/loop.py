"""One object's reconcile loop: woken by kicks (`Triggers`), it runs a pass whenever one is due,
waits for a slot first (`FairSlots`), backs off after a failure (a `RetryError` no later than
its `not_after`; a `TerminalError` not at all), and ends when the object is gone."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable

from shared.api.errors import RetryError, SupersededError, TerminalError
from shared.controller.metrics import Metrics
from shared.controller.retry import DEFAULT, Backoff
from shared.controller.slots import FairSlots

Reconcile = Callable[[], Awaitable[float | None]]
GATE_POLL = 0.1  # seconds between looks at a closed gate


class Triggers:
    """Wake-up events per loop key (a ``Request`` in a Controller); lives on one event loop."""

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


def _capped(after: float | None, most: float | None) -> float | None:
    """``after`` (None: forever), but no more than ``most`` (None: no bound)."""
    if most is None:
        return after
    return most if after is None else min(after, most)


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
    slots: FairSlots | None = None,
    group: Hashable = None,
    park: Callable[[float | None], None] | None = None,
    due: float | None = None,
) -> None:
    """Run ``reconcile`` for ``key`` until ``stopped()``; see the module docstring.

    ``max_idle`` bounds how long the loop sleeps without a kick (a safety net resync). Each
    pass first takes one of ``slots`` (shared by the loops of one controller), waiting in
    ``group`` (the key's namespace), and gives it back when it ends, before the loop sleeps.
    With ``due``, the first pass's slot is already held, handed to the key in the queue where
    it waited since ``due`` (``FairSlots.take_or_queue``); the loop gives it back.

    With ``park``, a loop that would sleep after a pass that did not fail (and was not kicked
    meanwhile) returns instead, calling ``park(seconds)`` (None: until a kick) first; one that
    must run again at once (kicked during its pass, or cut short) but finds no slot free returns
    too, calling ``park(0)`` (the caller queues its key for a slot). The caller starts a new
    loop on the next kick, when the seconds are up, or when a slot is handed to the key. An
    idle loop costs a task, an event and their frames, about 4 KB, for every object of a
    cluster, and so does one waiting for a slot; a parked one costs nothing, or a timer, or a
    place in the queue. A failing loop keeps its task (its backoff counts its consecutive
    failures) and waits for its slot with it.
    """
    event = triggers.event(key)
    failures = 0
    held = slots is not None and due is not None  # the first pass's slot, handed in the queue
    parked = False
    try:
        while not parked and not stopped():
            if due is None:
                due = time.monotonic()
            if slots is not None and not held:
                if not await _take_slot(slots, group, None if failures else park):
                    break
                held = True
            try:
                if stopped():  # gone while waiting for a slot
                    break
                # Cleared only now: kicks that came while waiting for a slot are seen by this pass.
                event.clear()
                started = time.monotonic()
                if metrics is not None:
                    metrics.queue_duration.labels(controller, controller).observe(started - due)
                after, failures, outcome = await _one_pass(
                    reconcile,
                    failures,
                    backoff=backoff,
                    logger=logger,
                    metrics=metrics,
                    controller=controller,
                )
            finally:
                if slots is not None and held:
                    held = False
                    slots.release(group)
            due = None
            if metrics is not None:
                metrics.observe(controller, outcome[0], time.monotonic() - started, outcome[1])
            parked = await _idle(event, _capped(after, max_idle), None if failures else park)
    finally:
        if slots is not None and held:
            slots.release(group)  # handed a slot, never ran a pass: stopped before it
        triggers.forget(key)


async def _take_slot(slots: FairSlots, group: Hashable, park: Callable[[float | None], None] | None) -> bool:
    """Take a slot for the next pass, waiting for it; with ``park``, only if one is free now:
    else ``park(0)`` queues the key (no task waits for a slot) and the loop ends (False)."""
    if park is None:
        await slots.acquire(group)
        return True
    if slots.try_acquire(group):
        return True
    park(0.0)
    return False


async def _one_pass(
    reconcile: Reconcile,
    failures: int,
    *,
    backoff: Backoff,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None,
    metrics: Metrics | None,
    controller: str,
) -> tuple[float | None, int, tuple[str, BaseException | None]]:
    """One call of ``reconcile``, an active worker meanwhile: when to look again, the
    consecutive failures since, and the outcome (controller-runtime's result, and the error)."""
    if metrics is not None:
        metrics.active_workers.labels(controller).inc()
    try:
        after = await reconcile()
    except asyncio.CancelledError:
        raise
    except SupersededError:
        return 0.0, failures, ("requeue", None)
    except TerminalError as exc:  # reported, and no retry can fix it: the next change runs a pass
        if logger is not None:
            logger.warning(f"reconcile failed, not retried until the object changes: {exc}")
        return None, failures, ("error", exc)
    except Exception as exc:
        after = backoff.delay(failures)
        if isinstance(exc, RetryError) and exc.not_after is not None:
            after = min(after, exc.not_after)
        failures += 1
        if logger is not None:
            logger.warning(f"reconcile failed (attempt {failures}, retrying in {after:.3g}s): {exc}")
        return after, failures, ("error", exc)
    finally:
        if metrics is not None:
            metrics.active_workers.labels(controller).dec()
    return after, 0, ("success" if after is None else "requeue_after", None)


async def _idle(
    event: asyncio.Event, timeout: float | None, park: Callable[[float | None], None] | None
) -> bool:
    """Between two passes: park (True) if ``park`` is given, the wait is not zero and no kick
    came during the pass; else wait for a kick or ``timeout`` (False)."""
    if park is not None and timeout != 0 and not event.is_set():
        park(timeout)
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=timeout)
    return False
