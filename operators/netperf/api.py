"""Every call the Netperf operator makes to the Kubernetes API.

Pods: create, get (after a create answered AlreadyExists), delete. The Netperf: status
writes. Results come from the client pod's status (termination message) seen by the watch,
so no ``pods/log`` permission is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.netperf.schema import GROUP, PLURAL, VERSION
from shared.kube import ApiError, KubeClient, namespaced
from shared.statuses import StatusWriter


class NetperfAPI:
    def __init__(self, kube: KubeClient | None = None) -> None:
        self.kube = kube or KubeClient()
        self.status = StatusWriter(self.kube, GROUP, VERSION, PLURAL)

    async def create_pod(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create the pod; when it already exists (a restart, a stale cache), return the existing one."""
        try:
            return await self.kube.create(namespaced(namespace, "pods"), body)
        except ApiError as exc:
            if exc.status != 409:
                raise
        return await self.kube.get(namespaced(namespace, "pods", body["metadata"]["name"]))

    async def delete_pod(self, namespace: str, name: str) -> bool:
        """Delete the pod; False when it was already gone."""
        try:
            await self.kube.delete(namespaced(namespace, "pods", name), {"propagationPolicy": "Background"})
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True
