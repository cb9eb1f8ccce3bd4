"""Every call the WebServer operator makes to the Kubernetes API.

Also home of the delete expectations: the pods this process deleted recently. A watch can lag
behind our own deletes; without remembering them, the next pass would still count a pod we
just deleted and delete one more. An expectation ends when the watch shows the pod
terminating or gone, or after five minutes (the ReplicaSet controller's timeout).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.webserver.schema import GROUP, PLURAL, VERSION
from shared.api import ownership
from shared.api.errors import ApiError, Conflict, NotFound
from shared.client.kube import KubeClient, namespaced
from shared.client.statuses import StatusWriter
from shared.controller.caches import Orphan


class WebServerAPI:
    def __init__(self, kube: KubeClient | None = None, status: StatusWriter | None = None) -> None:
        self.kube = kube or KubeClient()
        # The builder's writer (Context.statuses), or one of its own (a test of the API alone).
        self.status = status or StatusWriter(self.kube, GROUP, VERSION, PLURAL)

    async def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create a pod: the pod as the API server stored it, or None when the name is taken
        (a stale view, not an error)."""
        try:
            return await self.kube.create(namespaced(namespace, "pods"), pod)
        except ApiError as exc:
            if isinstance(exc, Conflict):
                return None
            raise

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self.kube.get_if_exists(namespaced(namespace, "pods", name))

    async def adopt_pod(self, namespace: str, orphan: Orphan, owner: Mapping[str, Any]) -> dict[str, Any]:
        """Make ``owner`` the orphan's controller; the UID precondition (``metadata.uid`` in the
        patch) makes it fail if the name now holds another pod (the API server answers 422,
        "field is immutable"; 404 once the name is free), as the ReplicaSet controller's
        adoption does."""
        child = {"metadata": {"uid": orphan.uid, "ownerReferences": list(orphan.owner_references)}}
        patch = ownership.adoption_patch(child, owner)
        return await self.kube.merge_patch(namespaced(namespace, "pods", orphan.name), patch)

    async def delete_pod(self, namespace: str, name: str, uid: str = "") -> bool:
        """Delete a pod; False when it is already gone, or the name now holds another pod (the
        UID precondition: a pod of ours re-created by someone else is never deleted)."""
        try:
            await self.kube.delete(
                namespaced(namespace, "pods", name), {"preconditions": {"uid": uid}} if uid else None
            )
        except ApiError as exc:
            if isinstance(exc, NotFound) or (uid and isinstance(exc, Conflict)):
                return False
            raise
        return True
