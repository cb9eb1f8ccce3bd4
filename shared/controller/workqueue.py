"""Reconcile loops keyed by namespace/name: level-based, coalescing, with exact wake-ups.

kopf calls handlers on changes of the object itself; a controller also has to react to its
children, to time (a schedule boundary) and to its own failures (backoff). ``Controller`` keeps
one loop per ``Request`` (namespace and name, no body: each pass reads the latest stored body):
kicks coalesce into one more pass, a pass returns when to look again, a failing pass backs off
(``shared.controller.retry``), and a pass for an object deleted or replaced under its name is
cut short (``SupersededError``). At most ``max_concurrent_reconciles`` passes run at once, the
slots shared round-robin across namespaces (``FairSlots``) so one busy tenant cannot starve
the others. Tasks exist only for running passes and backing-off loops, not per idle object.
The details, and why the key is the name and not the UID: ``Controller``'s docstring and
``shared.controller.loop``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from shared.api.errors import SupersededError
from shared.api.ownership import INSTANCE
from shared.api.versions import is_later
from shared.controller import informer
from shared.controller.caches import OwnerCache
from shared.controller.loop import (
    GATE_POLL,
    Triggers,
    reconcile_loop,
)
from shared.controller.metrics import Metrics
from shared.controller.retry import DEFAULT, Backoff
from shared.controller.slots import FairSlots

# controller-runtime defaults to 1 worker, because each worker there is a goroutine that blocks
# on every API call. Our passes are coroutines that mostly wait for the API server, so several
# overlap on one thread for free, and one slow object (a 60 s request timeout, a big rollout)
# must not stall every other object behind it. 8 keeps that while bounding how many objects
# are worked on at once after a restart; how fast their requests go out is the business of the
# client's rate limiter (shared.client.kube), which a WebServer's batch of pod creates goes through too.
DEFAULT_MAX_CONCURRENT_RECONCILES = 8


class Request(NamedTuple):
    """What a reconcile loop is for: an object's namespace and name, whatever its UID."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def request_of(body: Mapping[str, Any]) -> Request:
    meta = body.get("metadata") or {}
    return Request(meta.get("namespace") or "", meta.get("name") or "")


def uid_of(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("uid") or "")


# What a pass reads of its primary object besides the spec: a change to any of these wakes it.
_WAKING_METADATA = (
    "generation",
    "labels",
    "annotations",
    "deletionTimestamp",
    "finalizers",
    "ownerReferences",
)


