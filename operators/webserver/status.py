"""WebServer status and conditions, computed from observed pods (pure)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from operators.webserver.canary import CanaryState
from operators.webserver.desired import (
    Plan,
    PodView,
    is_available,
    min_ready_seconds,
    rollout_limits,
    selector_string,
    template_hash,
)
from operators.webserver.rollout import DEADLINE_EXCEEDED, Rollout, progress_deadline
from shared.api import conditions
from shared.api.errors import Failure
from shared.api.validation import FieldError, degraded

REPLICA_FAILURE = "ReplicaFailure"


def min_available(spec: Mapping[str, Any]) -> int:
    replicas = int(spec.get("replicas", 0))
    return max(0, replicas - rollout_limits(spec).max_unavailable)


def compute(
    *,
    name: str,
    spec: Mapping[str, Any],
    generation: int,
    pods: Sequence[PodView],
    plan: Plan,
    failure: Failure | None,
    current: Mapping[str, Any] | None,
    now: datetime.datetime,
    config_hash: str = "",
    rollout: Rollout | None = None,
    canary: CanaryState | None = None,
    analysis: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The complete status to write for one pass (compare with the current one before writing).

    ``rollout``: the revisions and deadline (``.rollout``); its template is the current one;
    ``canary``: a canary step (``.canary``), ``analysis`` its figures for ``status.canary``.

    Conditions:

    - ``Available``: enough pods are available to serve: at least ``replicas - maxUnavailable`` (the
      rollout guarantee, ``.desired.rollout_limits``), as for a Deployment. A pod is available
      once it has been ready for ``minReadySeconds`` (``status.availableReplicas``).
    - ``Progressing``: True while pods are being created, deleted, replaced or waited for
      (reasons ``ScalingUp``, ``ScalingDown``, ``RollingUpdate``, ``WaitingForReady``); False with
      ``ReplicasReady`` once every desired pod runs the current template and is available. From
      ``.rollout``: False with ``ProgressDeadlineExceeded`` when the rollout missed its deadline,
      True with ``RollingBack`` then False with ``RolledBack`` during and after an automatic
      rollback (both of these also ``Stalled``: a human decides), Unknown with ``RolloutPaused``;
      True with ``FastRollback`` then False with ``RollbackComplete`` for ``rollout.rollbackTo``.
    - ``ReplicaFailure``: True with ``FailedCreate``/``FailedDelete`` and the API's message when
      the last pass could not create or delete a pod, like the ReplicaSet controller's condition;
      also ``FailedService``, and ``ServiceConflict`` when the Service's name belongs to someone
      else (left untouched, see ``shared.client.services``); ``ConfigMapNotFound`` when a
      referenced ConfigMap (any of the namespace) or one of its keys is
      missing (no pod of the template is created until it exists); ``CreateContainerConfigError``
      with the kubelet's message when a pod cannot start for its configuration (a missing Secret);
      ``PodDisruptionBudgetConflict`` when the budget's name belongs to someone else.
    - ``Degraded``: True with ``InvalidSpec`` and the field paths when the spec does not match the
      CRD schema (``shared.api.validation``); then nothing else is touched. True with
      ``CanaryAnalysisFailed`` and the figures while a canary whose analysis failed is rolled back.
    - ``Reconciling``/``Stalled``/``Ready`` (``shared.api.conditions.readiness``, what kstatus and
      Argo CD judge): ``Stalled`` for an invalid spec or a name conflict (``ServiceConflict``: only
      a human can resolve it); ``Reconciling`` while ``Progressing`` is True or a create/delete
      failed (retried, like a Deployment's ``ReplicaFailure``) and while a rollout is paused with
      old pods (``RolloutPaused``: not done); ``Ready`` once every pod runs the current template
      and is available, with no failure.
    """
    replicas = int(spec.get("replicas", 0))
    thash = rollout.hash if rollout is not None else template_hash(spec, config_hash)
    active = [p for p in pods if p.active]
    ready = sum(p.ready for p in active)
    min_ready = min_ready_seconds(spec)
    available_count = sum(is_available(p, min_ready, now) for p in active)
    if failure is None:
        # The kubelet cannot start a pod of the current template with its configuration.
        stuck = next((p for p in active if p.config_error and p.template_hash == thash), None)
        if stuck is not None:
            failure = Failure("CreateContainerConfigError", f"pod {stuck.name}: {stuck.config_error}")
    updated = sum(p.template_hash == thash for p in active)
    old = len(active) - updated

    def cond(type_: str, status: bool, reason: str, message: str) -> conditions.Condition:
        return conditions.make(type_, status, reason, message, generation=generation, now=now)

    if plan.create_slots and not old:
        progressing = cond(
            conditions.PROGRESSING, True, "ScalingUp", f"creating {len(plan.create_slots)} pod(s)"
        )
    elif old:
        progressing = cond(
            conditions.PROGRESSING, True, "RollingUpdate", f"{old} pod(s) run an older template"
        )
    elif plan.delete:
        progressing = cond(conditions.PROGRESSING, True, "ScalingDown", f"deleting {len(plan.delete)} pod(s)")
    elif ready < replicas:
        progressing = cond(conditions.PROGRESSING, True, "WaitingForReady", f"{ready}/{replicas} pods ready")
    elif available_count < replicas:
        progressing = cond(
            conditions.PROGRESSING,
            True,
            "WaitingForReady",
            f"{available_count}/{replicas} pods available (ready for minReadySeconds {min_ready})",
        )
    else:
        progressing = cond(conditions.PROGRESSING, False, "ReplicasReady", f"{ready}/{replicas} pods ready")

    stalled: Failure | None = None
    if rollout is not None:
        progressing, stalled = _rollout_progress(rollout, spec, progressing, cond)
    if canary is not None and stalled is None:
        progressing = _canary_progress(canary, progressing, cond)

    need = min_available(spec)
    available = cond(
        conditions.AVAILABLE,
        available_count >= need,
        "MinimumReplicasAvailable" if available_count >= need else "MinimumReplicasUnavailable",
        f"{available_count} available, {need} required" if min_ready else f"{ready} ready, {need} required",
    )
    if failure:
        replica_failure = cond(REPLICA_FAILURE, True, failure[0], failure[1])
    else:
        replica_failure = cond(REPLICA_FAILURE, False, "NoFailures", "all creates and deletes succeeded")

    # A paused rollout with old pods is not done either: Reconciling, never Ready (as kstatus
    # judges a paused Deployment mid-rollout: InProgress).
    pending = (
        (progressing["reason"], progressing["message"])
        if progressing["status"] in ("True", "Unknown")
        else None
    )
    readiness = conditions.readiness(
        stalled=failure if failure and conditions.needs_a_human(failure[0]) else stalled,
        reconciling=failure or pending,
        ready=(progressing["reason"], progressing["message"]),
        generation=generation,
        now=now,
    )
    previous = (current or {}).get("conditions")
    fields = rollout.status_fields() if rollout is not None else {}
    # None removes it (the status writer drops nulls from the status it writes whole).
    fields["canary"] = _canary_field(canary, analysis)
    return {
        **fields,
        "replicas": len(active),
        "count": len(active),
        "readyReplicas": ready,
        "availableReplicas": available_count,
        "updatedReplicas": updated,
        "observedGeneration": generation,
        "selector": selector_string(name),
        "conditions": conditions.set_all(
            previous,
            available,
            progressing,
            replica_failure,
            _degraded(rollout, generation, now),
            *readiness,
        ),
    }


