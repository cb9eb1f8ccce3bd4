"""Watch streams that converge to the server's state, as client-go's Reflector does.

kopf 1.45 lists, then watches from the list's resourceVersion. When the watch answers 410 Gone
(an API-server restart, etcd compaction, a long partition) it lists again and replays the
objects that exist as events of type ``None``, but it never reports the objects that vanished
during the gap. Every cache fed by watch events (:class:`shared.controller.caches.OwnerCache`, the
reconcile loops of :class:`shared.controller.workqueue.Controller`) then keeps them forever: a pod deleted
in the gap stays counted and is never replaced, a custom resource deleted in the gap keeps a
zombie loop. client-go answers a relist with ``Replace``: whatever the store held that the new
list lacks is deleted.

:func:`converging` does the same on kopf's stream, per watch (resource and namespace): it keeps
the last body seen of every object (:class:`Store`, without ``status`` and ``managedFields``),
and when a listing ends it yields a ``DELETED`` event for every object the listing did not
contain, before kopf's ``LISTED`` marker, so every consumer sees the deletion it missed.

It also ends the stream after ``resync_after`` seconds, so kopf lists again: a periodic
resync as the safety net for anything a watch could still lose (controller-runtime's
SyncPeriod); relists are cheap with server-side label selectors, and a converged object's pass
makes no writes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

logger = logging.getLogger("shared.informer")


def slim(body: Mapping[str, Any]) -> dict[str, Any]:
    """What a consumer of a DELETED event may need: everything but status and managedFields."""
    out = {k: v for k, v in body.items() if k != "status"}
    meta = dict(out.get("metadata") or {})
    meta.pop("managedFields", None)
    out["metadata"] = meta
    return out


class Store:
    """The objects one watch stream last reported, by UID."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[str, Any]] = {}
        self._listing: dict[str, dict[str, Any]] | None = None

    def begin_listing(self) -> None:
        self._listing = {}

    def observe(self, event: Mapping[str, Any]) -> None:
        body = event.get("object") or {}
        uid = (body.get("metadata") or {}).get("uid")
        if not uid:
            return  # BOOKMARK, or a body without identity
        kind = event.get("type")
        if kind is None and self._listing is not None:
            self._listing[uid] = slim(body)
        elif kind == "DELETED":
            self._objects.pop(uid, None)
        elif kind in (None, "ADDED", "MODIFIED"):
            self._objects[uid] = slim(body)

    def end_listing(self) -> list[dict[str, Any]]:
        """The listing is complete: it is the truth. Returns DELETED events for what it lacked."""
        listed, self._listing = self._listing or {}, None
        vanished = [body for uid, body in self._objects.items() if uid not in listed]
        self._objects = listed
        return [{"type": "DELETED", "object": body} for body in vanished]

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
    """Pass ``stream`` (one of kopf's ``continuous_watch`` runs) through, see the module doc."""
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
                    item = await asyncio.wait_for(anext(iterator), max(0.0, deadline - loop.time()))
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
                store.observe(item)
            yield item
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
