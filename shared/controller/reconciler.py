"""The reconciler contract: `reconcile` and `watches`, and the `Context` a reconciler is given.

An operator's reconciler subclasses `Reconciler` and writes two methods: `reconcile(body)`, one
level-based pass that returns when to look again, and `watches()`, its watches besides the
primary resource's (children through `Context.owns`). The rest has a no-op default it may
override: `primary_changed` (every event of the primary resource), `forget` (an object is gone)
and `started` (start-up work). Everything else is the builder's: the status writer
(`Context.statuses`, whose own echoes wake no pass), per-object state forgotten when the object
goes (`Context.store`; `Context.generations` for what is worked out once per generation of the
spec, such as its checks), the Event recorder, the clock, the metrics and the work queue.

A pass reports its failures itself (a condition and an Event, then `ReconcileError`, or
`TerminalError` when no retry can help); `Failure` is the (reason, message) it reports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from shared.api.clock import Clock
from shared.api.description import Resource
from shared.api.errors import Failure, ReconcileError, TerminalError
from shared.client.events import EventRecorder
from shared.client.kube import KubeClient
from shared.client.statuses import StatusWriter
from shared.controller.caches import OwnerCache, managed_labels
from shared.controller.metrics import Metrics
from shared.controller.watches import Watch
from shared.controller.workqueue import Controller

__all__ = ["Context", "Failure", "Generations", "ReconcileError", "Reconciler", "Store", "TerminalError"]

V = TypeVar("V")


class Store(dict[str, V]):
    """Per-object state by UID (`Context.store`): the builder drops an object's entry when the
    object is deleted or replaced under its name, so a reconciler never clears it by hand."""


class Generations(Store[tuple[int, V]]):
    """A value worked out once per generation of an object (`Context.generations`): what
    depends on the spec alone, such as its checks. The API server bumps `metadata.generation` on
    every change of the spec, and every child or status event of an unchanged object runs a
    pass; an object without a generation (0) is worked out every time."""

    def known(self, uid: str, generation: int) -> V | None:
        """The value kept for `uid` at `generation`, or None."""
        kept = self.get(uid)
        return kept[1] if generation and kept is not None and kept[0] == generation else None

    def keep(self, uid: str, generation: int, value: V) -> V:
        if generation:
            self[uid] = (generation, value)
        return value


@dataclass
class Context:
    """What a reconciler is given: its dependencies, made by the builder (or a test)."""

    app: str  # the app label of its children
    kube: KubeClient  # every read and write of the reconciler
    events: EventRecorder
    clock: Clock
    metrics: Metrics
    # Its work queue: `kick` a request, `uids` of the live objects.
    controller: Controller
    # Whether this process may write now: every watch synced and, with an election, leading.
    active: Callable[[], bool]
    # The status subresource of the primary kind; its own writes' echoes wake no pass.
    statuses: StatusWriter
    # The namespaces it watches (empty: all).
    namespaces: Callable[[], tuple[str, ...]] = tuple
    stores: list[Store[Any]] = field(default_factory=list)

    def owns(self, resource: Resource, cache: OwnerCache[Any]) -> Watch:
        """The watch of a child kind: only this app's objects (server-side selector), each event
        filed in `cache` and waking the pass of the child's controller."""

        def changed(event_type: str | None, body: Mapping[str, Any]) -> None:
            self.controller.child_changed(cache, event_type, body)

        return Watch(resource.group, resource.version, resource.plural, changed, managed_labels(self.app))

    def store(self) -> Store[Any]:
        """A new per-object store, forgotten object by object with the objects."""
        made: Store[Any] = Store()
        self.stores.append(made)
        return made

    def generations(self) -> Generations[Any]:
        """A new store of values worked out once per generation, forgotten with the objects."""
        made: Generations[Any] = Generations()
        self.stores.append(made)
        return made

    def forget(self, uid: str) -> None:
        """Drop what the builder keeps for the object `uid`: its last status, its stores' entries."""
        self.statuses.forget(uid)
        for store in self.stores:
            store.pop(uid, None)

    def event(self, body: Mapping[str, Any], reason: str, message: str, type: str = "Normal") -> None:
        """Record an Event about `body` (posted in the background, fenced, never failing a pass)."""
        self.events.record(body, type=type, reason=reason, message=message)


class Reconciler:
    """One operator's logic: `reconcile` and `watches`; the hooks do nothing unless overridden."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def reconcile(self, body: Mapping[str, Any]) -> float | None:
        """One level-based pass for the object `body` (the latest the watch delivered): returns
        when to look again (None: on the next change), or raises `ReconcileError` once the
        failure is reported."""
        raise NotImplementedError

    def watches(self) -> Sequence[Watch]:
        """Its watches besides the primary resource's (children: `Context.owns`)."""
        return ()

    def primary_changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Told every event of the primary resource, after the work queue was."""

    def forget(self, uid: str) -> None:
        """The object `uid` was deleted or replaced under its name (its stores are dropped)."""

    def started(self) -> None:
        """At start-up, on the event loop (a sweep of what was left while the process was down)."""