def _rollout_progress(
    rollout: Rollout, spec: Mapping[str, Any], progressing: conditions.Condition, cond: Any
) -> tuple[conditions.Condition, Failure | None]:
    """``Progressing`` as the rollout stands, and what stalls the WebServer (a human must act)."""
    revision = f"revision {rollout.revision}"
    if rollout.outcome == DEADLINE_EXCEEDED:
        message = f"{revision} ({rollout.hash}) made no progress for {progress_deadline(spec)}s"
        if rollout.no_target:
            message += f"; not rolled back: {rollout.no_target}"
        elif rollout.rollback is not None:
            message += "; it was itself a rollback, so it is not rolled back again"
        return cond(conditions.PROGRESSING, False, DEADLINE_EXCEEDED, message), Failure(
            DEADLINE_EXCEEDED, message
        )
    if rollout.manual and rollout.rollback is not None:
        return _fast_rollback_progress(rollout, revision, progressing, cond), None
    if rollout.rollback is not None:
        given_up = f"the spec's template ({rollout.rollback['fromHash']}) missed its progress deadline"
        if "analysis" in rollout.rollback:
            given_up = f"the spec's template ({rollout.rollback['fromHash']}) failed its canary analysis"
        target = f"revision {rollout.rollback['toRevision']}'s template ({rollout.hash}, now {revision})"
        if progressing["status"] == "True":
            message = f"{given_up}: rolling back to {target}; {progressing['message']}"
            return cond(conditions.PROGRESSING, True, "RollingBack", message), None
        message = f"{given_up} and was rolled back to {target}; change the spec to roll forward"
        return cond(conditions.PROGRESSING, False, "RolledBack", message), Failure("RolledBack", message)
    if rollout.paused and progressing["reason"] == "RollingUpdate":
        message = f"spec.rollout.paused: {progressing['message']}, none replaced until resumed"
        return cond(conditions.PROGRESSING, "Unknown", "RolloutPaused", message), None
    return progressing, None


