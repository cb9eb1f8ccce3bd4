"""What an operator watches, as data: each resource, the server-side label selector of its
watch, and the handler its events go to.

A reconciler declares its watches (``shared.controller.builder.Reconciler.watches``); the
kopf adapter (``shared.controller.kopf_adapter``) is the one place that turns them into
kopf registrations. Nothing here knows kopf.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# The Accept headers of a metadata-only watch and list (``Watch.metadata_only``): a watch's
# events carry PartialObjectMetadata, a listing is a PartialObjectMetadataList.
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
METADATA_ONLY_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

# Called with the event's type (None for an object of a listing, else ADDED, MODIFIED,
# DELETED) and the object. Runs on the event loop, one event of the watch at a time: it must
# not block (it files work); a coroutine function is awaited (the watch's next event waits for
# it). An exception is logged and the watch goes on (shared.controller.kopf_adapter).
Handler = Callable[[str | None, Mapping[str, Any]], Awaitable[None] | None]


@dataclass(frozen=True)
class Watch:
    """One watched resource: ``group`` "" is the core API."""

    group: str
    version: str
    plural: str
    handler: Handler
    # Sent as the watch's ``labelSelector`` (equality terms): the API server never sends
    # objects without them (children are watched this way, see shared.controller.caches).
    labels: Mapping[str, str] = field(default_factory=dict)
    # Listed and watched as ``PartialObjectMetadata`` (the API server sends each object's
    # metadata only, no data or spec; its resourceVersion still changes with every write):
    # for a kind the operator reads only by reference, whose objects it must not hold.
    metadata_only: bool = False

    @property
    def selector(self) -> str:
        """``labels`` as a label selector string; "" for none."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))

    @property
    def resource(self) -> str:
        """``plural`` or ``plural.group``: how the watch is named in logs and readiness."""
        return f"{self.plural}.{self.group}" if self.group else self.plural
