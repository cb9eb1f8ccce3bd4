"""The Netperf operator's RBAC rules: exactly the calls it makes, in the namespaces it watches.

Each rule names the code that makes the calls. The bundle's CSV grants these (namespaced
``permissions``), and the RBAC tests run the operator with a ServiceAccount holding nothing
else and compare the calls the API server saw (audit log) with them.
"""

from __future__ import annotations

from typing import Any

from operators.netperf.schema import APP, GROUP, PLURAL
from shared.api import leases

RULES: list[dict[str, Any]] = [
    # kopf watches Netperfs (handlers.netperf_changed): list + watch.
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["list", "watch"]},
    # api.StatusWriter: the status subresource, merge patch.
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]},
    # Children carry ``blockOwnerDeletion``: where the OwnerReferencesPermissionEnforcement
    # admission plugin is on (OpenShift; the local API server), setting it needs update here.
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/finalizers"], "verbs": ["update"]},
    # kopf watches the pods (handlers.pod_changed); api.create_pod / delete_pod; get after
    # AlreadyExists; api.adopt_pod patches an orphan's owner references (then deletes it).
    {
        "apiGroups": [""],
        "resources": ["pods"],
        "verbs": ["create", "delete", "get", "list", "patch", "watch"],
    },
    # kopf.event: Events about each Netperf.
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    # shared.client.leader (--leader-elect, on in the bundle): its Lease, read and renewed by name,
    # created when missing. The CSV grants it where OLM puts the operator (and where it watches).
    *leases.rules(APP),
]
