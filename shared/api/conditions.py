"""Status conditions following the Kubernetes API conventions (``metav1.Condition``).

kopf writes status with JSON merge-patches, which replace lists whole, so everything here works
on the complete ``conditions`` list: ``set_condition`` returns a new list with one condition
set, ``status_patch`` returns the whole new status only when something changed (``None``
otherwise), so a steady-state pass writes nothing.

Rules enforced:
- ``status`` is one of True/False/Unknown;
- ``reason`` is CamelCase (``^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$``, 1-1024 chars);
- ``lastTransitionTime`` changes only when ``status`` changes (not on reason/message changes);
- ``observedGeneration`` records the generation the condition was computed from.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict

Status = Literal["True", "False", "Unknown"]

AVAILABLE = "Available"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"

_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_MAX_MESSAGE = 32768


class Condition(TypedDict):
    """Besides each kind's own conditions (``Available``, ``Progressing``, ``Degraded``...), every
    object carries the three that GitOps tools read, from ``readiness``: ``Reconciling`` and
    ``Stalled`` (the "abnormal-true" conditions of kstatus, sigs.k8s.io/cli-utils: what Flux health
    checks, Helm 4 ``--wait``, kpt and Config Sync decide readiness with) and a ``Ready`` summary
    (what Argo CD scripts and ``kubectl wait --for=condition=Ready`` look at). See
    docs/health-checks.md.
    """

    type: str
    status: Status
    observedGeneration: int
    lastTransitionTime: str
    reason: str
    message: str


def rfc3339(now: datetime.datetime) -> str:
    """Seconds-precision UTC timestamp, the format the API server stores for metav1.Time."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make(
    type_: str,
    status: Status | bool,
    reason: str,
    message: str = "",
    *,
    generation: int,
    now: datetime.datetime,
) -> Condition:
    """Build one validated condition."""
    if isinstance(status, bool):
        status = "True" if status else "False"
    if status not in ("True", "False", "Unknown"):
        raise ValueError(f"condition status must be True, False or Unknown, not {status!r}")
    if not _REASON.match(type_) or not _REASON.match(reason) or len(reason) > 1024:
        raise ValueError(f"condition type/reason must be CamelCase: type={type_!r} reason={reason!r}")
    return {
        "type": type_,
        "status": status,
        "observedGeneration": int(generation),
        "lastTransitionTime": rfc3339(now),
        "reason": reason,
        "message": message[:_MAX_MESSAGE],
    }


def readiness(
    *,
    stalled: tuple[str, str] | None = None,
    reconciling: tuple[str, str] | None = None,
    ready: tuple[str, str] | None = None,
    generation: int,
    now: datetime.datetime,
) -> tuple[Condition, Condition, Condition]:
    """``Reconciling``, ``Stalled`` and ``Ready`` for an object's state, each a (reason, message).

    ``stalled``: it cannot get anywhere without a human (invalid spec, a name held by someone
    else, a run that failed for good); ``reconciling``: work is pending; neither: ``ready``.
    kstatus answers ``Failed`` for a True ``Stalled`` and ``InProgress`` for a True
    ``Reconciling``, whichever comes first in the list, so at most one is True (``Stalled``
    wins). All three carry the reason and message of the state the object is in.
    """
    state = stalled or reconciling or ready
    if state is None:
        raise ValueError("readiness needs the (reason, message) of the state the object is in")
    reason, message = state

    def cond(type_: str, status: bool) -> Condition:
        return make(type_, status, reason, message, generation=generation, now=now)

    return (
        cond(RECONCILING, stalled is None and reconciling is not None),
        cond(STALLED, stalled is not None),
        cond(READY, stalled is None and reconciling is None),
    )


def stalled_by(cause: Condition, *, now: datetime.datetime) -> tuple[Condition, Condition, Condition]:
    """``readiness`` of an object that ``cause`` (``Degraded`` with ``InvalidSpec``...) stalls."""
    return readiness(
        stalled=(cause["reason"], cause["message"]), generation=cause["observedGeneration"], now=now
    )


def needs_a_human(reason: str) -> bool:
    """Whether a failure's reason is a name conflict: ``shared.api.errors.ConflictError``'s
    (``Conflict``, ``ServiceConflict``, ``DeploymentConflict``). Nothing is touched and retries
    cannot help until someone renames or removes the other object, so the owner is stalled."""
    return reason.endswith("Conflict")


def set_condition(conditions: Iterable[Mapping[str, Any]] | None, new: Condition) -> list[dict[str, Any]]:
    """Return a new list with ``new`` in place of the condition of the same type.

    The previous ``lastTransitionTime`` is kept when the status did not change. Order of other
    conditions is preserved; a new type is appended.
    """
    result: list[dict[str, Any]] = []
    placed = False
    for cond in conditions or ():
        if cond.get("type") != new["type"]:
            result.append(dict(cond))
            continue
        merged: dict[str, Any] = dict(new)
        if cond.get("status") == new["status"] and cond.get("lastTransitionTime"):
            merged["lastTransitionTime"] = cond["lastTransitionTime"]
        result.append(merged)
        placed = True
    if not placed:
        result.append(dict(new))
    return result


def set_all(conditions: Iterable[Mapping[str, Any]] | None, *new: Condition) -> list[dict[str, Any]]:
    """Apply several ``set_condition`` calls in order."""
    result: list[dict[str, Any]] = [dict(c) for c in conditions or ()]
    for cond in new:
        result = set_condition(result, cond)
    return result


def get(conditions: Iterable[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions or () if c.get("type") == type_), None)


def is_true(conditions: Iterable[Mapping[str, Any]] | None, type_: str) -> bool:
    cond = get(conditions, type_)
    return cond is not None and cond.get("status") == "True"


def status_patch(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status to write, or ``None`` when ``desired`` adds nothing to ``current``.

    Only keys present in ``desired`` are compared: fields written by others (kopf's own
    bookkeeping, for instance) are left alone. Lists, ``conditions`` included, are compared and
    written whole, as a merge-patch would replace them anyway.
    """
    current = current or {}
    changed = {k: v for k, v in desired.items() if current.get(k) != v}
    return dict(desired) if changed else None
