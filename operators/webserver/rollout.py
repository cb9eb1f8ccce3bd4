"""Rollout bookkeeping of a WebServer (pure): revisions, the progress deadline, automatic
rollback and pause. No API calls, no clock reads; everything it knows comes from the
WebServer's status and the pods, so a restarted operator carries on where the last one was.

**Revisions.** ``status.history`` holds the last ``HISTORY_LIMIT`` revisions, oldest first;
the last one is the template the pods are being moved to (or run). A revision is a template
hash (``.desired.template_hash``), the top-level template fields that changed from the
revision before (``configHash``: the content of a referenced ConfigMap), when it started and
ended, its outcome, and the template itself (the spec fields that make it, what a rollback by
hand copies back into the spec) when its compact JSON is at most ``MAX_TEMPLATE_BYTES``.
So the history is bounded: at most 10 x (4 KiB + about 250 bytes); a typical entry is 300-500
bytes. A template above the limit (long env values) is not kept: that revision cannot be a
rollback target (the condition says so).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.webserver import fastrollback
from operators.webserver.desired import PodView, hash_of, is_available, min_ready_seconds
from operators.webserver.schema import ROLLOUT_OUTCOMES

HISTORY_LIMIT = 10
MAX_TEMPLATE_BYTES = 4096
DEFAULT_PROGRESS_DEADLINE = 600

PROGRESSING, AVAILABLE, DEADLINE_EXCEEDED, ROLLED_BACK, SUPERSEDED = ROLLOUT_OUTCOMES
OUTCOMES = ROLLOUT_OUTCOMES  # the status schema's enum, in this order
CONFIG_HASH = "configHash"


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _time(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(value: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None


def changed_fields(before: Mapping[str, Any] | None, after: Mapping[str, Any], first: bool) -> list[str]:
    """Top-level template fields that differ; ``["unknown"]`` when the earlier template was not kept."""
    if first:
        return []
    if before is None:
        return ["unknown"]
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def progress_deadline(spec: Mapping[str, Any]) -> int:
    """``spec.progressDeadlineSeconds``; unset, 600 plus minReadySeconds: a new pod is progress
    only once available, so a fixed 600 would call any rollout with minReadySeconds >= 600 stuck
    (a Deployment refuses that spec; here an unset deadline is always safe)."""
    value = spec.get("progressDeadlineSeconds")
    return DEFAULT_PROGRESS_DEADLINE + min_ready_seconds(spec) if value is None else int(value)


@dataclass(frozen=True)
class Rollout:
    """Where the WebServer's rollout stands after this pass (status fields and what to run).

    Outcomes: ``Progressing`` (the current rollout), ``Available`` (every desired pod ran it and
    was available; kept afterwards), ``ProgressDeadlineExceeded``, ``RolledBack`` (it missed the
    deadline and the operator went back), ``Superseded`` (the spec changed before it finished).

    **Progress deadline**, as a Deployment's: a rollout of a new template (or the first creation)
    that makes no progress -- one more available pod of the new template or one fewer old pod --
    for ``spec.progressDeadlineSeconds`` (unset: 600 plus minReadySeconds) is marked
    ``ProgressDeadlineExceeded`` (``Progressing=False``); progress after that makes it
    ``Progressing`` again. Scaling a
    revision that is already ``Available`` is not under the deadline. The time of the last progress
    is ``status.progress.at``; while ``spec.rollout.paused`` it is not counted, and resuming starts
    it again (as ``kubectl rollout resume`` does).

    **Automatic rollback** (``spec.rollout.autoRollback``): when the spec's revision exceeds its
    deadline, the pods go back to the last revision whose outcome is ``Available``, exactly its
    stored template (same hash: its surviving pods are kept as they are). ``status.rollback`` records
    that the spec's template (``fromHash``) was given up for ``toRevision``; it ends as soon as the
    spec's template changes (a fix, or the user reverting by hand to that same template: then
    nothing moves). Rules that keep it from looping: only a revision the spec asked for is ever
    rolled back, never a rollback itself (a rollback target that misses the deadline too stays
    ``ProgressDeadlineExceeded`` for a human), and there is no target when the only difference is
    ConfigMap content (the operator does not keep old ConfigMap data: restore the ConfigMap).
    """

    template: dict[str, Any]  # the template the pods are moved to now
    hash: str
    revision: int
    history: list[dict[str, Any]]
    progress: dict[str, Any]
    rollback: dict[str, Any] | None  # the spec's template given up, while it is
    paused: bool
    rolled_back: str | None = None  # this pass started an automatic rollback: the message
    fast: str | None = None  # this pass started a fast rollback (spec.rollout.rollbackTo): the message
    no_target: str | None = None  # why a missed deadline was not rolled back

    @property
    def manual(self) -> bool:
        """A fast rollback (``spec.rollout.rollbackTo``) is in effect: all pods at once."""
        return bool(self.rollback and self.rollback.get("manual"))

    @property
    def current(self) -> dict[str, Any]:
        return self.history[-1]

    @property
    def outcome(self) -> str:
        return str(self.current["outcome"])

    def status_fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "revision": self.revision,
            "lastRolloutOutcome": self.outcome,
            "history": self.history,
            "progress": self.progress,
            # None removes it (the status writer drops nulls from the status it writes whole).
            "rollback": self.rollback,
        }
        return out


def _entry(
    history: list[dict[str, Any]], tpl: dict[str, Any], thash: str, now: datetime.datetime
) -> dict[str, Any]:
    last = history[-1] if history else None
    entry: dict[str, Any] = {
        "revision": int(last["revision"]) + 1 if last else 1,
        "templateHash": thash,
        "changed": changed_fields(last.get("template") if last else None, tpl, first=last is None),
        "startedAt": _time(now),
        "outcome": PROGRESSING,
    }
    if len(_compact(tpl)) <= MAX_TEMPLATE_BYTES:
        entry["template"] = tpl
    return entry


def spec_hash_of(tpl: Mapping[str, Any]) -> str:
    """The hash of a template without the ConfigMap content: what the spec alone asks for."""
    return hash_of({k: v for k, v in tpl.items() if k != CONFIG_HASH})


def _target(history: Sequence[dict[str, Any]], spec_tpl: Mapping[str, Any]) -> dict[str, Any] | None:
    """The last available revision, other than the spec's, that a rollback can go to."""
    without_config = {k: v for k, v in spec_tpl.items() if k != CONFIG_HASH}
    for entry in reversed(history[:-1]):
        if entry.get("outcome") != AVAILABLE or "template" not in entry:
            continue
        tpl: Mapping[str, Any] = entry["template"]
        if {k: v for k, v in tpl.items() if k != CONFIG_HASH} == without_config:
            return None  # only ConfigMap content differs: it cannot be restored from here
        return dict(entry)
    return None


