"""Every call the Netperf operator makes to the Kubernetes API.

Pods: create, get (after a create answered AlreadyExists), delete. The service path's Services:
create, get (after AlreadyExists), delete. Namespaces: get (its Pod Security labels, before a
host-network run). The Netperf: status writes. Results come from the client pod's status
(termination message) seen by the watch, so no ``pods/log`` permission is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.netperf.schema import GROUP, PLURAL, VERSION
from shared.api import ownership
from shared.api.errors import ApiError, Conflict, Forbidden, NotFound
from shared.client.kube import KubeClient, namespaced
from shared.client.statuses import StatusWriter


class NetperfAPI:
    def __init__(self, kube: KubeClient | None = None, status: StatusWriter | None = None) -> None:
        self.kube = kube or KubeClient()
        # The builder's writer (Context.statuses), or one of its own (a test of the API alone).
        self.status = status or StatusWriter(self.kube, GROUP, VERSION, PLURAL)

    async def create_pod(self, namespace: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create the pod; (pod, True) when created, (existing pod, False) when it already existed.

        It already exists after a restart or when the cache lags, and also when a stranger took
        the name: the caller checks the owner.
        """
        try:
            return await self.kube.create(namespaced(namespace, "pods"), body), True
        except ApiError as exc:
            if not isinstance(exc, Conflict):
                raise
        return await self.kube.get(namespaced(namespace, "pods", body["metadata"]["name"])), False

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A live read (None when there is no such pod): for decisions the cache could get wrong."""
        return await self.kube.get_if_exists(namespaced(namespace, "pods", name))

    async def delete_pod(self, namespace: str, name: str, uid: str = "") -> bool:
        """Delete the pod; False when it was already gone or the name now holds another pod
        (the UID precondition: a pod of ours re-created by someone else is never deleted)."""
        options: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            await self.kube.delete(namespaced(namespace, "pods", name), options)
        except ApiError as exc:
            if isinstance(exc, NotFound) or (uid and isinstance(exc, Conflict)):
                return False
            raise
        return True

    async def adopt_pod(
        self, namespace: str, pod: Mapping[str, Any], owner: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Make ``owner`` the orphan's controller (the pod's UID is the patch's precondition)."""
        patch = ownership.adoption_patch(pod, owner)
        return await self.kube.merge_patch(namespaced(namespace, "pods", pod["metadata"]["name"]), patch)

    async def create_service(self, namespace: str, body: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """As ``create_pod``, for the service path's Service: the caller checks the owner."""
        try:
            return await self.kube.create(namespaced(namespace, "services"), body), True
        except ApiError as exc:
            if not isinstance(exc, Conflict):
                raise
        return await self.kube.get(namespaced(namespace, "services", body["metadata"]["name"])), False

    async def delete_service(self, namespace: str, name: str, uid: str) -> bool:
        """Delete our Service (the UID precondition: never one someone else put under its name)."""
        try:
            await self.kube.delete(
                namespaced(namespace, "services", name),
                {"propagationPolicy": "Background", "preconditions": {"uid": uid}},
            )
        except ApiError as exc:
            if isinstance(exc, (NotFound, Conflict)):
                return False
            raise
        return True

    async def namespace_labels(self, namespace: str) -> dict[str, str] | None:
        """The namespace's labels; None when the operator may not read namespaces (then the API
        server's admission is the only judge of a pod)."""
        try:
            found = await self.kube.get_if_exists(f"/api/v1/namespaces/{namespace}")
        except ApiError as exc:
            if isinstance(exc, Forbidden):
                return None
            raise
        return dict(((found or {}).get("metadata") or {}).get("labels") or {})
