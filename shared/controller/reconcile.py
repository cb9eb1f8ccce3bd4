"""One decorator that turns a kopf handler into an instrumented, backed-off reconcile.

A "reconcile" is one run of one handler for one object. Its outcome maps onto
controller-runtime's ``result`` label like this:

==========================================  ============  ==========================================
handler outcome                              ``result``    other counters
==========================================  ============  ==========================================
returns                                      success
raises ``kopf.TemporaryError`` (delay > 0)   requeue_after  (the handler asked to look again later)
raises ``kopf.TemporaryError`` (no delay)    requeue
raises ``kopf.PermanentError``               error         errors_total, terminal_reconcile_errors
raises anything else                         error         errors_total; panics_total as well when
                                                           it is a programming error (TypeError,
                                                           KeyError, ...)
==========================================  ============  ==========================================

Unexpected exceptions are re-raised as ``kopf.TemporaryError`` with the delay from the shared
:class:`~shared.controller.retry.Backoff` for the object's retry count (kopf's ``retry`` argument) and a
message that names the attempt, so logs and the Event kopf posts say "attempt N, retrying in
X s" instead of kopf's fixed 60 s default.
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

import kopf

from shared.controller.metrics import Metrics
from shared.controller.retry import DEFAULT, Backoff

F = TypeVar("F", bound=Callable[..., Any])


class Outcome:
    """Records one reconcile's result into the metrics; used by both wrappers."""

    def __init__(self, controller: str, metrics: Metrics, backoff: Backoff, kwargs: dict[str, Any]) -> None:
        self.controller = controller
        self.metrics = metrics
        self.backoff = backoff
        self.retry = int(kwargs.get("retry") or 0)
        self.logger = kwargs.get("logger")
        self.started = time.monotonic()
        metrics.active_workers.labels(controller).inc()

    def finish(self, result: str, exc: BaseException | None = None) -> None:
        self.metrics.active_workers.labels(self.controller).dec()
        self.metrics.observe(self.controller, result, time.monotonic() - self.started, exc)

    def translate(self, exc: BaseException) -> BaseException:
        """Record ``exc`` and return the exception to raise to kopf."""
        if isinstance(exc, kopf.TemporaryError):
            self.finish("requeue_after" if exc.delay else "requeue")
            return exc
        self.finish("error", exc)
        if isinstance(exc, kopf.PermanentError):
            return exc
        delay = self.backoff.delay(self.retry)
        msg = f"{type(exc).__name__}: {exc} (attempt {self.retry + 1}, retrying in {delay:.3g}s)"
        if self.logger is not None:
            self.logger.warning(f"reconcile failed: {msg}")
        return kopf.TemporaryError(msg, delay=delay)


def reconciler(controller: str, metrics: Metrics, backoff: Backoff = DEFAULT) -> Callable[[F], F]:
    """Decorate a kopf handler (sync or async) with metrics and the shared retry policy.

    Sync handlers stay sync, so kopf still runs them in its thread pool.
    """

    def decorate(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                outcome = Outcome(controller, metrics, backoff, kwargs)
                try:
                    result = await fn(*args, **kwargs)
                except Exception as exc:
                    new = outcome.translate(exc)
                    if new is exc:
                        raise
                    raise new from exc
                outcome.finish("success")
                return result

            return cast(F, async_wrapper)

        @functools.wraps(fn)
        def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
            outcome = Outcome(controller, metrics, backoff, kwargs)
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                new = outcome.translate(exc)
                if new is exc:
                    raise
                raise new from exc
            outcome.finish("success")
            return result

        return cast(F, sync_wrapper)

    return decorate
