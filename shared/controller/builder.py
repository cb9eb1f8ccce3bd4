"""An operator's process, built from its description and its reconciler class.

As controller-runtime's builder (`NewControllerManagedBy(mgr).For(&Primary{}).Owns(&Child{})`),
an operator supplies its `OperatorDescription` (data, in the pure layer) and a `Reconciler`
subclass (`shared.controller.reconciler`); `Operator` does the rest, the same for every
operator: the work queue of the primary resource with the leader and sync gate, the primary's
watch and the reconciler's, the status writer and its echo filter, forgetting per-object state
and series when an object goes, and the process (`Runtime`). `run` is what an operator's
`__main__` calls: options first, then the operator built with them.

A pass reports its own failures. Whatever else it raises, a bug or an input nobody foresaw, is
reported here (`report_unexpected`): `Degraded` and `Reconciling` with reason `UNEXPECTED`,
and a Warning Event when that condition changes; the pass is then retried with backoff.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shared.api import conditions
from shared.api.clock import Clock
from shared.api.description import OperatorDescription
from shared.api.errors import ReconcileError, SupersededError
from shared.client.events import EventRecorder
from shared.client.kube import KubeClient
from shared.client.statuses import StatusWriter
from shared.controller.options import Options, parse_options
from shared.controller.reconciler import Context, Reconciler
from shared.controller.runtime import Runtime
from shared.controller.watches import Watch
from shared.controller.workqueue import Controller

logger = logging.getLogger("shared.controller")
# The condition's and Event's reason for an exception a pass did not report itself.
UNEXPECTED = "ReconcileFailed"
_MAX_MESSAGE = 1024


class Operator:
    """The process of one operator: its runtime, client, work queue and reconciler."""

    def __init__(
        self,
        description: OperatorDescription,
        reconciler: Callable[[Context], Reconciler],
        *,
        options: Options | None = None,
        kube: KubeClient | None = None,
        clock: Clock | None = None,
        primary_labels: Mapping[str, str] | None = None,
    ) -> None:
        self.description = description
        # Only primary objects with these labels (the test operators' ConfigMaps); None: all.
        self.primary_labels = primary_labels
        self.runtime = runtime = Runtime.for_operator(description)
        if options is not None:
            runtime.options = options
        self.kube = kube if kube is not None else KubeClient(observer=runtime.metrics.observe_request)
        self.events = EventRecorder(self.kube, component=description.deployment)
        self.clock = clock if clock is not None else Clock.from_env()
        crd = description.crd
        self.statuses = StatusWriter(self.kube, crd.group, crd.version, crd.plural)
        self.controller = Controller(
            description.controller,
            self._reconcile,
            metrics=runtime.metrics,
            gate=runtime.active,
            echo=self.statuses.is_echo,
        )
        self.context = Context(
            app=description.app,
            kube=self.kube,
            events=self.events,
            clock=self.clock,
            metrics=runtime.metrics,
            controller=self.controller,
            active=runtime.active,
            statuses=self.statuses,
            namespaces=lambda: runtime.options.namespaces,
        )
        self.reconciler = reconciler(self.context)
        self.controller.on_forget(uid=self.forget, name=runtime.metrics.forget_object)
        runtime.on_startup(self.reconciler.started)
        runtime.manage(self.controller, self.kube, self.clock, self.events)

    async def _reconcile(self, body: Mapping[str, Any]) -> float | None:
        try:
            return await self.reconciler.reconcile(body)
        except (ReconcileError, SupersededError):
            raise
        except Exception as exc:
            message = await report_unexpected(exc, body, self.statuses, self.events, self.clock)
            raise ReconcileError(UNEXPECTED, message) from exc

    def forget(self, uid: str) -> None:
        """The object ``uid`` was deleted or replaced under its name: the builder's state for it
        goes (its last status, its stores' entries), then the reconciler's hook is told."""
        self.context.forget(uid)
        self.reconciler.forget(uid)

    def _primary_changed(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        self.controller.observe(event_type, body)
        self.reconciler.primary_changed(event_type, body)

    def watches(self) -> list[Watch]:
        """The primary resource's watch, then the reconciler's."""
        crd = self.description.crd
        primary = Watch(
            crd.group, crd.version, crd.plural, self._primary_changed, dict(self.primary_labels or {})
        )
        return [primary, *self.reconciler.watches()]

    def run(self) -> None:
        """Run until SIGINT/SIGTERM."""
        self.runtime.run(self.watches())


def run(
    description: OperatorDescription,
    reconciler: Callable[[Context], Reconciler],
    argv: Sequence[str] | None = None,
) -> None:
    """``python -m operators.<name>``: parse the options (``argv``, else the command line's),
    build the operator from its description and reconciler class, run it."""
    own = {"max_concurrent_reconciles": description.max_concurrent_reconciles}
    defaults = {k: v for k, v in own.items() if v is not None}
    options = parse_options(sys.argv[1:] if argv is None else argv, prog=description.name, defaults=defaults)
    Operator(description, reconciler, options=options).run()


async def report_unexpected(
    exc: Exception,
    body: Mapping[str, Any],
    statuses: StatusWriter | None,
    events: EventRecorder,
    clock: Clock,
) -> str:
    """Report an exception a pass did not report itself (``report_failure`` with
    ``UNEXPECTED`` and the exception named); returns the message."""
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
