"""An operator's wiring, built from its description and its reconciler.

The model is controller-runtime's builder (``NewControllerManagedBy(mgr).For(&Primary{}).
Owns(&Child{}).Complete(r)``): an operator package supplies

- its :class:`~shared.api.description.OperatorDescription` (primary resource, children,
  metrics, RBAC: data, in the pure layer), and
- a reconciler class (:class:`Reconciler`): constructed with a :class:`Context` holding every
  dependency it has (the API client, the Event recorder, the clock, the metrics, the leader
  gate, its work queue), so a unit test constructs it with a fake client and a fixed clock and
  asserts the actions one pass takes;

and :class:`Operator` does the rest, the same for every operator: one work queue
(:class:`~shared.controller.workqueue.Controller`) of the primary resource with the leader and
sync gate, a watch of the primary feeding it, the reconciler's watches (children, through
:meth:`Context.owns`), forgetting per-object state and series when an object goes, and the
process (:class:`~shared.controller.runtime.Runtime`). An operator's ``reconciler.py`` holds its
logic only; ``python -m operators.<name>`` (``operators.main``) builds and runs it.

A pass reports its own failures (a condition and an Event, then
:class:`~shared.controller.workqueue.ReconcileError`). Whatever else it raises, a bug or an
input nobody foresaw, is reported here, the same for every operator
(:func:`report_unexpected`): ``Degraded`` (and ``Reconciling``) with reason
:data:`UNEXPECTED` and the exception, written through the reconciler's ``statuses`` writer, and
a Warning Event when that condition changes; the pass is then retried with backoff like any
failure. No exception of a pass ends in a log line alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from shared.api import conditions
from shared.api.clock import Clock
from shared.api.description import OperatorDescription, Resource
from shared.api.errors import ReconcileError, SupersededError
from shared.client.events import EventRecorder
from shared.client.kube import KubeClient
from shared.client.statuses import StatusWriter
from shared.controller.caches import OwnerCache, managed_labels
from shared.controller.metrics import Metrics
from shared.controller.runtime import Options, Runtime
from shared.controller.watches import Watch
from shared.controller.workqueue import Controller

logger = logging.getLogger("shared.controller")
# The condition's and Event's reason for an exception a pass did not report itself.
UNEXPECTED = "ReconcileFailed"
_MAX_MESSAGE = 1024


@dataclass
class Context:
    """What a reconciler is given: its dependencies, made by :class:`Operator` (or a test)."""

    app: str  # the app label of its children
    kube: KubeClient  # every read and write of the reconciler
    events: EventRecorder
    clock: Clock
    metrics: Metrics
    # Its work queue: ``kick`` a request, ``uids`` of the live objects.
    controller: Controller
    # Whether this process may write now: every watch synced and, with an election, leading.
    active: Callable[[], bool]
    # The namespaces it watches (empty: all), known once the options are parsed.
    namespaces: Callable[[], tuple[str, ...]] = tuple

    def owns(self, resource: Resource, cache: OwnerCache[Any]) -> Watch:
        """The watch of a child kind: only this app's objects (server-side selector), each event
        filed in ``cache`` and waking the pass of the child's controller."""

        def changed(event_type: str | None, body: Mapping[str, Any]) -> None:
            self.controller.child_changed(cache, event_type, body)

        return Watch(resource.group, resource.version, resource.plural, changed, managed_labels(self.app))

    def event(self, body: Mapping[str, Any], reason: str, message: str, type: str = "Normal") -> None:
        """Record an Event about ``body`` (posted in the background, fenced, never failing a pass)."""
        self.events.record(body, type=type, reason=reason, message=message)


