"""Owner references and the standard ``app.kubernetes.io/*`` labels for every child object.

Children carry a controller owner reference (``controller: true``, ``blockOwnerDeletion:
true``) so the garbage collector deletes them with their owner, and so an operator can tell its
own children from look-alikes: a child is ours only if its controller reference has the owner's
UID. Labels mark ``managed-by`` so server-side label selectors (see ``shared.controller.caches``) keep
everything else out of the operator's watches.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from typing import Any

MANAGED_BY = "k8s-operators-py"
PART_OF = "k8s-operators-py"

NAME = "app.kubernetes.io/name"
INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
PART_OF_LABEL = "app.kubernetes.io/part-of"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
VERSION = "app.kubernetes.io/version"


def owner_reference(owner: Mapping[str, Any]) -> dict[str, Any]:
    """The controller owner reference pointing at ``owner`` (a full object body)."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(child: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The child's controller owner reference, if any."""
    refs = (child.get("metadata") or {}).get("ownerReferences") or []
    return next((r for r in refs if r.get("controller")), None)


def is_controlled_by(child: Mapping[str, Any], owner_uid: str) -> bool:
    ref = controller_of(child)
    return ref is not None and ref.get("uid") == owner_uid


def adoptable(child: Mapping[str, Any], app: str, owner_name: str) -> bool:
    """An orphan the owner named ``owner_name`` may adopt (the ReplicaSet controller's rule): no
    controller, not terminating, and the labels this project's ``app`` gives its children."""
    meta = child.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        controller_of(child) is None
        and not meta.get("deletionTimestamp")
        and labels.get(MANAGED_BY_LABEL) == MANAGED_BY
        and labels.get(NAME) == app
        and labels.get(INSTANCE) == owner_name
    )


class Holder(enum.Enum):
    """Whose an existing object of a child's name is, from the owner's point of view."""

    OURS = "ours"  # its controller reference has the owner's UID
    ORPHAN = "orphan"  # no controller and labelled for this owner: to adopt (``adoptable``)
    PREDECESSOR = "predecessor"  # a deleted owner's of the same kind and name (delete && apply)
    FOREIGN = "foreign"  # anyone else's: left exactly as it is


def classify(child: Mapping[str, Any], owner: Mapping[str, Any], app: str) -> Holder:
    """The one ownership triage every operator uses on a name it wants and finds taken."""
    meta = owner["metadata"]
    if is_controlled_by(child, meta["uid"]):
        return Holder.OURS
    if adoptable(child, app, meta["name"]):
        return Holder.ORPHAN
    ref = controller_of(child)
    if ref is not None and ref.get("kind") == owner.get("kind") and ref.get("name") == meta["name"]:
        return Holder.PREDECESSOR
    return Holder.FOREIGN


def adoption_patch(child: Mapping[str, Any], owner: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch making ``owner`` the controller of the orphan ``child``, as the ReplicaSet
    controller adopts: the child's other owner references kept, and its UID in the patch as a
    precondition (422 if the name now holds another object, see
    ``shared.client.kube.is_uid_mismatch``)."""
    meta = child.get("metadata") or {}
    refs = [dict(r) for r in meta.get("ownerReferences") or () if not r.get("controller")]
    return {"metadata": {"uid": meta.get("uid"), "ownerReferences": [*refs, owner_reference(owner)]}}


def holder(child: Mapping[str, Any]) -> str:
    """Who controls ``child``, for messages."""
    ref = controller_of(child)
    return f"{ref['kind']} {ref['name']} (uid {ref.get('uid')})" if ref else "no controller"


def standard_labels(app: str, instance: str, component: str, version: str | None = None) -> dict[str, str]:
    """``app.kubernetes.io/*`` labels; ``app`` is the operator's kind in lower case."""
    labels = {
        NAME: app,
        INSTANCE: instance,
        COMPONENT: component,
        PART_OF_LABEL: PART_OF,
        MANAGED_BY_LABEL: MANAGED_BY,
    }
    if version:
        labels[VERSION] = version
    return labels


def managed_selector(app: str) -> str:
    """Server-side label selector matching every child an operator for ``app`` creates."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{NAME}={app}"


def adopt(
    child: Mapping[str, Any],
    owner: Mapping[str, Any],
    app: str,
    component: str,
    extra_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Return a copy of ``child`` labelled and controller-owned by ``owner``.

    The standard labels are applied last, so neither the child's own labels nor
    ``extra_labels`` (often user-supplied) can spoof ``managed-by`` or the instance.
    """
    out = copy.deepcopy(dict(child))
    meta = out.setdefault("metadata", {})
    meta.setdefault("namespace", owner["metadata"].get("namespace"))
    labels = {**(extra_labels or {}), **meta.get("labels", {})}
    labels.update(standard_labels(app, owner["metadata"]["name"], component))
    meta["labels"] = labels
    meta["ownerReferences"] = [owner_reference(owner)]
    return out
