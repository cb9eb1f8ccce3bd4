"""The TDSet operator's RBAC rules: exactly the calls it makes, in the namespaces it watches.

Each rule names the code that makes the calls. The bundle's CSV grants these (namespaced
``permissions``), and the RBAC tests run the operator with a ServiceAccount holding nothing
else and compare the calls the API server saw (audit log) with them.
"""

from __future__ import annotations

from typing import Any

from operators.tdset.schema import APP, GROUP, PLURAL
from shared.api import leases

RULES: list[dict[str, Any]] = [
    # kopf watches TDSets (handlers.tdset_changed): list + watch.
    {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["list", "watch"]},
    # api.StatusWriter: the status subresource, merge patch.
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/status"], "verbs": ["patch"]},
    # Children carry ``blockOwnerDeletion``: where the OwnerReferencesPermissionEnforcement
    # admission plugin is on (OpenShift; the local API server), setting it needs update here.
    {"apiGroups": [GROUP], "resources": [f"{PLURAL}/finalizers"], "verbs": ["update"]},
    # kopf watches Deployments (handlers.deployment_changed); api.create_deployment, patch_deployment;
    # get_deployment after AlreadyExists (to tell ours from a stranger's). ``delete`` is never
    # called: adopting an orphaned Deployment sets an owner reference on it, which the
    # OwnerReferencesPermissionEnforcement admission plugin allows only to who may delete it.
    {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["create", "delete", "get", "list", "patch", "watch"],
    },
    # kopf watches Services (handlers.service_changed); shared.client.services.converge; get after
    # AlreadyExists (to tell ours from a stranger's).
    {
        "apiGroups": [""],
        "resources": ["services"],
        "verbs": ["create", "delete", "get", "list", "patch", "watch"],
    },
    # kopf watches HPAs (handlers.autoscaler_changed); api.patch_autoscaler (floor, restore).
    {
        "apiGroups": ["autoscaling"],
        "resources": ["horizontalpodautoscalers"],
        "verbs": ["list", "patch", "watch"],
    },
    # kopf.event: Events about each TDSet.
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    # shared.client.leader (--leader-elect, on in the bundle): its Lease, read and renewed by name,
    # created when missing. The CSV grants it where OLM puts the operator (and where it watches).
    *leases.rules(APP),
]
