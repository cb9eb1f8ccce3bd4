"""The leader-election Lease as data: its default name and the RBAC rules the elector needs.

Apart from ``shared.client.leader`` (the elector), so an operator's RBAC rules and the bundle
generator read them without importing a client.
"""

from __future__ import annotations

from typing import Any

GROUP = "coordination.k8s.io"
COORDINATION = f"{GROUP}/v1"


def lease_name(app: str) -> str:
    """The default name of ``app``'s Lease (``--leader-election-id``)."""
    return f"{app}-leader"


def rules(app: str) -> list[dict[str, Any]]:
    """The RBAC rules the elector needs, for the Lease's namespace.

    ``get`` and ``update`` are limited to the default Lease's name, so the operator cannot
    touch any other Lease (kube-controller-manager's, say) even where OLM grants its rules
    cluster-wide; ``create`` cannot be limited by name (RBAC has none before the object exists).
    """
    return [
        {"apiGroups": [GROUP], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": [GROUP],
            "resources": ["leases"],
            "resourceNames": [lease_name(app)],
            "verbs": ["get", "update"],
        },
    ]
