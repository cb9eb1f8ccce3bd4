"""What a TDSet's spec lets its author obtain beyond their own rights, and the checks of those
rights at admission (``shared.api.access``).

``scaleTargetRef``: the operator writes the target's ``/scale``, so naming one requires
``update`` on that object's ``scale`` subresource. The group is the apiVersion's; the resource
is the kind's plural, which the operator learns from discovery: the policy knows the plurals of
the kinds the operator is granted (``KNOWN_PLURALS``) and takes the lowercase kind plus
``s`` for any other (the plural kubebuilder and operator-sdk give a kind); a kind whose plural
differs is checked on a resource that does not exist, so only a user granted every resource of
its group passes. ``holidays.configMapRef``: the operator reads that ConfigMap into the
schedule, which requires ``get`` on it.
"""

from __future__ import annotations

from shared.api.access import AccessPolicy, Right

# group/Kind -> resource, for the targets the operator's own RBAC covers.
KNOWN_PLURALS = {
    "apps/Deployment": "deployments",
    "apps/StatefulSet": "statefulsets",
    "apps/ReplicaSet": "replicasets",
    "demo.k8s.io/WebServer": "webservers",
}
_REF = "object.spec.scaleTargetRef"
_KNOWN = "{" + ", ".join(f"'{k}': '{v}'" for k, v in KNOWN_PLURALS.items()) + "}"

POLICIES = (
    AccessPolicy(
        suffix="scale-target",
        summary="spec.scaleTargetRef needs update on the target's scale subresource",
        variables=(
            ("group", f"{_REF}.apiVersion.contains('/') ? {_REF}.apiVersion.split('/')[0] : ''"),
            (
                "resource",
                f"(variables.group + '/' + {_REF}.kind) in {_KNOWN} ? "
                f"{_KNOWN}[variables.group + '/' + {_REF}.kind] : {_REF}.kind.lowerAscii() + 's'",
            ),
        ),
        rights=(
            Right(
                field="spec.scaleTargetRef",
                when=f"has({_REF})",
                verb="update",
                group="variables.group",
                resource="variables.resource",
                subresource="scale",
                name=f"{_REF}.name",
                why="the operator sets its replicas",
            ),
        ),
    ),
    AccessPolicy(
        suffix="holidays",
        summary="spec.holidays.configMapRef needs get on that ConfigMap",
        rights=(
            Right(
                field="spec.holidays.configMapRef",
                when="has(object.spec.holidays) && has(object.spec.holidays.configMapRef)",
                verb="get",
                group="''",
                resource="'configmaps'",
                name="object.spec.holidays.configMapRef.name",
                why="the operator reads its dates",
            ),
        ),
    ),
)