def _bounded(history: list[dict[str, Any]], rollback: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The last ``HISTORY_LIMIT`` entries, never dropping the rollback's target nor the
    newest available revision (the next rollback's target) while older ones can go."""
    keep = {int(rollback["toRevision"])} if rollback else set()
    available = [e for e in history[:-1] if e.get("outcome") == AVAILABLE and "template" in e]
    if available:
        keep.add(int(available[-1]["revision"]))
    while len(history) > HISTORY_LIMIT:
        drop = next((i for i, e in enumerate(history) if int(e["revision"]) not in keep), 0)
        del history[drop]
    return history


def _still_rolled_back(
    history: Sequence[Mapping[str, Any]], rollback: dict[str, Any] | None, spec_tpl: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, Mapping[str, Any] | None]:
    """The rollback in effect and its target's entry, while the spec asks for what it gave up
    (whatever the ConfigMaps hold now; a rollback recorded without ``fromSpecHash``: exactly)."""
    if rollback is None:
        return None, None
    if "fromSpecHash" in rollback:
        same = rollback["fromSpecHash"] == spec_hash_of(spec_tpl)
    else:
        same = rollback.get("fromHash") == hash_of(spec_tpl)
    if not same:
        return None, None
    kept = next(
        (e for e in history if e.get("revision") == rollback.get("toRevision") and "template" in e), None
    )
    return (rollback, kept) if kept is not None else (None, None)


def _rollback_in_effect(
    spec: Mapping[str, Any],
    spec_tpl: Mapping[str, Any],
    history: Sequence[Mapping[str, Any]],
    recorded: dict[str, Any] | None,
) -> tuple[dict[str, Any] | None, Mapping[str, Any] | None, str | None]:
    """The rollback in effect, its target's entry, and the message of a fast rollback that
    starts now (``.fastrollback``: the spec's ``rollbackTo`` wins over an automatic one)."""
    ask = fastrollback.requested(spec)
    if ask is None:
        if recorded is not None and recorded.get("manual"):
            return None, None, None  # the field cleared: the spec's template again
        rollback, kept = _still_rolled_back(history, recorded, spec_tpl)
        return rollback, kept, None
    entry, _ = fastrollback.resolve(history, recorded, ask)
    if entry is None:
        return None, None, None  # a field error: the reconciler moves nothing
    rollback = fastrollback.record(entry, ask, hash_of(spec_tpl), spec_hash_of(spec_tpl))
    same = (
        recorded is not None
        and recorded.get("manual")
        and recorded.get("toRevision") == rollback["toRevision"]
    )
    message = (
        None
        if same
        else (
            f"spec.rollout.rollbackTo: every pod to revision {entry['revision']} "
            f"({entry['templateHash']}) at once, skipping the rollout's steps"
        )
    )
    return rollback, entry, message


def _progressed(
    prog: dict[str, Any], target_hash: str, available: int, old: int, now: datetime.datetime
) -> tuple[dict[str, Any], bool]:
    """The progress record after this pass, and whether the rollout moved since the last."""
    if prog.get("templateHash") != target_hash or _parse(str(prog.get("at", ""))) is None:
        return {"templateHash": target_hash, "at": _time(now), "available": available, "old": old}, False
    moved = available > int(prog.get("available", 0)) or old < int(prog.get("old", 0))
    # Counts go down too (a pod lost): the next gain is progress again.
    prog.update(available=available, old=old)
    if moved:
        prog["at"] = _time(now)
    return prog, moved


def _judge(
    last: dict[str, Any],
    *,
    spec: Mapping[str, Any],
    pods: Sequence[PodView],
    target_hash: str,
    prog: dict[str, Any],
    paused: bool,
    now: datetime.datetime,
) -> dict[str, Any]:
    """Set the current revision's outcome from the pods and the deadline; returns the progress."""
    active = [p for p in pods if p.active]
    min_ready = min_ready_seconds(spec)
    available = sum(p.template_hash == target_hash and is_available(p, min_ready, now) for p in active)
    old = sum(p.template_hash != target_hash for p in active)
    prog, moved = _progressed(prog, target_hash, available, old, now)
    if moved and last["outcome"] == DEADLINE_EXCEEDED:
        last["outcome"] = PROGRESSING  # progress again: back to True, as for a Deployment
        last.pop("finishedAt", None)
    if paused:
        prog["paused"] = True
    elif prog.pop("paused", False):
        prog["at"] = _time(now)  # resumed: the deadline counts from now
    if old == 0 and available >= int(spec.get("replicas", 0)):
        if last["outcome"] in (PROGRESSING, DEADLINE_EXCEEDED):
            last["outcome"] = AVAILABLE
            last["finishedAt"] = _time(now)
        return prog
    since = _parse(str(prog["at"]))
    late = since is not None and (now - since).total_seconds() > progress_deadline(spec)
    if last["outcome"] == PROGRESSING and not paused and late:
        last["outcome"] = DEADLINE_EXCEEDED
        last["finishedAt"] = _time(now)
    return prog


def track(
    spec: Mapping[str, Any],
    spec_tpl: dict[str, Any],
    current: Mapping[str, Any] | None,
    pods: Sequence[PodView],
    now: datetime.datetime,
    *,
    hold: bool = False,
    abort: str | None = None,
) -> Rollout:
    """The rollout after this pass, from the status (``current``) and the pods (``hold``: it
    waits by design, a canary's pause step: the deadline does not run, as while paused;
    ``abort``: a canary analysis failed, with these figures: back to the last available
    revision now, as an automatic rollback, ``status.rollback.analysis`` saying why)."""
    current = current or {}
    spec_hash = hash_of(spec_tpl)
    history = [dict(e) for e in current.get("history") or ()]
    options = spec.get("rollout") or {}
    paused = options.get("paused") is True
    rollback, kept, fast = _rollback_in_effect(spec, spec_tpl, history, current.get("rollback"))
    paused = paused and rollback is None  # a fast rollback skips the pause
    target_tpl, target_hash = spec_tpl, spec_hash
    if kept is not None:
        target_tpl, target_hash = dict(kept["template"]), str(kept["templateHash"])

    prog = dict(current.get("progress") or {})
    rolled_back: str | None = None
    no_target: str | None = None
    for _ in range(2):  # a second round only after starting a rollback
        if not history or history[-1].get("templateHash") != target_hash:
            if history and history[-1].get("outcome") == PROGRESSING:
                history[-1]["outcome"] = SUPERSEDED
                history[-1]["finishedAt"] = _time(now)
            entry = _entry(history, target_tpl, target_hash, now)
            if rollback is not None and target_hash != spec_hash:
                entry["rollbackOf"] = int(rollback["toRevision"])
            history.append(entry)
        last = history[-1]
        prog = _judge(
            last, spec=spec, pods=pods, target_hash=target_hash, prog=prog, paused=paused or hold, now=now
        )
        aborting = abort is not None and last["outcome"] == PROGRESSING
        if (
            (last["outcome"] != DEADLINE_EXCEEDED and not aborting)
            or "rollbackOf" in last
            or rollback is not None
        ):
            break
        if options.get("autoRollback") is not True and not aborting:
            break
        target = _target(history, spec_tpl)
        if target is None:
            no_target = "no earlier revision that became available (with its template kept) to roll back to"
            break
        last["outcome"] = ROLLED_BACK
        rollback = {
            "fromHash": spec_hash,
            "fromSpecHash": spec_hash_of(spec_tpl),
            "toRevision": int(target["revision"]),
        }
        target_tpl, target_hash = dict(target["template"]), str(target["templateHash"])
        rolled_back = (
            f"revision {last['revision']} ({last['templateHash']}) made no progress for "
            f"{progress_deadline(spec)}s: rolling back to revision {target['revision']} "
            f"({target['templateHash']})"
        )
        if aborting:
            rollback["analysis"] = str(abort)
            rolled_back = (
                f"canary revision {last['revision']} ({last['templateHash']}) failed its analysis, "
                f"{abort}: back to revision {target['revision']} ({target['templateHash']})"
            )

    history = _bounded(history, rollback)
    return Rollout(
        template=target_tpl,
        hash=target_hash,
        revision=int(history[-1]["revision"]),
        history=history,
        progress=prog,
        rollback=rollback,
        paused=paused,
        rolled_back=rolled_back,
        no_target=no_target,
        fast=fast,
    )


def deadline_in(state: Rollout, spec: Mapping[str, Any], now: datetime.datetime) -> float | None:
    """Seconds until the current rollout's progress deadline passes (the pass to run then)."""
    if state.outcome != PROGRESSING or state.paused or state.progress.get("paused"):
        return None
    since = _parse(str(state.progress.get("at", "")))
    if since is None:
        return None
    left = progress_deadline(spec) - (now - since).total_seconds()
    return max(0.0, left) + 1.0  # just past it: the check is "more than the deadline"