def only_status_changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether ``after`` is ``before`` with only its status (and bookkeeping: resourceVersion,
    managedFields) changed: most often the echo of the operator's own status write.

    With an ``echo`` test (``Controller``), such an event that carries the status the
    operator last wrote updates the store but wakes no pass: each status write came back as
    one more pass that found nothing to do (1000 TDSets flipping at one boundary spent 60.8 s
    of CPU with those passes, 51.2 s without). Any other status change (written by someone
    else, or an older write of ours arriving after a newer one was decided) wakes a pass, which
    writes the status again if it is wrong.
    """
    if uid_of(before) != uid_of(after) or before.get("spec") != after.get("spec"):
        return False
    a, b = before.get("metadata") or {}, after.get("metadata") or {}
    return all(a.get(key) == b.get(key) for key in _WAKING_METADATA)


ReconcileBody = Callable[[Mapping[str, Any]], Awaitable[float | None]]
ForgetUid = Callable[[str], None]
ForgetName = Callable[[str, str], None]


@dataclass
class _Pass:
    """The pass in flight for a request: the UID of the body it works on, and its task."""

    uid: str
    task: asyncio.Future[float | None]
    superseded: bool = False


class Controller:
    """A ``reconcile_loop`` task per ``Request`` whose pass runs (or that backs off
    after a failure), fed by kopf watch events; idle requests are parked (no task: ``_wake``
    queues one, a timer for a delay), and due ones wait for a slot as keys in the queue of
    ``FairSlots``, their task started when the slot is handed to them.

    The store (``observe``) holds the latest body under each namespace/name, as the watch
    says: a later UID under a name replaces the earlier object (``is_later``; the earlier
    one's late events are then ignored); a DELETED event clears the name only if it is of the
    object the name holds. The loop of a request reads its body from the store at the start of
    each pass.

    Why not ``@kopf.daemon``: kopf puts a finalizer on every object that has a daemon, so a
    user cannot delete a resource (or uninstall the operator cleanly) while the operator is
    down, and kopf's finalizer patch races with our own status writes. Here deleting the object
    just ends its loop, and the garbage collector takes care of the children.

    At most ``max_concurrent_reconciles`` passes run at once over all requests, the slots that
    come free shared round-robin among the namespaces whose requests wait, and no namespace
    holding the last one (see the module docstring); with ``metrics`` the limit is reported as
    ``controller_runtime_max_concurrent_reconciles``.

    ``echo(body)`` tells whether a body carries the status the operator last wrote: a MODIFIED
    event that changes only that status wakes no pass (``only_status_changed``).
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
        echo: Callable[[Mapping[str, Any]], bool] | None = None,
        max_concurrent_reconciles: int = DEFAULT_MAX_CONCURRENT_RECONCILES,
    ) -> None:
        self.name = name
        self._gate = gate
        self._echo = echo
        self.triggers = Triggers()
        self._reconcile = reconcile
        self._metrics = metrics
        self._backoff = backoff
        self._max_idle = max_idle
        self._logger = logger or logging.getLogger(f"controller.{name}")
        self._bodies: dict[Request, Mapping[str, Any]] = {}  # the store: latest body per name
        self._requests: dict[str, Request] = {}  # UID of each stored body -> its request
        # UIDs replaced under their name whose DELETED has not come yet: their late events
        # (kopf hands each UID's events to its own worker, so they can come after the new
        # object's) must not bring them back.
        self._replaced: dict[str, Request] = {}
        self._tasks: dict[Request, asyncio.Task[None]] = {}
        # Idle loops end (reconcile_loop's ``park``): a request stored without a task is parked,
        # woken by the next kick (_wake), or by its timer when its pass asked to look again.
        self._timers: dict[Request, asyncio.TimerHandle] = {}
        # Woken requests waiting for a slot, without a task, and since when: each is in the
        # slots' line once (a kick of a queued request changes nothing); its task starts when a
        # slot is handed to it (_start).
        self._queued: dict[Request, float] = {}
        self._passes: dict[Request, _Pass] = {}
        self._forget_uid: list[ForgetUid] = []
        self._forget_name: list[ForgetName] = []
        # Made on first use, on the loop that runs the passes (asyncio primitives bind to one
        # loop; the operators build their Controller at import time, before kopf's loop exists).
        self._slots: FairSlots | None = None
        self._slots_loop: asyncio.AbstractEventLoop | None = None
        self._max_concurrent = 0
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self._gate_poll: asyncio.Task[None] | None = None
        if metrics is not None:
            # Read at each scrape: the passes waiting for a slot are controller-runtime's depth.
            metrics.queue_depth.labels(name, name).set_function(lambda: self.queued)

    @property
    def max_concurrent_reconciles(self) -> int:
        return self._max_concurrent

    @max_concurrent_reconciles.setter
    def max_concurrent_reconciles(self, value: int) -> None:
        """Set the limit before the first object is observed (the runtime applies its option at
        start-up); running loops keep the slots they were started with."""
        if value < 1:
            raise ValueError(f"max_concurrent_reconciles must be >= 1, not {value}")
        if self._tasks or self._queued:  # parked loops hold no slots: they start with the new ones
            raise RuntimeError("max_concurrent_reconciles must be set before any object is observed")
        self._max_concurrent = value
        self._slots = None
        if self._metrics is not None:
            self._metrics.max_concurrent.labels(self.name).set(value)

    @property
    def queued(self) -> int:
        """Passes waiting for a slot now: due (kicked, or their delay is up) but not yet running
        (requests in the queue, and failing loops whose backoff is over)."""
        return self._slots.waiting if self._slots is not None else 0

    def _pass_slots(self) -> FairSlots:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots_loop is not loop:
            self._slots, self._slots_loop = FairSlots(self._max_concurrent, self._start), loop
        return self._slots

    def on_forget(self, *, uid: ForgetUid | None = None, name: ForgetName | None = None) -> None:
        """Register what to drop when an object goes.

        ``uid(uid)`` is called once a UID no longer holds its name: deleted, or replaced by a
        new object of the same name (whose DELETED may come later: kopf does not order the
        events of different UIDs). ``name(namespace, name)`` is called when a deletion leaves
        the name free (state kept by name, such as the object's metric series; a re-create
        under the name starts it afresh).
        """
        if uid is not None:
            self._forget_uid.append(uid)
        if name is not None:
            self._forget_name.append(name)

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Feed one watch event of a primary object (call from an async kopf event handler)."""
        uid = uid_of(body)
        if not uid:
            return
        if event_type != "DELETED":
            # The store keeps it: shared keys and short strings (informer.compact), compacted
            # before the echo test so the status writer shares the stored status, not the event's.
            body = informer.compact(body)
        request = request_of(body)
        if event_type == "DELETED":
            if self._replaced.pop(uid, None) is not None:
                return  # forgotten when it was replaced
            if self._requests.get(uid) == request:
                del self._requests[uid]
                del self._bodies[request]
                self._supersede(request, uid)
                self._wake(request)  # a running loop wakes, finds the name free and ends
                self._forget(uid, request, name_free=True)
            else:
                self._forget(uid, request, name_free=False)  # never stored: its state only
            return
        if uid in self._replaced:
            return  # a late event of an object already replaced under its name
        current = self._bodies.get(request)
        if current is not None and (old := uid_of(current)) != uid:
            # Only one object holds a name at a time: of two UIDs, the earlier one is gone.
            if not is_later(body, current):
                self._replaced[uid] = request  # first seen after its successor: never stored
                self._forget(uid, request, name_free=False)
                return
            self._requests.pop(old, None)
            self._replaced[old] = request
            self._supersede(request, old)
            self._forget(old, request, name_free=False)
        self._bodies[request] = body
        self._requests[uid] = request
        if not self._is_echo(event_type, current, body):
            # A listing (a relist, a resync: no event type) wakes every object it names; a new
            # object starts its loop.
            self._wake(request)

    def _is_echo(
        self, event_type: str | None, before: Mapping[str, Any] | None, after: Mapping[str, Any]
    ) -> bool:
        """Whether a MODIFIED event only brings back the status the operator last wrote."""
        if self._echo is None or event_type != "MODIFIED" or before is None:
            return False
        return only_status_changed(before, after) and self._echo(after)

    def _forget(self, uid: str, request: Request, *, name_free: bool) -> None:
        for forget_uid in self._forget_uid:
            forget_uid(uid)
        if name_free:
            for forget_name in self._forget_name:
                forget_name(request.namespace, request.name)

    def _supersede(self, request: Request, uid: str) -> None:
        """Cut short the pass in flight for ``request`` if it works for ``uid``."""
        current = self._passes.get(request)
        if current is not None and current.uid == uid and not current.task.done():
            current.superseded = True
            current.task.cancel()
            self._logger.info(f"{request}: the pass for object {uid} is cut short, the object is gone")

    def kick(self, namespace: str, name: str) -> None:
        """Wake the loop of the object now called ``name``, whatever its UID."""
        self._wake(Request(namespace, name))

    def _wake(self, request: Request) -> None:
        """One more pass for ``request``: kick its loop, or queue it for a slot if it is parked
        (or new). Behind a closed gate none is queued: the gate's poll wakes them all once it
        opens."""
        timer = self._timers.pop(request, None)
        if timer is not None:
            timer.cancel()
        if self.triggers.kick(request) or request not in self._bodies:
            return
        task = self._tasks.get(request)
        if task is not None and not task.done():
            return  # started, not yet at its first pass: that pass is still to come
        self._queue(request)

    def _queue(self, request: Request) -> None:
        """Start the task of ``request`` if a slot is free for it, else queue it (once)."""
        if request in self._queued:
            return  # queued already: its pass will see this kick
        if self._gate is not None and not self._gate():
            self._start_gate_poll()
            return
        now = time.monotonic()
        if self._pass_slots().take_or_queue(request.namespace, request):
            self._start_task(request, now)
        else:
            self._queued[request] = now

    def _start(self, key: Hashable) -> bool:
        """A slot for a queued request (FairSlots' ``start``): start its task, which holds it.
        False when it is gone (deleted while queued, or shut down): the slot goes on."""
        request = cast(Request, key)
        due = self._queued.pop(request, None)
        if due is None or request not in self._bodies:
            return False
        if self._gate is not None and not self._gate():  # closed since: queued again once open
            self._start_gate_poll()
            return False
        self._start_task(request, due)
        return True

    def _start_task(self, request: Request, due: float) -> None:
        self._tasks[request] = asyncio.create_task(self._run(request, due), name=f"{self.name}/{request}")

    def _park(self, request: Request, seconds: float | None) -> None:
        if seconds == 0:
            self._queue(request)  # due again now (kicked during its pass): back in the line
        elif seconds is not None:
            self._timers[request] = asyncio.get_running_loop().call_later(seconds, self._wake, request)

    def request_for(self, uid: str) -> Request | None:
        """The request of the object with ``uid``: stored, or replaced under its name (whose
        successor holds the name now)."""
        return self._requests.get(uid) or self._replaced.get(uid)

    def child_changed(self, cache: OwnerCache[Any], event_type: str | None, body: Mapping[str, Any]) -> None:
        """Feed a child's watch event to ``cache`` and wake whom it concerns: the name of its
        controller, and the object now holding the name in its instance label (a child's event
        can matter to an owner that is not (yet) its controller: an orphan to adopt; a name held
        by the terminating child of a deleted predecessor, now free)."""
        owner = cache.observe(event_type, body)
        if owner is not None and (request := self.request_for(owner)) is not None:
            self._wake(request)
        meta = body.get("metadata") or {}
        instance = (meta.get("labels") or {}).get(INSTANCE)
        if instance:
            self.kick(meta.get("namespace") or "", instance)

    def body(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The latest body stored under the name (None when no object holds it)."""
        return self._bodies.get(Request(namespace, name))

    def uids(self) -> set[str]:
        """The UIDs of the objects in the store."""
        return set(self._requests)

    def _start_gate_poll(self) -> asyncio.Task[None]:
        """The one task polling ``gate`` for this controller; once it opens, every stored object
        not yet running is woken (none is queued behind the closed gate: a standby holds no task
        per object it watches). One poll for all: a restart over 3000 objects had 3000 loops
        polling every 0.1 s, and their timers took the event loop from the very listing they
        were waiting for (39 s to ready)."""
        loop = asyncio.get_running_loop()
        if self._gate_poll is None or self._gate_poll.done() or self._gate_poll.get_loop() is not loop:

            async def poll(gate: Callable[[], bool]) -> None:
                while not gate():
                    await asyncio.sleep(GATE_POLL)
                for request in list(self._bodies):
                    self._wake(request)

            self._gate_poll = loop.create_task(poll(self._gate or (lambda: True)), name=f"{self.name}/gate")
        return self._gate_poll

    async def _run(self, request: Request, due: float) -> None:
        try:
            await reconcile_loop(
                request,
                lambda: self._pass(request),
                self.triggers,
                lambda: request not in self._bodies,
                backoff=self._backoff,
                logger=self._logger,
                max_idle=self._max_idle,
                metrics=self._metrics,
                controller=self.name,
                slots=self._pass_slots(),
                group=request.namespace,
                park=lambda seconds: self._park(request, seconds),
                due=due,
            )
        finally:
            if self._tasks.get(request) is asyncio.current_task():
                del self._tasks[request]  # the name is free: no loop left behind for it

    async def _pass(self, request: Request) -> float | None:
        """One pass for ``request``, with the body stored under its name now."""
        body = self._bodies.get(request)
        if body is None or (body.get("metadata") or {}).get("deletionTimestamp"):
            # Being deleted (foreground, or orphaning its children): like the ReplicaSet
            # controller, create and adopt nothing more; what is left is the collector's.
            return None
        current = _Pass(uid_of(body), asyncio.ensure_future(self._reconcile(body)))
        self._passes[request] = current
        try:
            return await current.task
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if current.superseded and (task is None or not task.cancelling()):
                raise SupersededError(f"{request}: object {current.uid} is gone") from None
            raise
        finally:
            if self._passes.get(request) is current:
                del self._passes[request]

    async def shutdown(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._queued.clear()  # the slots the cancelled loops give back start nothing more
        tasks = list(self._tasks.values())
        if self._gate_poll is not None:
            tasks.append(self._gate_poll)
            self._gate_poll = None
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._slots = None  # a loop cancelled before it ran never gave its slot back
