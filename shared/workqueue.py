"""A per-object reconcile loop: level-based, coalescing, with exact wake-ups.

kopf calls handlers on changes of the object itself; a controller also has to react to its
children (a pod deleted by someone else), to time (a schedule boundary) and to its own
failures (backoff). controller-runtime solves this with a work queue; here each primary object
gets one long-lived task running :func:`reconcile_loop` (see :class:`Controller`):

- :meth:`Triggers.kick` (from a child's watch event, or the object's own) wakes the loop;
  kicks that arrive while a reconcile runs coalesce into exactly one more pass;
- the reconcile function returns when to look again (``None`` = only on a kick), so a
  schedule boundary is hit exactly instead of at a polling interval;
- a failing pass is retried after the shared :class:`~shared.retry.Backoff` for the number of
  consecutive failures; a success resets it. A pass that failed in part but has a deadline of
  its own (a schedule boundary) raises :class:`RetryError` with ``not_after``: it is retried
  no later than that, however long the backoff has grown, so an optional part that keeps
  failing never delays what must happen on time.

With ``metrics``, each pass is one reconcile in controller-runtime's terms: ``success`` when
it returns ``None``, ``requeue_after`` when it returns a delay, ``error`` when it raises.

Only one pass per object runs at a time (its loop is the only caller), so a reconcile never
races itself. Across objects, :class:`Controller` runs at most ``max_concurrent_reconciles``
passes at once (controller-runtime's option of that name): after a restart or an outage every
object wants a pass at the same moment, and without a bound they would all hit the API server
(and this process's memory) together. The bound is a semaphore taken per pass, not per object,
so an idle object (its loop waiting for a kick or a deadline) holds no slot, and
``controller_runtime_active_workers`` counts the passes that hold one, not those waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

from shared.caches import OwnerCache
from shared.metrics import Metrics
from shared.ownership import INSTANCE
from shared.retry import DEFAULT, Backoff

Reconcile = Callable[[], Awaitable[float | None]]

# controller-runtime defaults to 1 worker, because each worker there is a goroutine that blocks
# on every API call. Our passes are coroutines that mostly wait for the API server, so several
# overlap on one thread for free, and one slow object (a 60 s request timeout, a big rollout)
# must not stall every other object behind it. 8 keeps that while bounding how many objects
# are worked on at once after a restart; how fast their requests go out is the business of the
# client's rate limiter (shared.kube), which a WebServer's batch of pod creates goes through too.
DEFAULT_MAX_CONCURRENT_RECONCILES = 8
GATE_POLL = 0.1  # seconds between looks at a closed gate


class RetryError(Exception):
    """A failed pass that must still run again within ``not_after`` seconds (None: backoff only)."""

    def __init__(self, message: str, not_after: float | None = None) -> None:
        super().__init__(message)
        self.not_after = not_after


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
    slots: asyncio.Semaphore | None = None,
) -> None:
    """Run ``reconcile`` for ``key`` until ``stopped()``; see the module docstring.

    ``max_idle`` bounds how long the loop sleeps without a kick (a safety net resync). Each
    pass first takes one of ``slots`` (shared by the loops of one controller) and gives it back
    when it ends, before the loop sleeps.
    """
    event = triggers.event(key)
    failures = 0
    slot: contextlib.AbstractAsyncContextManager[Any] = (
        slots if slots is not None else contextlib.nullcontext()
    )
    try:
        while not stopped():
            async with slot:
                if stopped():  # gone while waiting for a slot
                    break
                # Cleared only now: kicks that came while waiting for a slot are seen by this pass.
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
                    if isinstance(exc, RetryError) and exc.not_after is not None:
                        after = min(after, exc.not_after)
                    failures += 1
                    outcome = ("error", exc)
                    if logger is not None:
                        logger.warning(
                            f"reconcile failed (attempt {failures}, retrying in {after:.3g}s): {exc}"
                        )
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


ReconcileBody = Callable[[Mapping[str, Any]], Awaitable[float | None]]


class Controller:
    """One :func:`reconcile_loop` task per primary object, fed by kopf watch events.

    Why not ``@kopf.daemon``: kopf puts a finalizer on every object that has a daemon, so a
    user cannot delete a resource (or uninstall the operator cleanly) while the operator is
    down, and kopf's finalizer patch races with our own status writes. Here the watch event
    handler keeps the latest body of each object and a task per object; deleting the object
    just ends its task, and the garbage collector takes care of the children.

    At most ``max_concurrent_reconciles`` passes run at once over all objects (see the module
    docstring); with ``metrics`` the limit is reported as
    ``controller_runtime_max_concurrent_reconciles``.
    """

    def __init__(
        self,
        name: str,
        reconcile: ReconcileBody,
        *,
        metrics: Metrics | None = None,
        backoff: Backoff = DEFAULT,
        max_idle: float | None = None,
        logger: logging.Logger | None = None,
        gate: Callable[[], bool] | None = None,
        max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES,
    ) -> None:
        self.name = name
        self._gate = gate
        self.triggers = Triggers()
        self._reconcile = reconcile
        self._metrics = metrics
        self._backoff = backoff
        self._max_idle = max_idle
        self._logger = logger or logging.getLogger(f"controller.{name}")
        self._bodies: dict[str, Mapping[str, Any]] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._uids: dict[tuple[str, str], str] = {}  # (namespace, name) -> UID of the live object
        # Made on first use, on the loop that runs the passes (asyncio primitives bind to one
        # loop; the operators build their Controller at import time, before kopf's loop exists).
        self._slots: asyncio.Semaphore | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self._max_concurrent = 0
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self._gate_poll: asyncio.Task[None] | None = None

    @property
    def max_concurrent_reconciles(self) -> int:
        return self._max_concurrent

    @max_concurrent_reconciles.setter
    def max_concurrent_reconciles(self, value: int) -> None:
        """Set the limit before the first object is observed (the runtime applies its option at
        start-up); running loops keep the slots they were started with."""
        if value < 1:
            raise ValueError(f"max_concurrent_reconciles must be >= 1, not {value}")
        if self._tasks:
            raise RuntimeError("max_concurrent_reconciles must be set before any object is observed")
        self._max_concurrent = value
        self._slots = None
        if self._metrics is not None:
            self._metrics.max_concurrent.labels(self.name).set(value)

    def _pass_slots(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:
            self._slots, self._slots_loop = asyncio.Semaphore(self._max_concurrent), loop
        return self._slots

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Feed one watch event of a primary object (call from an async kopf event handler)."""
        meta = body.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if event_type == "DELETED":
            if self._uids.get(key) == uid:
                del self._uids[key]
            self._bodies.pop(uid, None)
            task = self._tasks.pop(uid, None)
            if task is not None:
                task.cancel()
            return
        self._bodies[uid] = body
        self._uids[key] = uid
        if uid not in self._tasks or self._tasks[uid].done():
            self._tasks[uid] = asyncio.create_task(self._run(uid), name=f"{self.name}/{meta.get('name')}")
        else:
            self.triggers.kick(uid)

    def kick(self, uid: str) -> None:
        self.triggers.kick(uid)

    def child_changed(self, cache: OwnerCache, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Feed a child's watch event to ``cache`` and wake whom it concerns: its controller,
        and the object now holding the name in its instance label (see :meth:`kick_name`)."""
        owner = cache.observe(event_type, body)
        if owner is not None:
            self.kick(owner)
        meta = body.get("metadata") or {}
        instance = (meta.get("labels") or {}).get(INSTANCE)
        if instance:
            self.kick_name(meta.get("namespace") or "", instance)

    def kick_name(self, namespace: str, name: str) -> None:
        """Wake the object now called ``name``, whatever its UID: a child's event can matter to
        an owner that is not (yet) its controller (an orphan to adopt; a name held by the
        terminating child of a deleted predecessor, now free)."""
        uid = self._uids.get((namespace, name))
        if uid is not None:
            self.triggers.kick(uid)

    def body(self, uid: str) -> Mapping[str, Any] | None:
        return self._bodies.get(uid)

    async def _gate_opened(self) -> None:
        """Wait until ``gate()`` is true. One poll for all objects, not one each: a standby
        (leader election) may wait for hours with thousands of objects."""
        gate = self._gate
        if gate is None or gate():
            return

        async def poll() -> None:
            while not gate():
                await asyncio.sleep(GATE_POLL)

        poll_task = self._gate_poll
        if poll_task is None or poll_task.done() or poll_task.get_loop() is not asyncio.get_running_loop():
            self._gate_poll = asyncio.create_task(poll(), name=f"{self.name}/gate")
        # Shielded: a waiter cancelled (its object deleted) leaves the poll to the others.
        await asyncio.shield(self._gate_poll)

    async def _run(self, uid: str) -> None:
        await self._gate_opened()

        async def once() -> float | None:
            body = self._bodies.get(uid)
            if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
                # Being deleted (foreground, or orphaning its children): like the ReplicaSet
                # controller, create and adopt nothing more; what is left is the collector's.
                return None
            return await self._reconcile(body)

        await reconcile_loop(
            uid,
            once,
            self.triggers,
            lambda: uid not in self._bodies,
            backoff=self._backoff,
            logger=self._logger,
            max_idle=self._max_idle,
            metrics=self._metrics,
            controller=self.name,
            slots=self._pass_slots(),
        )

    async def shutdown(self) -> None:
        if self._gate_poll is not None:
            self._gate_poll.cancel()
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
