"""The one-port Service an operator may put in front of its pods: build and compare.

WebServer and TDSet both optionally expose their pods through a Service named like the owner.
What is compared is only what the operator sets (type, selector, port, target port, a requested
node port), so fields the API server fills in (cluster IP, allocated node port) never cause
an update loop. The target port may be a port *name*: a Service targeting the pods' named port
follows each pod to its own port number during a rollout that changes it.

Pure data: writing the Service (create, adopt, update, delete) is
``shared.client.services.converge``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.api import ownership
from shared.api.errors import ConflictError


class ServiceConflictError(ConflictError):
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
