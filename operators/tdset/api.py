"""Every call the TDSet operator makes to the Kubernetes API, and its patch expectations.

Expectations: after patching the Deployment (or an HPA), the watch cache can still show the
old object for a moment. A pass that ran then would take the old replica count for a manual
``kubectl scale`` and "revert" it again, with a misleading Event. So each patch records the
values the API server answered with (after admission: a policy may have rewritten what we
sent); until the cache shows them (or 30 s pass, in case the event was lost), the child is
treated as in flight and left alone — and the loop is woken when that time is up
(:meth:`PatchExpectations.next_expiry`), not at some later, unrelated wake-up.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from typing import Any

from operators.tdset.schema import GROUP, PLURAL, VERSION
from shared.client.kube import ApiError, KubeClient, namespaced
from shared.client.statuses import StatusWriter

EXPECTATION_TTL = 30.0


class PatchExpectations:
    def __init__(self) -> None:
        self._pending: dict[Hashable, tuple[dict[str, Any], float]] = {}

    def expect(self, key: Hashable, values: Mapping[str, Any]) -> None:
        self._pending[key] = (dict(values), time.monotonic() + EXPECTATION_TTL)

    def in_flight(self, key: Hashable, observed: Mapping[str, Any]) -> bool:
        """Whether ``observed`` is older than our last patch of ``key``."""
        pending = self._pending.get(key)
        if pending is None:
            return False
        values, deadline = pending
        if all(observed.get(k) == v for k, v in values.items()) or time.monotonic() > deadline:
            del self._pending[key]
            return False
        return True

    def next_expiry(self, owner_uid: str) -> float | None:
        """Seconds until the first of ``owner_uid``'s expectations expires (None: none pending)."""
        deadlines = [
            d for k, (_, d) in self._pending.items() if isinstance(k, tuple) and k[:1] == (owner_uid,)
        ]
        return max(0.001, min(deadlines) - time.monotonic()) if deadlines else None

    def forget(self, owner_uid: str) -> None:
        for key in [k for k in self._pending if isinstance(k, tuple) and k and k[0] == owner_uid]:
            del self._pending[key]


class StoredTemplates:
    """Per TDSet: the template hash it last wrote and the fields the API server stored for it
    (see :func:`operators.tdset.desired.template_current`)."""

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
    def __init__(self, kube: KubeClient | None = None) -> None:
        self.kube = kube or KubeClient()
        self.status = StatusWriter(self.kube, GROUP, VERSION, PLURAL)

    async def create_deployment(self, namespace: str, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """Create the Deployment; None when one of that name already exists."""
        try:
            return await self.kube.create(namespaced(namespace, "deployments", group_version="apps/v1"), body)
        except ApiError as exc:
            if exc.status == 409:
                return None
            raise

    async def get_deployment(self, namespace: str, name: str) -> dict[str, Any]:
        return await self.kube.get(namespaced(namespace, "deployments", name, "apps/v1"))

    async def patch_deployment(self, namespace: str, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        """A merge patch; ``metadata.uid`` in it (when set) is a precondition."""
        return await self.kube.merge_patch(namespaced(namespace, "deployments", name, "apps/v1"), patch)

    async def patch_autoscaler(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        """A merge patch of the user's HPA; ``metadata.uid`` in it (when set) is a precondition."""
        path = namespaced(namespace, "horizontalpodautoscalers", name, "autoscaling/v2")
        await self.kube.merge_patch(path, patch)
