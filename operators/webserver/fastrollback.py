"""Fast rollback of a WebServer by one field (pure): ``spec.rollout.rollbackTo: {revision: N}``.

While the field is set the pods run revision ``N``'s template as kept in ``status.history``
(``N`` 0 or unset: the previous one, the last ``Available`` revision other than the one that
runs when the field is first seen), whatever the spec's template says; every pod of it is
created at once (surge of ``replicas``, no old pod deleted before a new one is available), with
no pause, steps or analysis. The revision it resolved to is recorded in ``status.rollback``
(``manual: true`` and the revision asked for), so "previous" keeps meaning the same revision
on every later pass and after a restart. Clearing the field ends it: the spec's template
rolls out as any change does. A revision that is not in the history with its template is a
field error (``Degraded``, nothing moves), the controller's twin of what admission cannot see.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.api.validation import FieldError

FIELD = "spec.rollout.rollbackTo.revision"
AVAILABLE = "Available"


def requested(spec: Mapping[str, Any]) -> int | None:
    """The revision ``spec.rollout.rollbackTo`` asks for (0: the previous one), None when unset."""
    ask = (spec.get("rollout") or {}).get("rollbackTo")
    if ask is None:
        return None
    return int(ask.get("revision") or 0)


def _kept(history: Sequence[Mapping[str, Any]], revision: int) -> Mapping[str, Any] | None:
    found: Mapping[str, Any] | None = next(
        (e for e in history if e.get("revision") == revision and "template" in e), None
    )
    return found


def _previous(history: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    running = history[-1].get("templateHash") if history else None
    entry: Mapping[str, Any]
    for entry in reversed(history):
        if entry.get("outcome") == AVAILABLE and "template" in entry and entry.get("templateHash") != running:
            return entry
    return None


def resolve(
    history: Sequence[Mapping[str, Any]], current: Mapping[str, Any] | None, ask: int
) -> tuple[Mapping[str, Any] | None, str | None]:
    """The history entry to run for ``rollbackTo: {revision: ask}``, or why there is none.

    ``current``: ``status.rollback``; a manual one for the same ask keeps its revision."""
    if current and current.get("manual") and int(current.get("requested", -1)) == ask:
        kept = _kept(history, int(current.get("toRevision", 0)))
        if kept is not None:
            return kept, None
    if ask == 0:
        entry = _previous(history)
        if entry is None:
            return None, "no earlier revision that became Available (with its template kept) to roll back to"
        return entry, None
    entry = _kept(history, ask)
    if entry is None:
        revisions = [int(e["revision"]) for e in history if "template" in e]
        return None, f"revision {ask} is not in status.history with its template (kept: {revisions})"
    return entry, None


def errors(spec: Mapping[str, Any], status: Mapping[str, Any] | None) -> list[FieldError]:
    """The field error of a ``rollbackTo`` that names no revision the history can run."""
    ask = requested(spec)
    if ask is None:
        return []
    st = status or {}
    _, why = resolve(st.get("history") or (), st.get("rollback"), ask)
    return [FieldError(FIELD, why)] if why else []


def record(entry: Mapping[str, Any], ask: int, from_hash: str, from_spec_hash: str) -> dict[str, Any]:
    """``status.rollback`` of a fast rollback to ``entry``."""
    return {
        "fromHash": from_hash,
        "fromSpecHash": from_spec_hash,
        "toRevision": int(entry["revision"]),
        "manual": True,
        "requested": ask,
    }


def fast_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec the planner moves pods with: every pod of the target at once (surge of
    ``replicas``), an old one deleted only for an available new one, never paused."""
    replicas = int(spec.get("replicas", 0))
    options = dict(spec.get("rollout") or {})
    options.update(maxSurge=max(1, replicas), maxUnavailable=0, paused=False)
    return {**spec, "rollout": options}
