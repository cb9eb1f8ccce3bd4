"""Every call the WebServer operator makes to the Kubernetes API.

Also home of the delete expectations: the pods this process deleted recently. A watch can lag
behind our own deletes; without remembering them, the next pass would still count a pod we
just deleted and delete one more. An expectation ends when the watch shows the pod
terminating or gone, or after five minutes (the ReplicaSet controller's timeout).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from operators.webserver.desired import PodView
from operators.webserver.schema import GROUP, PLURAL, VERSION
from shared.api import ownership
from shared.api.errors import ApiError, Conflict, NotFound
from shared.client.kube import KubeClient, namespaced
from shared.client.statuses import StatusWriter
from shared.controller.caches import Orphan

EXPECTATION_TTL = 300.0


class DeleteExpectations:
    def __init__(self) -> None:
        self._pending: dict[str, dict[str, float]] = {}

    def expect(self, owner_uid: str, names: Iterable[str]) -> None:
        deadline = time.monotonic() + EXPECTATION_TTL
        self._pending.setdefault(owner_uid, {}).update(dict.fromkeys(names, deadline))

    def cancel(self, owner_uid: str, names: Iterable[str]) -> None:
        """Deletes that failed: the pods are still there and must be counted."""
        pending = self._pending.get(owner_uid, {})
        for name in names:
            pending.pop(name, None)
        if not pending:
            self._pending.pop(owner_uid, None)

    def apply(self, owner_uid: str, pods: Sequence[PodView]) -> list[PodView]:
        """Pods as they will be: our pending deletes shown as terminating."""
        pending = self._pending.get(owner_uid, {})
        now = time.monotonic()
        seen_alive = {p.name for p in pods if not p.deleting}
        for name in list(pending):
            if name not in seen_alive or pending[name] < now:
                del pending[name]  # the watch caught up (or we gave up waiting)
        if not pending:
            # No empty dict kept for every WebServer that once scaled down.
            self._pending.pop(owner_uid, None)
        return [dataclasses.replace(p, deleting=True) if p.name in pending else p for p in pods]

    def forget(self, owner_uid: str) -> None:
        self._pending.pop(owner_uid, None)


class WebServerAPI:
    def __init__(self, kube: KubeClient | None = None) -> None:
        self.kube = kube or KubeClient()
        self.status = StatusWriter(self.kube, GROUP, VERSION, PLURAL)

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
