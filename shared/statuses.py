"""Writing an object's status whole, and only when it changed.

kopf merge-patches replace lists, so each operator computes the complete status and writes it
in one merge patch of the status subresource. A pass may run before the watch has delivered
the object with our own last write; comparing with what this process last wrote (as well as
with the status on the body) keeps such a pass from writing the same status twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared import conditions
from shared.kube import KubeClient, namespaced


class StatusWriter:
    """The status subresource of one custom resource kind."""

    def __init__(self, kube: KubeClient, group: str, version: str, plural: str) -> None:
        self.kube = kube
        self.group_version = f"{group}/{version}"
        self.plural = plural
        self._last: dict[str, dict[str, Any]] = {}

    def last(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """The status this process last wrote for ``body`` (None before the first write)."""
        return self._last.get(body["metadata"]["uid"])

    def current(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The newest status known: our last write, else the body's."""
        return self.last(body) or dict(body.get("status") or {})

    def forget(self, uid: str) -> None:
        self._last.pop(uid, None)

    async def write(self, body: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """Write ``new`` as the whole status unless it changes nothing; True when written."""
        meta = body["metadata"]
        new = dict(new)
        if new == self._last.get(meta["uid"]) or conditions.status_patch(body.get("status"), new) is None:
            return False
        path = namespaced(meta["namespace"], self.plural, meta["name"], self.group_version) + "/status"
        await self.kube.merge_patch(path, {"status": new})
        self._last[meta["uid"]] = new
        return True