class Reconciler(Protocol):
    """One operator's logic; the builder makes one per process (see the module docstring)."""

    def __init__(self, ctx: Context) -> None: ...

    async def reconcile(self, body: Mapping[str, Any]) -> float | None:
        """One level-based pass for the object ``body`` (the latest the watch delivered):
        returns when to look again (None: on the next change), or raises
        :class:`~shared.controller.workqueue.ReconcileError` after reporting the failure."""
        ...

    def watches(self) -> Sequence[Watch]:
        """Its watches besides the primary resource's (children: :meth:`Context.owns`)."""
        ...

    def is_echo(self, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` is only the echo of the reconciler's own status write (no pass)."""
        ...

    def primary_changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Told every event of the primary resource, after the work queue was."""
        ...

    def forget(self, uid: str) -> None:
        """The object ``uid`` was deleted or replaced under its name: drop what is kept for it."""
        ...


class Operator:
    """The process of one operator: its runtime, client, work queue and reconciler."""

    def __init__(
        self,
        description: OperatorDescription,
        reconciler: Callable[[Context], Reconciler],
        *,
        kube: KubeClient | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.description = description
        self.runtime = runtime = Runtime.for_operator(description)
        self.kube = kube if kube is not None else KubeClient(observer=runtime.metrics.observe_request)
        self.events = EventRecorder(self.kube, component=description.deployment)
        self.clock = clock if clock is not None else Clock.from_env()
        self.controller = Controller(
            description.controller,
            self._reconcile,
            metrics=runtime.metrics,
            gate=runtime.active,
            echo=self._is_echo,
        )
        self.context = Context(
            app=description.app,
            kube=self.kube,
            events=self.events,
            clock=self.clock,
            metrics=runtime.metrics,
            controller=self.controller,
            active=runtime.active,
            namespaces=lambda: runtime.options.namespaces,
        )
        self.reconciler = reconciler(self.context)
        self.controller.on_forget(uid=self.reconciler.forget, name=runtime.metrics.forget_object)
        # Optional: a reconciler with start-up work (a sweep of what it left behind while the
        # process was down) defines ``started``.
        started = getattr(self.reconciler, "started", None)
        if callable(started):
            runtime.on_startup(started)
        runtime.manage(self.controller, self.kube, self.clock, self.events)

    async def _reconcile(self, body: Mapping[str, Any]) -> float | None:
        try:
            return await self.reconciler.reconcile(body)
        except (ReconcileError, SupersededError):
            raise
        except Exception as exc:
            message = await report_unexpected(
                exc,
                body,
                getattr(self.reconciler, "statuses", None),
                self.events,
                self.clock,
            )
            raise ReconcileError(UNEXPECTED, message) from exc

    def _is_echo(self, body: Mapping[str, Any]) -> bool:
        return self.reconciler.is_echo(body)

    def _primary_changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.controller.observe(event_type, body)
        self.reconciler.primary_changed(event_type, body)

    def watches(self) -> list[Watch]:
        """The primary resource's watch, then the reconciler's."""
        crd = self.description.crd
        primary = Watch(crd.group, crd.version, crd.plural, self._primary_changed)
        return [primary, *self.reconciler.watches()]

    def run(self, options: Options) -> None:
        """Run until SIGINT/SIGTERM with ``options`` (``operators.main`` parses them)."""
        self.runtime.options = options
        self.runtime.run(self.watches())


async def report_unexpected(
    exc: Exception,
    body: Mapping[str, Any],
    statuses: StatusWriter | None,
    events: EventRecorder,
    clock: Clock,
) -> str:
    """Report an exception a pass did not report itself (:func:`report_failure` with
    :data:`UNEXPECTED` and the exception named); returns the message."""
    meta = body.get("metadata") or {}
    message = f"the reconcile pass failed: {type(exc).__name__}: {exc}"[:_MAX_MESSAGE]
    logger.error(f"{meta.get('namespace')}/{meta.get('name')}: {message}", exc_info=exc)
    await report_failure(body, UNEXPECTED, message, statuses=statuses, events=events, clock=clock)
    return message


async def report_failure(
    body: Mapping[str, Any],
    reason: str,
    message: str,
    *,
    statuses: StatusWriter | None,
    events: EventRecorder,
    clock: Clock,
) -> None:
    """``Degraded`` and ``Reconciling`` True with ``reason`` in the object's status (through
    ``statuses``, the writer the reconciler writes with, so its own next write starts from it),
    and a Warning Event when the condition changes (not once per retry). A status write that
    fails is logged: the Event is out, and the retry writes again."""
    meta = body.get("metadata") or {}
    current = statuses.current(body) if statuses is not None else {}
    before = conditions.get(current.get("conditions"), conditions.DEGRADED) or {}
    if (before.get("status"), before.get("reason"), before.get("message")) != ("True", reason, message):
        events.record(body, type="Warning", reason=reason, message=message)
    if statuses is None:
        return
    now, generation = clock.now(), int(meta.get("generation") or 0)
    cause = conditions.make(conditions.DEGRADED, True, reason, message, generation=generation, now=now)
    readiness = conditions.readiness(reconciling=(reason, message), generation=generation, now=now)
    try:
        await statuses.write(
            body, {**current, "conditions": conditions.set_all(current.get("conditions"), cause, *readiness)}
        )
    except SupersededError:
        raise
    except Exception as write_failed:
        logger.warning(f"{meta.get('namespace')}/{meta.get('name')}: writing the status: {write_failed!r}")
