"""The PodDisruptionBudget an operator may keep over its pods: build and compare.

``maxUnavailable: 1`` over exactly the owner's pods, so a node drain or a cluster upgrade
evicts them one at a time, and ``unhealthyPodEvictionPolicy: AlwaysAllow``: a pod that is not
ready serves nothing, so evicting it never costs availability, and a rollout stuck on a bad
image never blocks a drain (with the default policy, not-ready pods can only be evicted while
the budget still allows a disruption). Only the fields set here are compared, never the
status or defaults the API server fills in.

Pure data: writing it (create, adopt, update, delete) is ``shared.client.budgets.converge``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.api import ownership
from shared.api.errors import ConflictError


class BudgetConflictError(ConflictError):
    """The PodDisruptionBudget's name is held by an object this owner does not control."""

    reason = "PodDisruptionBudgetConflict"


def manifest(owner: Mapping[str, Any], app: str, *, selector: Mapping[str, str]) -> dict[str, Any]:
    """A PodDisruptionBudget named like ``owner``, controller-owned by it."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": owner["metadata"]["name"]},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": dict(selector)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
    return ownership.adopt(body, owner, app, "disruption-budget")


def view(body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a PodDisruptionBudget this operator manages (kept in the owner cache)."""
    spec = body.get("spec") or {}
    return {
        "name": body["metadata"]["name"],
        "uid": body["metadata"].get("uid"),
        "maxUnavailable": spec.get("maxUnavailable"),
        "minAvailable": spec.get("minAvailable"),
        "selector": spec.get("selector") or {},
        "unhealthyPodEvictionPolicy": spec.get("unhealthyPodEvictionPolicy"),
    }


def differs(observed: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    want = view(wanted)
    return any(observed.get(k) != want[k] for k in want if k != "uid")
