"""Kubernetes Events about the objects an operator reconciles, posted through its own client.

An operator reports what it decided (created pods, scaled a Deployment, an invalid spec) as
Events on the object, like client-go's ``record.EventRecorder``. Posting goes through the
operator's :class:`~shared.client.kube.KubeClient`, so the leader-election fence and the
``rest_client_*`` metrics cover Events like every other write: on a standby an Event is refused
by the fence and dropped, never posted.

Recording never blocks a reconcile pass and never fails it: :meth:`EventRecorder.record` files
the Event and a background task posts it, a few at once (``MAX_IN_FLIGHT``), started in the
order recorded. An Event the API server refuses (a quota on Events, a
namespace being deleted, an outage) is logged and dropped, as client-go drops it after its
retries; the queue is bounded, so an outage cannot grow memory without end (the oldest are
dropped first, counted in the log).

Events share the client's rate limit (``--kube-api-qps``, none by default) and connections with
every other write, as they do in client-go. So a burst (3000 new WebServers: 3000 pod creates,
6000 status writes, 3000 Events, at a limit of 50 QPS) can leave Events waiting for minutes:
the bound is set for such a burst, not for client-go's 1000 (which dropped 1358 of the 3000 in
the scale benchmark), at about 1 KiB each.
"""

from __future__ import annotations

import asyncio
import collections
import datetime
import logging
from collections.abc import Mapping
from typing import Any

from shared.client.kube import KubeClient, reason_of
from shared.client.leader import NotLeaderError

logger = logging.getLogger("shared.events")
MAX_MESSAGE = 1024  # the API server refuses longer Event messages (client-go cuts them too)
MAX_QUEUED = 4096  # about 4 MiB of queued Events at most
# Posts in flight at once. One at a time, an Event cost a round trip each, so the recorder fell
# behind its producers at about 500-700 a minute (200 scheduled Netperfs produced 1200 a minute,
# tools/bench/netperf_schedule.py) and its bounded queue then dropped the oldest. A few
# overlap on the client's connections without taking them from the passes' own writes.
MAX_IN_FLIGHT = 4


def event_manifest(
    body: Mapping[str, Any], *, type: str, reason: str, message: str, component: str, now: datetime.datetime
) -> dict[str, Any]:
    """A core/v1 Event about the object ``body`` (a stored object: apiVersion, kind, metadata)."""
    meta = body["metadata"]
    stamp = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    micro = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 3] + "..."
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": body.get("apiVersion", ""),
            "kind": body.get("kind", ""),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "type": type,
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "eventTime": micro,
        "action": reason,
        "count": 1,
    }


class EventRecorder:
    """Posts Events in the background, started in the order recorded, at most ``max_in_flight``
    at once (see the module docstring)."""

    def __init__(
        self,
        kube: KubeClient,
        component: str,
        *,
        max_queued: int = MAX_QUEUED,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self.kube = kube
        self.component = component
        self._queue: collections.deque[dict[str, Any]] = collections.deque()
        self._max_queued = max_queued
        self._max_in_flight = max_in_flight
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.Event | None = None
        self.dropped = 0

    def record(self, body: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        """File an Event about ``body``; returns at once (call on the event loop)."""
        event = event_manifest(
            body,
            type=type,
            reason=reason,
            message=message,
            component=self.component,
            now=datetime.datetime.now(datetime.UTC),
        )
        if len(self._queue) >= self._max_queued:
            self._queue.popleft()
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                logger.warning(f"{self.dropped} Events dropped: the API server does not take them")
        self._queue.append(event)
        self._start()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._wake, self._idle = asyncio.Event(), asyncio.Event()
            self._task = asyncio.create_task(self._post_all(), name="events")
        assert self._wake is not None and self._idle is not None
        self._idle.clear()
        self._wake.set()

    async def _post_all(self) -> None:
        assert self._wake is not None and self._idle is not None
        in_flight: set[asyncio.Task[None]] = set()
        try:
            while True:
                while self._queue and len(in_flight) < self._max_in_flight:
                    in_flight.add(asyncio.create_task(self._post(self._queue.popleft())))
                if in_flight:
                    _, pending = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                    in_flight = set(pending)
                    continue
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
        finally:
            for task in in_flight:
                task.cancel()

    async def _post(self, event: Mapping[str, Any]) -> None:
        namespace = event["metadata"]["namespace"]
        try:
            await self.kube.create(f"/api/v1/namespaces/{namespace}/events", event)
        except NotLeaderError:
            logger.debug(f"Event {event['reason']} not posted: not the leader")
        except Exception as exc:
            obj = event["involvedObject"]
            logger.warning(
                f"Event {event['reason']} about {obj['kind']} {namespace}/{obj['name']} not posted: "
                f"{reason_of(exc) or repr(exc)}"
            )

    async def flush(self) -> None:
        """Wait until every Event recorded so far was posted or dropped."""
        if self._task is not None and not self._task.done() and self._idle is not None:
            await self._idle.wait()

    async def close(self, timeout: float = 5.0) -> None:
        """Post what is queued (for up to ``timeout`` seconds), then stop."""
        if self._task is None:
            return
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except TimeoutError:
            logger.warning(f"{len(self._queue)} Events not posted at shutdown")
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
