"""Every call the WebServer operator makes to the Kubernetes API.

Also home of the delete expectations: the pods this process deleted recently. A watch can lag
behind our own deletes; without remembering them, the next pass would still count a pod we
just deleted and delete one more. An expectation ends when the watch shows the pod
terminating or gone, or after five minutes (the ReplicaSet controller's timeout).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.webserver.desired import PodView
from operators.webserver.schema import GROUP, PLURAL, VERSION
from shared.kube import api_client

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

    def apply(self, owner_uid: str, pods: Sequence[PodView]) -> list[PodView]:
        """Pods as they will be: our pending deletes shown as terminating."""
        pending = self._pending.get(owner_uid, {})
        now = time.monotonic()
        seen_alive = {p.name for p in pods if not p.deleting}
        for name in list(pending):
            if name not in seen_alive or pending[name] < now:
                del pending[name]  # the watch caught up (or we gave up waiting)
        return [
            PodView(p.name, p.template_hash, p.created, p.phase, p.scheduled, p.ready, True)
            if p.name in pending
            else p
            for p in pods
        ]

    def forget(self, owner_uid: str) -> None:
        self._pending.pop(owner_uid, None)


class WebServerAPI:
    def __init__(self, api: client.ApiClient | None = None) -> None:
        self._api = api
        self._core: client.CoreV1Api | None = None
        self._custom: client.CustomObjectsApi | None = None

    @property
    def core(self) -> client.CoreV1Api:
        if self._core is None:
            self._core = client.CoreV1Api(self._api or api_client())
        return self._core

    @property
    def custom(self) -> client.CustomObjectsApi:
        if self._custom is None:
            self._custom = client.CustomObjectsApi(self._api or api_client())
        return self._custom

    async def create_pod(self, namespace: str, pod: Mapping[str, Any]) -> bool:
        """Create a pod; False when it already exists (a stale view, not an error)."""
        try:
            await asyncio.to_thread(self.core.create_namespaced_pod, namespace, pod)
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    async def delete_pod(self, namespace: str, name: str) -> bool:
        """Delete a pod; False when it is already gone."""
        try:
            await asyncio.to_thread(self.core.delete_namespaced_pod, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def apply_service(self, namespace: str, service: Mapping[str, Any], exists: bool) -> None:
        name = service["metadata"]["name"]
        if exists:
            await asyncio.to_thread(self.core.patch_namespaced_service, name, namespace, dict(service))
            return
        try:
            await asyncio.to_thread(self.core.create_namespaced_service, namespace, dict(service))
        except ApiException as exc:
            if exc.status != 409:
                raise
            await asyncio.to_thread(self.core.patch_namespaced_service, name, namespace, dict(service))

    async def delete_service(self, namespace: str, name: str) -> None:
        try:
            await asyncio.to_thread(self.core.delete_namespaced_service, name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def write_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        await asyncio.to_thread(
            self.custom.patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            name,
            {"status": dict(status)},
        )
