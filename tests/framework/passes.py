"""One reconcile pass at a time, of an operator built as it runs, on a fake API server.

``OnePass`` builds the operator with ``shared.controller.builder.Operator`` (its reconciler
gets its dependencies injected: the ``tests.framework.fakekube.FakeKube`` client, a fixed
clock, the Event recorder posting through that client) and runs one pass over the object at
``path`` as the fake holds it, the way kubernetes/sample-controller's tests run ``syncHandler``.
After each pass, ``OnePass.events`` holds the Events it posted (type, reason, message) and
the fake's actions hold its other requests, so a test asserts the two apart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from shared.api.clock import Clock
from shared.api.description import OperatorDescription
from shared.controller.builder import Operator
from shared.controller.reconciler import Context, Reconciler
from tests.framework.fakekube import FakeKube


class OnePass:
    def __init__(
        self,
        description: OperatorDescription,
        reconciler: Callable[[Context], Reconciler],
        kube: FakeKube,
        path: str,
        clock: Clock | None = None,
    ) -> None:
        self.kube = kube
        self.path = path
        self.operator = Operator(description, reconciler, kube=kube, clock=clock or Clock())
        self.reconciler = self.operator.reconciler
        self.events: list[tuple[str, str, str]] = []

    def run(self) -> float | None:
        """One pass over the object as the fake API server holds it now."""
        self.kube.clear_actions()

        async def one() -> float | None:
            try:
                return await self.reconciler.reconcile(self.kube.object(self.path) or {})
            finally:
                await self.operator.events.flush()

        try:
            return asyncio.run(one())
        finally:
            self.events = self.kube.events()
            self.kube.actions[:] = [a for a in self.kube.actions if a.resource != "events"]
