"""The one-port Service an operator may put in front of its pods: build, compare, converge.

WebServer and TDSet both optionally expose their pods through a Service named like the owner.
What is compared is only what the operator sets (type, selector, port, target port, a requested
node port), so fields the API server fills in (cluster IP, allocated node port) never cause
an update loop.

**Never someone else's Service.** A Service is ours only when its controller reference has the
owner's UID. When the name is taken by another object (a user's Service, or one that belongs to
a WebServer and a TDSet sharing a name) :func:`converge` raises :class:`ServiceConflictError`
and touches nothing; the caller reports it (condition + Warning Event) and retries. The one
exception is an orphan of ours — no controller, and the labels this operator gives the owner of
that name (left by ``kubectl delete --cascade=orphan``): it is adopted, as the ReplicaSet
controller adopts, with a UID-preconditioned patch. Updates and deletes carry the Service's UID
as a precondition, so a Service re-created by someone else under the same name after ours went
is never written by a stale cache.

**Exactly the desired fields.** An update sets type, selector and ports whole (a JSON patch:
a merge patch cannot remove a selector key someone added, so it was sent again on every pass
and never repaired anything). The target port may be a port *name*: a Service targeting the
pods' named port follows each pod to its own port number during a rollout that changes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shared import ownership
from shared.kube import ApiError, KubeClient, namespaced


class ServiceConflictError(ownership.ConflictError):
    """The Service's name is held by an object this owner does not control."""

    reason = "ServiceConflict"


def manifest(
    owner: Mapping[str, Any],
    app: str,
    *,
    selector: Mapping[str, str],
    port: int,
    target_port: int | str,
    service_type: str = "ClusterIP",
    node_port: int | None = None,
) -> dict[str, Any]:
    """A Service named like ``owner``, controller-owned by it, with one TCP port ``http``."""
    port_spec: dict[str, Any] = {"name": "http", "port": port, "targetPort": target_port, "protocol": "TCP"}
    if node_port:
        port_spec["nodePort"] = node_port
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": owner["metadata"]["name"]},
        "spec": {"type": service_type, "selector": dict(selector), "ports": [port_spec]},
    }
    return ownership.adopt(body, owner, app, "service")


def view(body: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a Service this operator manages (kept in the owner cache)."""
    spec = body.get("spec") or {}
    ports = spec.get("ports") or [{}]
    return {
        "name": body["metadata"]["name"],
        "uid": body["metadata"].get("uid"),
        "type": spec.get("type"),
        "selector": spec.get("selector") or {},
        "port": ports[0].get("port"),
        "targetPort": ports[0].get("targetPort"),
        "nodePort": ports[0].get("nodePort"),
    }


def differs(observed: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    want = view(wanted)
    # nodePort is allocated by the API server when not requested: only compare a requested one.
    keys = [k for k in want if k != "uid" and (k != "nodePort" or want["nodePort"] is not None)]
    return any(observed.get(k) != want[k] for k in keys)


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
    :class:`ServiceConflictError` when the wanted name belongs to someone else; adopts an
    orphan of ours holding it.
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
                if exc.status not in (404, 409):
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
            if exc.status != 409:
                raise
        # The name is taken and our cache does not show it as ours: find out whose it is.
        existing = await kube.get(namespaced(namespace, "services", name))
        app = (wanted["metadata"].get("labels") or {}).get(ownership.NAME, "")
        if ownership.adoptable(existing, app, owner["metadata"]["name"]):
            existing = await kube.merge_patch(
                namespaced(namespace, "services", name), ownership.adoption_patch(existing, owner)
            )
            done.append(("AdoptedService", f"Adopted orphaned service {name}"))
        if not ownership.is_controlled_by(existing, owner["metadata"]["uid"]):
            raise ServiceConflictError(
                f"a Service named {name} exists and is not controlled by this {owner['kind']} "
                f"(controller: {ownership.holder(existing)}); delete or rename it, or set "
                "spec.service.enabled to false"
            )
        current = view(existing)
        if not differs(current, wanted):
            return done
    spec = wanted["spec"]
    await kube.json_patch(
        namespaced(namespace, "services", name),
        [{"op": "add", "path": f"/spec/{key}", "value": spec[key]} for key in ("type", "selector", "ports")],
        uid=current["uid"],
    )
    return [*done, ("UpdatedService", f"Updated service {name}")]
