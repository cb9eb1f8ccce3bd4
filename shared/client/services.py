"""Converging the one-port Service an operator may put in front of its pods.

The Service itself (manifest, the managed fields, their comparison) is pure data in
``shared.api.services``; this module writes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared.api import ownership
from shared.api.errors import ApiError, Conflict, Invalid, NotFound
from shared.api.services import ServiceConflictError, differs, view
from shared.client.kube import KubeClient, namespaced


async def converge(
    kube: KubeClient,
    namespace: str,
    observed: Sequence[Mapping[str, Any]],
    wanted: Mapping[str, Any] | None,
    *,
    owner: Mapping[str, Any],
) -> list[tuple[str, str]]:
    """Create, update or delete the Service; returns (Event reason, message) for what was done.

    ``observed`` are the owner's Services from the cache (controlled by ``owner``); raises
    ``ServiceConflictError`` when the wanted name belongs to someone else; adopts an
    orphan of ours holding it.

    **Never someone else's Service.** A Service is ours only when its controller reference has the
    owner's UID. When the name is taken by another object (a user's Service, or one that belongs to
    a WebServer and a TDSet sharing a name) ``converge`` raises ``ServiceConflictError``
    and touches nothing; the caller reports it (condition + Warning Event) and retries. The one
    exception is an orphan of ours — no controller, and the labels this operator gives the owner of
    that name (left by ``kubectl delete --cascade=orphan``): it is adopted, as the ReplicaSet
    controller adopts, with a UID-preconditioned patch. Updates and deletes carry the Service's UID
    as a precondition, so a Service re-created by someone else under the same name after ours went
    is never written by a stale cache.

    **Exactly the desired fields.** An update sets type, selector and ports whole (a JSON patch:
    a merge patch cannot remove a selector key someone added: it would be sent again on every
    pass and never repair anything).
    """
    done: list[tuple[str, str]] = []
    if wanted is None:
        for svc in observed:
            try:
                await kube.delete(
                    namespaced(namespace, "services", svc["name"]),
                    {"preconditions": {"uid": svc["uid"]}} if svc.get("uid") else None,
                )
            except ApiError as exc:
                # 404: gone already; 409: the name now holds another object (not ours to delete).
                if not isinstance(exc, (NotFound, Conflict)):
                    raise
                continue
            done.append(("DeletedService", f"Deleted service {svc['name']}"))
        return done
    name = wanted["metadata"]["name"]
    current = next((s for s in observed if s["name"] == name), None)
    if current is not None and not differs(current, wanted):
        return done
    if current is None:
        try:
            await kube.create(namespaced(namespace, "services"), wanted)
            return [("CreatedService", f"Created service {name}")]
        except ApiError as exc:
            if not isinstance(exc, Conflict):
                raise
        # The name is taken and our cache does not show it as ours: find out whose it is.
        existing = await kube.get(namespaced(namespace, "services", name))
        app = (wanted["metadata"].get("labels") or {}).get(ownership.NAME, "")
        if ownership.classify(existing, owner, app) is ownership.Holder.ORPHAN:
            existing = await kube.merge_patch(
                namespaced(namespace, "services", name), ownership.adoption_patch(existing, owner)
            )
            done.append(("AdoptedService", f"Adopted orphaned service {name}"))
        if ownership.classify(existing, owner, app) is not ownership.Holder.OURS:
            raise ServiceConflictError(_taken(name, owner, existing))
        current = view(existing)
        if not differs(current, wanted):
            return done
    if not await _update(kube, namespaced(namespace, "services", name), wanted, current, owner):
        return done
    return [*done, ("UpdatedService", f"Updated service {name}")]


async def _update(
    kube: KubeClient,
    path: str,
    wanted: Mapping[str, Any],
    current: Mapping[str, Any],
    owner: Mapping[str, Any],
) -> bool:
    """Set type, selector and ports whole on the Service ``current`` (UID-preconditioned);
    False when it is gone."""
    spec = wanted["spec"]
    try:
        await kube.json_patch(
            path,
            [
                {"op": "add", "path": f"/spec/{key}", "value": spec[key]}
                for key in ("type", "selector", "ports")
            ],
            uid=current["uid"],
        )
    except ApiError as exc:
        # A stale cache: the Service it showed is gone (404), or another holds the name and the
        # UID ``test`` failed (a bare 422). Whose is the name now? Someone else's is a
        # conflict, said as such rather than as a failed write; when the name is free, the
        # deletion's watch event, still on its way to the cache, brings the pass that creates it.
        if isinstance(exc, NotFound):
            return False
        if not isinstance(exc, Invalid):
            raise
        existing = await kube.get_if_exists(path)
        if existing is None:
            return False
        if existing["metadata"].get("uid") == current["uid"]:
            raise
        if not ownership.is_controlled_by(existing, owner["metadata"]["uid"]):
            raise ServiceConflictError(_taken(wanted["metadata"]["name"], owner, existing)) from None
        raise
    return True


def _taken(name: str, owner: Mapping[str, Any], existing: Mapping[str, Any]) -> str:
    return (
        f"a Service named {name} exists and is not controlled by this {owner['kind']} "
        f"(controller: {ownership.holder(existing)}); delete or rename it, or set "
        "spec.service.enabled to false"
    )
