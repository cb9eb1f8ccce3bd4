"""Every call the TDSet operator makes to the Kubernetes API, and its patch expectations.

Expectations: after patching the Deployment (or an HPA), the watch cache can still show the
old object for a moment. A pass that ran then would take the old replica count for a manual
``kubectl scale`` and "revert" it again, with a misleading Event. So each patch records the
values the API server answered with (after admission: a policy may have rewritten what we
sent); until the cache shows them (or 30 s pass, in case the event was lost), the child is
treated as in flight and left alone — and the loop is woken when that time is up
(``PatchExpectations.next_expiry``), not at some later, unrelated wake-up.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from operators.tdset.schema import GROUP, PLURAL, VERSION
from operators.tdset.target import HOLDER
from shared.api.errors import ApiError, Conflict, NotFound
from shared.api.lru import LRU
from shared.client.kube import KubeClient, namespaced
from shared.client.statuses import StatusWriter


class StoredTemplates:
    """Per TDSet: the template hash it last wrote and the fields the API server stored for it
    (see ``operators.tdset.desired.template_current``)."""

    def __init__(self) -> None:
        self._stored: dict[str, tuple[str, dict[str, Any]]] = {}

    def remember(self, owner_uid: str, applied: str, fields: Mapping[str, Any]) -> None:
        self._stored[owner_uid] = (applied, dict(fields))

    def get(self, owner_uid: str, applied: str | None) -> dict[str, Any] | None:
        stored = self._stored.get(owner_uid)
        return stored[1] if stored is not None and stored[0] == applied else None

    def forget(self, owner_uid: str) -> None:
        self._stored.pop(owner_uid, None)


class TDSetAPI:
    def __init__(self, kube: KubeClient | None = None, status: StatusWriter | None = None) -> None:
        self.kube = kube or KubeClient()
        # The builder's writer (Context.statuses), or one of its own (a test of the API alone).
        self.status = status or StatusWriter(self.kube, GROUP, VERSION, PLURAL)
        self.targets = ScaleTargets(self.kube)

    async def create_deployment(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create the Deployment; None when one of that name already exists."""
        try:
            return await self.kube.create(namespaced(namespace, "deployments", group_version="apps/v1"), body)
        except ApiError as exc:
            if isinstance(exc, Conflict):
                return None
            raise

    async def get_deployment(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.kube.get(namespaced(namespace, "deployments", name, "apps/v1"))

    async def patch_deployment(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """A merge patch; ``metadata.uid`` in it (when set) is a precondition."""
        return await self.kube.merge_patch(namespaced(namespace, "deployments", name, "apps/v1"), patch)

    async def delete_deployment(self, namespace: str, name: str, uid: str) -> None:
        """Delete the TDSet's own Deployment (UID precondition); gone already is as good."""
        body = {"preconditions": {"uid": uid}, "propagationPolicy": "Background"} if uid else {}
        try:
            await self.kube.delete(namespaced(namespace, "deployments", name, "apps/v1"), body)
        except ApiError as exc:
            if not isinstance(exc, (NotFound, Conflict)):
                raise

    async def patch_autoscaler(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """A merge patch of the user's HPA; ``metadata.uid`` in it (when set) is a precondition."""
        path = namespaced(namespace, "horizontalpodautoscalers", name, "autoscaling/v2")
        await self.kube.merge_patch(path, patch)


# -- scale targets (spec.scaleTargetRef) ----------------------------------------------------------

# How long a group-version's discovery document is trusted: a CRD installed (or given a scale
# subresource) after a TDSet named it is seen within this time; a pass reading a target costs no
# discovery request in between (client-go caches discovery the same way, per group-version).
DISCOVERY_TTL = 60.0
# Group-versions whose discovery is kept at most: the key is what a TDSet's author writes
# (scaleTargetRef.apiVersion), so the cache has a size; the least recently used goes first.
DISCOVERY_ENTRIES = 128


def _group_version_path(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


class ScaleTargets:
    """The calls on a TDSet's scale target: discovery (cached), the object (its claim), its
    ``/scale``, and the listing of claims (``operators.tdset.target.HOLDER``)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._discovery: LRU[str, tuple[dict[str, Any] | None, float]] = LRU(DISCOVERY_ENTRIES)

    async def discover(self, api_version: str) -> dict[str, Any] | None:
        """The APIResourceList of ``api_version``, None when it is not served (cached)."""
        cached = self._discovery.get(api_version)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        try:
            found: dict[str, Any] | None = await self.kube.get(_group_version_path(api_version))
        except ApiError as exc:
            if not isinstance(exc, NotFound):
                raise
            found = None
        self._discovery.put(api_version, (found, time.monotonic() + DISCOVERY_TTL))
        return found

    def forget_discovery(self, api_version: str) -> None:
        """A target of ``api_version`` was missing: read its discovery again next time."""
        self._discovery.pop(api_version)

    @staticmethod
    def path(namespace: str, plural: str, name: str, api_version: str, sub: str = "") -> str:
        path = namespaced(namespace, plural, name, api_version)
        return f"{path}/{sub}" if sub else path

    async def get(self, namespace: str, plural: str, name: str, api_version: str) -> dict[str, Any] | None:
        """The target object; None when there is none."""
        return await self.kube.get_if_exists(self.path(namespace, plural, name, api_version))

    async def get_scale(self, namespace: str, plural: str, name: str, api_version: str) -> dict[str, Any]:
        return await self.kube.get(self.path(namespace, plural, name, api_version, "scale"))

    async def patch_scale(
        self,
        namespace: str,
        plural: str,
        name: str,
        api_version: str,
        replicas: int,
        *,
        uid: str = "",
        resource_version: str = "",
    ) -> dict[str, Any]:
        """``spec.replicas`` through ``/scale`` (a merge patch: what ``kubectl scale`` writes);
        ``uid`` (when set) is a precondition for Deployments, StatefulSets and ReplicaSets: their
        ``/scale`` refuses the write with 409 when the object's UID differs. A custom resource's
        ``/scale`` ignores it (kube-apiserver 1.34). ``resource_version`` (when set) is one for
        every kind: a Scale's resourceVersion is its object's, so the write fails (409) if the
        object changed since it was read."""
        patch: dict[str, Any] = {"spec": {"replicas": replicas}}
        meta = {"uid": uid} if uid else {}
        if resource_version:
            meta["resourceVersion"] = resource_version
        if meta:
            patch["metadata"] = meta
        return await self.kube.merge_patch(self.path(namespace, plural, name, api_version, "scale"), patch)

    async def patch(
        self, namespace: str, plural: str, name: str, api_version: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A merge patch of the object's metadata (the claim); ``uid`` and ``resourceVersion`` in
        it are preconditions."""
        return await self.kube.merge_patch(self.path(namespace, plural, name, api_version), patch)

    async def list_claimed(self, namespace: str, plural: str, api_version: str) -> list[dict[str, Any]]:
        """The objects of a kind carrying a claim, in ``namespace`` ("" for all)."""
        base = _group_version_path(api_version)
        path = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
        listing = await self.kube.get(path, params={"labelSelector": HOLDER})
        return list(listing.get("items") or [])
