"""Watch streams that converge to the server's state, as client-go's Reflector does.

kopf 1.45 lists, then watches from the list's resourceVersion. When the watch answers 410 Gone
(an API-server restart, etcd compaction, a long partition) it lists again and replays the
objects that exist as events of type ``None``, but it never reports the objects that vanished
during the gap. Every cache fed by watch events (``shared.controller.caches.OwnerCache``, the
reconcile loops of ``shared.controller.workqueue.Controller``) then keeps them forever: a pod deleted
in the gap stays counted and is never replaced, a custom resource deleted in the gap keeps a
zombie loop. client-go answers a relist with ``Replace``: whatever the store held that the new
list lacks is deleted.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Mapping
from typing import Any, NamedTuple

logger = logging.getLogger("shared.informer")


# Annotations no code of ours reads and that can be as large as the object: ``kubectl apply``
# keeps a whole copy of the last applied manifest in one.
UNREAD_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


def strip(body: dict[str, Any]) -> dict[str, Any]:
    """Drop, in place, what no consumer reads: ``metadata.managedFields`` (the server-side-apply
    bookkeeping, often the largest part of a small object) and ``UNREAD_ANNOTATIONS``.
    controller-runtime's ``TransformStripManagedFields``, applied once where events enter the
    process, so no cache downstream (the work queue's store, the owner caches,
    the relist ``Store``) holds them. Everything else stays: the reconcilers read metadata
    (uid, resourceVersion, generation, labels, annotations, ownerReferences,
    deletionTimestamp, finalizers), spec and status, and kopf reads metadata."""
    meta = body.get("metadata")
    if not isinstance(meta, dict):
        return body
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and any(key in annotations for key in UNREAD_ANNOTATIONS):
        for key in UNREAD_ANNOTATIONS:
            annotations.pop(key, None)
        if not annotations:
            del meta["annotations"]
    return body


def strip_event(event: Any) -> Any:
    """``strip`` the object of a watch event (kopf's raw event dict); anything else as is."""
    if isinstance(event, dict):
        body = event.get("object")
        if isinstance(body, dict):
            strip(body)
    return event


# Strings up to this length are shared between the bodies a cache holds (compact).
SHARED_STRING_LENGTH = 64


def compact(value: Any) -> Any:
    """An equal copy of a parsed body whose keys and short strings are shared (``sys.intern``)
    with every other body compacted: the JSON decoder makes new string objects for every key
    and value of every event, so 1000 WebServers held 1000 copies of "lastTransitionTime",
    "observedGeneration", "True"... A stored WebServer takes 2.9 KB instead of 7.3 KB (after
    ``strip``), for about half a ``json.loads`` of CPU: only for bodies a cache keeps
    (the work queue's store), not every event. Interned strings die with their last holder."""
    if isinstance(value, dict):
        return {sys.intern(k) if type(k) is str else k: compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [compact(v) for v in value]
    if type(value) is str and len(value) <= SHARED_STRING_LENGTH:
        return sys.intern(value)
    return value


class Tombstone(NamedTuple):
    """What a DELETED event replayed after a relist carries of an object: its identity, and what
    the caches fed by the event look it up by (the owner caches: namespace/name,
    ownerReferences, the instance label, resourceVersion and creationTimestamp to order states)."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str
    resource_version: str
    creation_timestamp: str
    labels: Mapping[str, str] | None
    owner_references: list[Any] | None

    @classmethod
    def of(cls, body: Mapping[str, Any], *, identity_only: bool = False) -> Tombstone:
        """``identity_only``: without labels and ownerReferences (a metadata-only watch, whose
        consumers look objects up by name: their labels, which tenants choose, are not kept)."""
        meta = body.get("metadata") or {}
        # One string for every tombstone's kind, namespace and creation second, not one each.
        return cls(
            sys.intern(body.get("apiVersion") or ""),
            sys.intern(body.get("kind") or ""),
            meta.get("name") or "",
            sys.intern(meta.get("namespace") or ""),
            meta.get("uid") or "",
            meta.get("resourceVersion") or "",
            sys.intern(meta.get("creationTimestamp") or ""),
            None if identity_only else compact(meta.get("labels")),
            None if identity_only else compact(meta.get("ownerReferences")),
        )

    def body(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "uid": self.uid, "resourceVersion": self.resource_version}
        if self.namespace:
            meta["namespace"] = self.namespace
        if self.creation_timestamp:
            meta["creationTimestamp"] = self.creation_timestamp
        if self.labels is not None:
            meta["labels"] = dict(self.labels)
        if self.owner_references is not None:
            meta["ownerReferences"] = list(self.owner_references)
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": meta}


class Store:
    """The objects one watch stream last reported, by UID: a ``Tombstone`` of each, not its
    body (no spec, no status), which is all a deletion found by a relist needs.

    A listing updates the tombstones of the objects held in place and notes which UIDs it
    named; only objects new to the store wait aside until the listing ends (one that broke off
    adds nothing), so a relist never holds a second full set of tombstones beside the first.

    ``converging`` does the same on kopf's stream, per watch (resource and namespace): it keeps
    the identity of every object last seen (``Store``: a ``Tombstone``, not the body),
    and when a listing ends it yields a ``DELETED`` event for every object the listing did not
    contain, before kopf's ``LISTED`` marker, so every consumer sees the deletion it missed.

    It is also the one place where events enter the process, so it strips what nobody reads
    (``strip``: managedFields, kubectl's last-applied annotation) before any cache holds them.

    It also ends the stream after ``resync_after`` seconds, so kopf lists again: a periodic
    resync as the safety net for anything a watch could still lose (controller-runtime's
    SyncPeriod); relists are cheap with server-side label selectors, and a converged object's pass
    makes no writes.
    """

    def __init__(self, *, identity_only: bool = False) -> None:
        self._identity_only = identity_only  # Tombstone.of's
        self._objects: dict[str, Tombstone] = {}
        self._listed: set[str] | None = None  # the UIDs the listing in progress named
        self._new: dict[str, Tombstone] = {}  # ... and those of them the store did not hold

    def begin_listing(self) -> None:
        self._listed, self._new = set(), {}

    def observe(self, event: Mapping[str, Any]) -> None:
        body = event.get("object") or {}
        uid = (body.get("metadata") or {}).get("uid")
        if not uid:
            return  # BOOKMARK, or a body without identity
        kind = event.get("type")
        if kind is None and self._listed is not None:
            tomb = Tombstone.of(body, identity_only=self._identity_only)
            self._listed.add(tomb.uid)
            if uid in self._objects:
                self._objects[uid] = tomb
            else:
                self._new[uid] = tomb
        elif kind == "DELETED":
            self._objects.pop(uid, None)
        elif kind in (None, "ADDED", "MODIFIED"):
            self._objects[uid] = Tombstone.of(body, identity_only=self._identity_only)

    def end_listing(self) -> list[dict[str, Any]]:
        """The listing is complete: it is the truth. Returns DELETED events for what it lacked."""
        listed, new, self._listed, self._new = self._listed or set(), self._new, None, {}
        vanished = [uid for uid in self._objects if uid not in listed]
        events = [{"type": "DELETED", "object": self._objects.pop(uid).body()} for uid in vanished]
        self._objects.update(new)
        return events

    def __len__(self) -> int:
        return len(self._objects)


async def converging(
    stream: AsyncIterator[Any],
    store: Store,
    *,
    listed_marker: object,
    resync_after: float | None = None,
    name: str = "",
) -> AsyncIterator[Any]:
    """Pass ``stream`` (one of kopf's ``continuous_watch`` runs) through, see ``Store``'s docstring."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + resync_after if resync_after else None
    iterator = aiter(stream)
    store.begin_listing()
    try:
        while True:
            try:
                if deadline is None:
                    item = await anext(iterator)
                else:
                    # A timeout on this await only, not on the handling of the item after the
                    # yield: a timer handle per event, where ``asyncio.wait_for`` made a task
                    # and a future per event, a measurable cost at thousands of events.
                    async with asyncio.timeout_at(deadline):
                        item = await anext(iterator)
            except StopAsyncIteration:
                return  # kopf relists (410 Gone, a broken listing)
            except TimeoutError:
                logger.debug(f"resync: relisting {name}")
                return
            if item is listed_marker:
                missed = store.end_listing()
                if missed:
                    logger.info(f"relist of {name}: {len(missed)} object(s) deleted while not watching")
                for event in missed:
                    yield event
            elif isinstance(item, Mapping):
                store.observe(strip_event(item))
            yield item
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