def _degraded(rollout: Rollout | None, generation: int, now: datetime.datetime) -> conditions.Condition:
    """``Degraded``: False, or True with the figures while a failed canary analysis holds it back."""
    figures = ((rollout.rollback or {}).get("analysis") if rollout is not None else None) or None
    if figures is None:
        return degraded([], generation=generation, now=now)
    return conditions.make(
        "Degraded", True, "CanaryAnalysisFailed", str(figures), generation=generation, now=now
    )


def _fast_rollback_progress(
    rollout: Rollout,
    revision: str,
    progressing: conditions.Condition,
    cond: Callable[..., conditions.Condition],
) -> conditions.Condition:
    """``Progressing`` of a fast rollback (``spec.rollout.rollbackTo``): never stalled, a human asked."""
    rollback = rollout.rollback or {}
    target = (
        f"spec.rollout.rollbackTo: revision {rollback.get('toRevision')}'s template "
        f"({rollout.hash}, now {revision})"
    )
    if progressing["status"] == "True":
        message = f"{target}, every pod at once; {progressing['message']}"
        return cond(conditions.PROGRESSING, True, "FastRollback", message)
    message = f"{target} runs on every pod; clear rollbackTo to roll the spec's template out"
    return cond(conditions.PROGRESSING, False, "RollbackComplete", message)


def _canary_field(canary: CanaryState | None, analysis: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``status.canary``: the step and split, and the analysis' figures when it runs."""
    if canary is None:
        return None
    field = canary.status_field()
    if analysis is not None:
        field["analysis"] = dict(analysis)
    return field


def _canary_progress(
    canary: CanaryState, progressing: conditions.Condition, cond: Callable[..., conditions.Condition]
) -> conditions.Condition:
    """``Progressing`` during a canary: the step, its weight and split; a pause step holding."""
    where = (
        f"canary revision {canary.revision} step {canary.step}/{canary.steps} at weight {canary.weight}%: "
        f"{canary.canary_pods} canary, {canary.stable_pods} stable pods (revision {canary.stable_revision})"
    )
    if canary.promoted or progressing["reason"] == "RolloutPaused":
        return progressing  # every pod to the canary now: the rolling update's own words
    if canary.analyzing:
        return cond(conditions.PROGRESSING, True, "CanaryAnalysis", f"{where}; the analysis runs")
    if canary.waiting is not None:
        return cond(conditions.PROGRESSING, "Unknown", "CanaryPaused", f"{where}; {canary.waiting}")
    return cond(conditions.PROGRESSING, True, "CanaryStep", f"{where}; {progressing['message']}")


def invalid(
    *, errors: list[FieldError], generation: int, current: Mapping[str, Any] | None, now: datetime.datetime
) -> dict[str, Any]:
    """Status for a spec that fails the schema: ``Degraded``, ``Stalled`` and the generation change."""
    current = dict(current or {})
    current["observedGeneration"] = generation
    cause = degraded(errors, generation=generation, now=now)
    current["conditions"] = conditions.set_all(
        current.get("conditions"), cause, *conditions.stalled_by(cause, now=now)
    )
    return current
