"""Every error the operators raise on purpose, in one hierarchy, and a pass's `Failure`.

    OperatorError                  the common base
    ├── ApiError                   a non-2xx answer: status, reason, message, body; by status:
    │     BadRequest 400, Unauthorized 401, Forbidden 403, NotFound 404, Conflict 409, Gone 410,
    │     Invalid 422, TooManyRequests 429, InternalError 500, ServiceUnavailable 503, ServerTimeout 504
    ├── RetryError                 a failed pass, run again within `not_after` seconds
    │   └── ReconcileError         reported already (a condition, an Event): reason, message
    │       └── TerminalError      no retry can fix it: the object's next change runs a pass
    ├── SupersededError            the object was deleted or replaced under its name
    ├── NotLeaderError             a write refused: this process does not hold the Lease
    └── ConflictError              a child's name is held by an object the owner does not control

`ApiError(status, ...)` makes the subclass of its status: callers catch `NotFound`, not a number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple


class OperatorError(Exception):
    """The base of every error the operators and the shared library raise on purpose."""


class ApiError(OperatorError):
    """A non-2xx answer of the API server; constructed as the subclass of its status."""

    code: ClassVar[int] = 0  # the status a subclass stands for (0: any other)

    def __new__(cls, status: int, *args: Any, **kwargs: Any) -> ApiError:
        made = _BY_STATUS.get(status, ApiError) if cls is ApiError else cls
        return super().__new__(made)

    def __init__(self, status: int, reason: str, message: str, body: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = dict(body or {})


class BadRequest(ApiError):
    code = 400


class Unauthorized(ApiError):
    code = 401


class Forbidden(ApiError):
    """Refused by RBAC or by an admission policy (Pod Security, a quota)."""

    code = 403


class NotFound(ApiError):
    code = 404


class Conflict(ApiError):
    """The name is taken (AlreadyExists), or a precondition failed (a stale resourceVersion)."""

    code = 409


class Gone(ApiError):
    """A resourceVersion too old to list or watch from (Expired)."""

    code = 410


class Invalid(ApiError):
    """The object failed validation, or a JSON-patch `test` failed."""

    code = 422


class TooManyRequests(ApiError):
    code = 429


class InternalError(ApiError):
    code = 500


class ServiceUnavailable(ApiError):
    code = 503


class ServerTimeout(ApiError):
    code = 504


_BY_STATUS: dict[int, type[ApiError]] = {
    c.code: c
    for c in (
        BadRequest,
        Unauthorized,
        Forbidden,
        NotFound,
        Conflict,
        Gone,
        Invalid,
        TooManyRequests,
        InternalError,
        ServiceUnavailable,
        ServerTimeout,
    )
}


class Failure(NamedTuple):
    """Why a pass did not converge: the condition's and Event's `reason`, and `message`."""

    reason: str
    message: str


class RetryError(OperatorError):
    """A failed pass that must still run again within `not_after` seconds (None: backoff only)."""

    def __init__(self, message: str, not_after: float | None = None) -> None:
        super().__init__(message)
        self.not_after = not_after


class ReconcileError(RetryError):
    """How a pass fails once it has reported the failure in the object's status: `reason` (the
    Event's and condition's) and `message`; retried with backoff, no later than `not_after`."""

    def __init__(self, reason: str, message: str, not_after: float | None = None) -> None:
        super().__init__(f"{reason}: {message}", not_after)
        self.reason = reason
        self.message = message

    @property
    def failure(self) -> Failure:
        return Failure(self.reason, self.message)


class TerminalError(ReconcileError):
    """A reported failure that retrying cannot fix (controller-runtime's `TerminalError`): not
    retried with backoff, the next change of the object runs the next pass; counted apart."""


class SupersededError(OperatorError):
    """The pass was cut short: the object it worked for was deleted or replaced under its name.
    Not a failure: the loop runs again at once (and ends if the name is free), without backoff."""


class NotLeaderError(OperatorError):
    """A write refused because this process does not hold the Lease."""


class ConflictError(OperatorError):
    """A child's name is held by an object this owner does not control; nothing was touched.
    `reason` is the Event's and condition's reason the owner reports it with."""

    reason = "Conflict"
