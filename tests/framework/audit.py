"""What the operators really sent: the local API server's audit log.

The local control plane records every request a ServiceAccount of
``localcluster.cluster.AUDITED_NAMESPACE`` makes (the operators under test run as such accounts). Unlike
Events, which an operator posts from a queue and loses when it is SIGKILLed, the audit log
records every write the API server received, so "created exactly two pods" can be asserted on
it across kills.
"""

from __future__ import annotations

import json
from typing import Any

from tests.framework.cluster import Cluster


def requests(cluster: Cluster, *, namespace: str, resource: str, verb: str) -> list[dict[str, Any]]:
    """Audit events of ``verb`` on ``resource`` in ``namespace``, in the order they were received."""
    found = []
    for line in cluster.need_local().audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if (
            event.get("verb") == verb
            and ref.get("resource") == resource
            and ref.get("namespace") == namespace
        ):
            found.append(event)
    return sorted(found, key=lambda e: e["requestReceivedTimestamp"])


def created(cluster: Cluster, namespace: str, resource: str) -> list[str]:
    """Names of the ``resource`` objects the API server accepted a create of, in order."""
    return [
        e["objectRef"].get("name", "")
        for e in requests(cluster, namespace=namespace, resource=resource, verb="create")
        if int((e.get("responseStatus") or {}).get("code") or 0) < 400
    ]


def made_by(cluster: Cluster, user: str, *, resource: str, verb: str = "create") -> list[dict[str, Any]]:
    """Audit events of ``user``'s ``verb`` on ``resource``, cluster-scoped ones included (a
    TokenReview has no namespace), in the order they were received."""
    found = []
    for line in cluster.need_local().audit_log.read_text().splitlines():
        event = json.loads(line)
        if (
            event.get("verb") == verb
            and (event.get("user") or {}).get("username") == user
            and (event.get("objectRef") or {}).get("resource") == resource
        ):
            found.append(event)
    return sorted(found, key=lambda e: e["requestReceivedTimestamp"])
