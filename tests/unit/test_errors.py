"""The error model: API errors made as the class of their status, and a terminal failure not
retried by the work queue."""

import asyncio

import pytest

from shared.api.errors import (
    ApiError,
    Conflict,
    Failure,
    Invalid,
    NotFound,
    OperatorError,
    ReconcileError,
    TerminalError,
    TooManyRequests,
)
from shared.controller.loop import _one_pass
from shared.controller.retry import Backoff


@pytest.mark.parametrize(
    ("status", "kind"), [(404, NotFound), (409, Conflict), (422, Invalid), (429, TooManyRequests)]
)
def test_an_api_error_is_made_as_the_class_of_its_status(status, kind):
    exc = ApiError(status, kind.__name__, "refused", {"code": status})
    assert type(exc) is kind and isinstance(exc, ApiError) and isinstance(exc, OperatorError)
    assert (exc.status, exc.reason, exc.message, exc.body) == (
        status,
        kind.__name__,
        "refused",
        {"code": status},
    )
    assert kind.code == status


def test_a_status_without_a_class_stays_an_api_error():
    exc = ApiError(418, "Teapot", "no")
    assert type(exc) is ApiError and str(exc) == "418 Teapot: no"


def test_a_reconcile_error_carries_its_failure():
    assert ReconcileError("FailedCreate", "quota").failure == Failure("FailedCreate", "quota")
    assert isinstance(TerminalError("InvalidSpec", "x"), ReconcileError)


def _outcome(exc: Exception):
    async def reconcile():
        raise exc

    return asyncio.run(
        _one_pass(reconcile, 2, backoff=Backoff(base=1.0), logger=None, metrics=None, controller="c")
    )


def test_a_terminal_error_waits_for_a_change_and_a_reconcile_error_backs_off():
    after, failures, (result, raised) = _outcome(TerminalError("InvalidSpec", "spec.replicas: -1"))
    assert (after, failures, result) == (None, 2, "error") and isinstance(raised, TerminalError)
    after, failures, (result, _) = _outcome(ReconcileError("FailedCreate", "quota"))
    assert after is not None and after > 0 and (failures, result) == (3, "error")
