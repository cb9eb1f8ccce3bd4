"""Canary rollouts of a WebServer by pod ratio (pure): ``spec.rollout.strategy: Canary``.

A template change runs ``spec.rollout.canary.steps`` in order. A ``weight`` step makes
``split`` of the pods the new template's (the canary) and the rest the last ``Available``
revision's (the stable, from its template kept in ``status.history``), all behind the one
Service: a Service spreads new connections evenly over ready endpoints, so the canary's share
of pods is its share of connections. The step is done when exactly that many pods of each are
available; a ``pause`` step holds for ``seconds``, or without them until
``spec.rollout.canary.resume`` names this revision and a step at or past it. After the last
step every pod runs the canary (it is promoted). Where the rollout stands is
``status.canary`` (revision, step, since when, the weight and both pod counts), so a
restarted operator carries on. A change of ``replicas`` (an HPA) re-splits at the same weight.
Nothing to canary (a first creation, no stable template kept, a rollback in effect): the
rollout is the rolling update.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.webserver.desired import (
    PodView,
    free_slots,
    is_available,
    min_ready_seconds,
    rank_for_deletion,
    rollout_limits,
)

CANARY = "Canary"


def split(replicas: int, weight: int) -> tuple[int, int]:
    """(canary, stable) pods for ``weight`` % of ``replicas``: the canary's count is
    ``replicas * weight / 100`` rounded half up, at least 1 for a weight above 0 and at most
    ``replicas - 1`` for one below 100 (each revision asked for keeps a pod), so its share is
    within ``1 / (2 * replicas)`` of the weight unless that bound moved it."""
    if replicas <= 0:
        return 0, 0
    canary = (replicas * weight * 2 + 100) // 200
    if weight > 0:
        canary = max(canary, 1)
    if weight < 100 and replicas >= 2:
        canary = min(canary, replicas - 1)
    canary = min(max(canary, 0), replicas)
    return canary, replicas - canary


def steps(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    options = spec.get("rollout") or {}
    if options.get("strategy") != CANARY:
        return []
    return list((options.get("canary") or {}).get("steps") or ())


def weight_at(step_list: Sequence[Mapping[str, Any]], step: int) -> int:
    """The weight in force at ``step``: the last weight step at or before it (0 before any;
    100 past the last step)."""
    if step >= len(step_list):
        return 100
    return next((int(s["weight"]) for s in reversed(step_list[: step + 1]) if "weight" in s), 0)


def _time(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: Any) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass(frozen=True)
class CanaryState:
    """Where a canary stands after this pass: what to run and what ``status.canary`` says."""

    revision: int
    step: int
    steps: int
    started_at: str
    weight: int
    canary_hash: str
    stable_hash: str
    stable_revision: int
    stable_template: dict[str, Any]
    canary_pods: int
    stable_pods: int
    waiting: str | None  # a pause step holding: why (until resumed, or for how long)
    wake_in: float | None  # seconds until a timed pause ends
    analyzing: bool = False  # a settled weight step waits for the analysis to pass

    @property
    def promoted(self) -> bool:
        return self.step >= self.steps

    def status_field(self) -> dict[str, Any]:
        out = {
            "revision": self.revision,
            "step": self.step,
            "steps": self.steps,
            "stepStartedAt": self.started_at,
            "weight": self.weight,
            "canaryHash": self.canary_hash,
            "stableHash": self.stable_hash,
            "stableRevision": self.stable_revision,
            "canaryPods": self.canary_pods,
            "stablePods": self.stable_pods,
        }
        if self.analyzing:
            out["analyzing"] = True
        return out


def _stable(history: Sequence[Mapping[str, Any]], canary_hash: str) -> Mapping[str, Any] | None:
    """The revision the pods ran before the canary: the last Available one with its template."""
    entry: Mapping[str, Any]
    for entry in reversed(history):
        if entry.get("templateHash") == canary_hash:
            continue
        if entry.get("outcome") == "Available" and "template" in entry:
            return entry
    return None


def _resumed(spec: Mapping[str, Any], revision: int, step: int) -> bool:
    resume = ((spec.get("rollout") or {}).get("canary") or {}).get("resume") or {}
    return int(resume.get("revision", -1)) == revision and int(resume.get("step", -1)) >= step


def _settled(
    pods: Sequence[PodView],
    spec: Mapping[str, Any],
    want: tuple[int, int],
    hashes: tuple[str, str],
    now: datetime.datetime,
) -> bool:
    """Exactly the split, every pod of it available, no pod of a third template."""
    active = [p for p in pods if p.active]
    min_ready = min_ready_seconds(spec)
    if any(p.template_hash not in hashes for p in active):
        return False
    for thash, count in zip(hashes, want, strict=True):
        mine = [p for p in active if p.template_hash == thash]
        if len(mine) != count or not all(is_available(p, min_ready, now) for p in mine):
            return False
    return True


def _pausing(
    spec: Mapping[str, Any], pause_step: Mapping[str, Any], revision: int, step: int, held: datetime.timedelta
) -> tuple[str | None, float | None]:
    """Why a pause step still holds (None: it is over) and, when timed, the seconds left."""
    seconds = (pause_step.get("pause") or {}).get("seconds")
    if _resumed(spec, revision, step):
        return None, None
    if seconds is None:
        resume = f"spec.rollout.canary.resume {{revision: {revision}, step: {step}}}"
        return f"step {step} pauses until resumed: {resume}", None
    left = int(seconds) - held.total_seconds()
    if left <= 0:
        return None, None
    return f"step {step} pauses {seconds}s ({int(left)}s left)", left + 1.0


def advance(
    spec: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    recorded: Mapping[str, Any] | None,
    pods: Sequence[PodView],
    now: datetime.datetime,
    *,
    target_hash: str,
    rollback: bool,
    gate: Callable[[int, int], bool] | None = None,
) -> CanaryState | None:
    """The canary after this pass, or None when the rollout is not one (see the module doc).

    ``gate(revision, step)``: whether a settled weight step may end (the analysis passed)."""
    step_list = steps(spec)
    if not step_list or rollback or not history or history[-1].get("templateHash") != target_hash:
        return None
    current = history[-1]
    revision = int(current["revision"])
    if current.get("outcome") not in ("Progressing", "ProgressDeadlineExceeded"):
        return None  # done (promoted and Available) or given up
    stable = _stable(history, target_hash)
    if stable is None:
        return None
    rec = dict(recorded or {})
    if rec.get("revision") != revision or rec.get("canaryHash") != target_hash:
        rec = {"step": 0, "stepStartedAt": _time(now)}
    step = min(int(rec.get("step", 0)), len(step_list))
    started = _parse(rec.get("stepStartedAt")) or now
    replicas = int(spec.get("replicas", 0))
    hashes = (target_hash, str(stable["templateHash"]))
    waiting: str | None = None
    wake_in: float | None = None
    analyzing = False
    while step < len(step_list):
        current_step = step_list[step]
        if "weight" in current_step:
            if not _settled(pods, spec, split(replicas, int(current_step["weight"])), hashes, now):
                break
            if gate is not None and not gate(revision, step):
                analyzing = True
                break
        else:
            waiting, wake_in = _pausing(spec, current_step, revision, step, now - started)
            if waiting is not None:
                break
        step += 1
        started = now
    weight = weight_at(step_list, step)
    canary_pods, stable_pods = split(replicas, weight)
    return CanaryState(
        revision=revision,
        step=step,
        steps=len(step_list),
        started_at=_time(started),
        weight=weight,
        canary_hash=target_hash,
        stable_hash=hashes[1],
        stable_revision=int(stable["revision"]),
        stable_template=dict(stable["template"]),
        canary_pods=canary_pods,
        stable_pods=stable_pods,
        waiting=waiting,
        wake_in=wake_in,
        analyzing=analyzing,
    )


def holding(spec: Mapping[str, Any], recorded: Mapping[str, Any] | None) -> bool:
    """The last pass left the canary in a pause step, or its split made and waiting for the
    analysis: the deadline does not run (it does while the split's pods start)."""
    step_list = steps(spec)
    if not recorded or not step_list:
        return False
    step = int(recorded.get("step", 0))
    return step < len(step_list) and ("pause" in step_list[step] or recorded.get("analyzing") is True)


@dataclass(frozen=True)
class CanaryPlan:
    """Creates of each template and deletes, to move the pods towards the split."""

    canary_slots: list[int]
    stable_slots: list[int]
    delete: list[str]

    @property
    def create_slots(self) -> list[int]:
        return self.canary_slots + self.stable_slots


def plan(
    owner_name: str,
    spec: Mapping[str, Any],
    pods: Sequence[PodView],
    state: CanaryState,
    now: datetime.datetime | None,
) -> CanaryPlan:
    """Towards ``state``'s split within maxSurge and maxUnavailable: surplus pods of either
    revision and pods of any other go once the available ones allow (not-ready ones at once);
    missing pods are created, the canary's first."""
    replicas = int(spec.get("replicas", 0))
    min_ready = min_ready_seconds(spec)
    limits = rollout_limits(spec)
    active = [p for p in pods if p.active]
    taken = [p.name for p in pods]
    canary = [p for p in active if p.template_hash == state.canary_hash]
    stable = [p for p in active if p.template_hash == state.stable_hash]
    other = [p for p in active if p.template_hash not in (state.canary_hash, state.stable_hash)]
    surplus = rank_for_deletion(canary)[: max(0, len(canary) - state.canary_pods)]
    surplus += rank_for_deletion(stable)[: max(0, len(stable) - state.stable_pods)]
    deletable_ready = sum(is_available(p, min_ready, now) for p in active) - (
        replicas - limits.max_unavailable
    )
    delete: list[str] = []
    for p in rank_for_deletion(other + surplus):
        if not p.ready:
            delete.append(p.name)
        elif deletable_ready > 0:
            delete.append(p.name)
            deletable_ready -= 1
    room = replicas + limits.max_surge - (len(active) - len(delete))
    create_canary = max(0, min(state.canary_pods - len(canary), room))
    room -= create_canary
    create_stable = max(0, min(state.stable_pods - len(stable), room))
    return CanaryPlan(
        canary_slots=free_slots(taken, owner_name, state.canary_hash, create_canary),
        stable_slots=free_slots(taken, owner_name, state.stable_hash, create_stable),
        delete=delete,
    )
