"""Converging the PodDisruptionBudget an operator may keep over its pods.

The budget itself is pure data in ``shared.api.budgets``; this module writes it, with the
rules of ``shared.client.services``: never someone else's object (a name held by an object
the owner does not control raises ``BudgetConflictError`` and touches
nothing), an orphan of ours (``kubectl delete --cascade=orphan``) is adopted, and updates and
deletes carry the budget's UID as a precondition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shared.api import ownership
from shared.api.budgets import BudgetConflictError, differs, view
from shared.api.errors import ApiError, Conflict, NotFound
from shared.client.kube import KubeClient, namespaced

PLURAL = "poddisruptionbudgets"
GROUP_VERSION = "policy/v1"


def _path(namespace: str, name: str = "") -> str:
    return namespaced(namespace, PLURAL, name, GROUP_VERSION)


async def _delete_all(
    kube: KubeClient, namespace: str, observed: Sequence[Mapping[str, Any]]
) -> list[tuple[str, str]]:
    done: list[tuple[str, str]] = []
    for pdb in observed:
        try:
            await kube.delete(
                _path(namespace, pdb["name"]),
                {"preconditions": {"uid": pdb["uid"]}} if pdb.get("uid") else None,
            )
        except ApiError as exc:
            # 404: gone already; 409: the name now holds another object (not ours to delete).
            if not isinstance(exc, (NotFound, Conflict)):
                raise
            continue
        done.append(("DeletedPodDisruptionBudget", f"Deleted PodDisruptionBudget {pdb['name']}"))
    return done


async def converge(
    kube: KubeClient,
    namespace: str,
    observed: Sequence[Mapping[str, Any]],
    wanted: Mapping[str, Any] | None,
    *,
    owner: Mapping[str, Any],
    seen: Callable[[Mapping[str, Any]], object] = lambda _: None,
) -> list[tuple[str, str]]:
    """Create, update or delete the budget; returns (Event reason, message) for what was done.

    ``seen`` gets the budget as the API server answered a write or a read, for the owner's
    cache: the next pass, before the watch shows it, does not create it again."""
    if wanted is None:
        return await _delete_all(kube, namespace, observed)
    done: list[tuple[str, str]] = []
    name = wanted["metadata"]["name"]
    current = next((b for b in observed if b["name"] == name), None)
    if current is not None and not differs(current, wanted):
        return done
    if current is None:
        try:
            seen(await kube.create(_path(namespace), wanted))
            return [("CreatedPodDisruptionBudget", f"Created PodDisruptionBudget {name}")]
        except ApiError as exc:
            if not isinstance(exc, Conflict):
                raise
        existing = await kube.get(_path(namespace, name))
        app = (wanted["metadata"].get("labels") or {}).get(ownership.NAME, "")
        if ownership.classify(existing, owner, app) is ownership.Holder.ORPHAN:
            existing = await kube.merge_patch(
                _path(namespace, name), ownership.adoption_patch(existing, owner)
            )
            done.append(("AdoptedPodDisruptionBudget", f"Adopted orphaned PodDisruptionBudget {name}"))
        if ownership.classify(existing, owner, app) is ownership.Holder.OURS:
            seen(existing)
        else:
            raise BudgetConflictError(
                f"a PodDisruptionBudget named {name} exists and is not controlled by this "
                f"{owner['kind']} (controller: {ownership.holder(existing)}); delete or rename it, "
                "or set spec.disruptionBudget.enabled to false"
            )
        current = view(existing)
        if not differs(current, wanted):
            return done
    spec = wanted["spec"]
    ops: list[Mapping[str, Any]] = [{"op": "add", "path": f"/spec/{key}", "value": spec[key]} for key in spec]
    if current.get("minAvailable") is not None:
        ops.append({"op": "remove", "path": "/spec/minAvailable"})  # exclusive with maxUnavailable
    seen(await kube.json_patch(_path(namespace, name), ops, uid=current["uid"]))
    return [*done, ("UpdatedPodDisruptionBudget", f"Updated PodDisruptionBudget {name}")]
