"""What a Netperf's spec lets its author obtain beyond their own rights, and the checks of
those rights at admission (``shared.api.access``).

The operator's pods run its own image on the pod network: nothing a namespace user could not
ask of any workload. Two fields make more of them, and require ``create`` on pods in the
namespace, the right that lets a user run such pods directly (where Pod Security admits them):
``path: host`` (or ``host`` in ``compare``: both pods ``hostNetwork``) and an image that is not
the project's own netperf image (any program, run by the operator). ``serverNode`` and
``clientNode`` become required node affinity, which the scheduler honours like any workload's
(taints included): no right of their own.
"""

from __future__ import annotations

from operators.netperf import schema
from shared.api.access import AccessPolicy, Right

# The project's netperf image at any tag or digest (the CRD defaults spec.image to it; stored
# objects keep the default of the release that created them).
OWN_IMAGE = schema.DEFAULT_IMAGE.rsplit(":", 1)[0]
_POD_RIGHT = {"verb": "create", "group": "''", "resource": "'pods'"}

POLICIES = (
    AccessPolicy(
        suffix="pods",
        summary=(
            "path host (or host in compare) and an image other than the project's netperf image "
            "need create on pods in the namespace"
        ),
        rights=(
            Right(
                field="spec.path host",
                when=(
                    "(has(object.spec.path) && object.spec.path == 'host') || "
                    "(has(object.spec.compare) && 'host' in object.spec.compare)"
                ),
                why="the operator runs hostNetwork pods for it",
                **_POD_RIGHT,
            ),
            Right(
                field="spec.image other than " + OWN_IMAGE,
                when=(
                    f"has(object.spec.image) && !object.spec.image.startsWith('{OWN_IMAGE}:') && "
                    f"!object.spec.image.startsWith('{OWN_IMAGE}@')"
                ),
                why="the operator runs pods of that image",
                **_POD_RIGHT,
            ),
        ),
    ),
)
