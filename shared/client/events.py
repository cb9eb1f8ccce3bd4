"""Kubernetes Events about the objects an operator reconciles, posted through its own client.

An operator reports what it decided (created pods, scaled a Deployment, an invalid spec) as
Events on the object, like client-go's ``record.EventRecorder``. Posting goes through the
operator's ``KubeClient``, so the leader-election fence and the
``rest_client_*`` metrics cover Events like every other write: on a standby an Event is refused
by the fence and dropped, never posted.

Every Event goes through client-go's correlator first (``shared.api.correlator``): one that
recurs (a pass failing the same way on every retry) is posted once and then patched, its
``count`` growing; similar ones with ever different messages are combined after a few; and what
one object reports beyond a burst is dropped. So a failing object costs one Event, not one per
retry.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable, Mapping
from typing import Any

from shared.api.correlator import MAX_MESSAGE, Correlator, FairQueue, Series, Write, cut
from shared.api.errors import ApiError, NotFound, NotLeaderError
from shared.client.kube import KubeClient, reason_of

__all__ = ["MAX_MESSAGE", "EventRecorder", "event_manifest"]

logger = logging.getLogger("shared.events")
MAX_QUEUED = 4096  # Events waiting to be written, about 4 MiB at most
MAX_QUEUED_PER_NAMESPACE = MAX_QUEUED  # one namespace alone may use all of it (see above)
# Posts in flight at once. One at a time, an Event cost a round trip each, so the recorder fell
# behind its producers at about 500-700 a minute (200 scheduled Netperfs produced 1200 a minute,
# tools/bench/netperf_schedule.py) and its bounded queue then dropped the oldest. A few
# overlap on the client's connections without taking them from the passes' own writes.
MAX_IN_FLIGHT = 4


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def event_manifest(
    body: Mapping[str, Any], *, type: str, reason: str, message: str, component: str, now: datetime.datetime
) -> dict[str, Any]:
    """A core/v1 Event about the object ``body`` (a stored object: apiVersion, kind, metadata)."""
    meta = body["metadata"]
    stamp = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    micro = now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    message = cut(message)
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
    """Correlates Events and writes them in the background, taking turns by namespace, at most
    ``max_in_flight`` at once (see below).

    ``dropped`` counts the occurrences dropped from a full queue, ``filtered`` those the spam
    filter dropped.

    Recording never blocks a reconcile pass and never fails it: ``EventRecorder.record`` files
    the Event and a background task writes it, a few at once (``MAX_IN_FLIGHT``). Writes wait in
    one queue per namespace, taken round-robin (``FairQueue``), so
    one tenant's flood of Events delays another's by at most one write per turn and, when the
    bound is reached, drops its own oldest, never another namespace's. An Event the API server
    refuses (a quota on Events, a namespace being deleted, an outage) is logged and dropped, as
    client-go drops it after its retries.

    Events share the client's rate limit (``--kube-api-qps``, none by default) and connections with
    every other write, as they do in client-go. So a burst (3000 new WebServers: 3000 pod creates,
    6000 status writes, 3000 Events, at a limit of 50 QPS) can leave Events waiting for minutes:
    the bound is set for such a burst, not for client-go's 1000 (which dropped 1358 of the 3000 in
    the scale benchmark), at about 1 KiB each. One namespace may fill all of it while the others
    are quiet: the total is kept by dropping from the namespace holding the most.
    """

    def __init__(
        self,
        kube: KubeClient,
        component: str,
        *,
        max_queued: int = MAX_QUEUED,
        max_queued_per_namespace: int = MAX_QUEUED_PER_NAMESPACE,
        max_in_flight: int = MAX_IN_FLIGHT,
        correlator: Correlator | None = None,
        now: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self.kube = kube
        self.component = component
        self.correlator = correlator if correlator is not None else Correlator()
        self._now = now
        self._queue: FairQueue[Series] = FairQueue(max_queued, max_queued_per_namespace)
        self._max_in_flight = max_in_flight
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._idle: asyncio.Event | None = None
        self.dropped = 0
        self.filtered = 0

    def record(self, body: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        """File an Event about ``body``; returns at once (call on the event loop)."""
        now = self._now()
        event = event_manifest(
            body, type=type, reason=reason, message=message, component=self.component, now=now
        )
        series = self.correlator.correlate(event, now.timestamp())
        if series is None:
            self.filtered += 1
            if self.filtered == 1 or self.filtered % 100 == 0:
                meta = body["metadata"]
                logger.info(
                    f"{self.filtered} Events dropped by the spam filter, the latest {reason} about "
                    f"{body.get('kind', '')} {meta['namespace']}/{meta['name']}"
                )
            return
        if not series.queued and not series.writing:
            self._enqueue(series)
        self._start()

    def _enqueue(self, series: Series) -> None:
        series.queued = True
        dropped = self._queue.put(series.namespace, series)
        if dropped is None:
            return
        dropped.queued = False
        before = self.dropped
        self.dropped += dropped.pending
        dropped.pending, dropped.latest = 0, None
        if before == 0 or self.dropped // 100 > before // 100:
            logger.warning(
                f"{self.dropped} Events dropped: the API server does not take them as fast as "
                f"they come (the latest from namespace {dropped.namespace})"
            )

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
                    series = self._queue.take()
                    series.queued, series.writing = False, True
                    in_flight.add(asyncio.create_task(self._write(series)))
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

    async def _write(self, series: Series) -> None:
        """Write what ``series`` has pending; occurrences that came meanwhile queue it again."""
        write = series.take()
        try:
            series.written(write, await self._send(series, write))
        except NotLeaderError:
            logger.debug(f"Event {write.event['reason']} not posted: not the leader")
        except Exception as exc:
            obj = write.event["involvedObject"]
            logger.warning(
                f"Event {write.event['reason']} about {obj['kind']} {series.namespace}/{obj['name']} "
                f"not posted: {reason_of(exc) or repr(exc)}"
            )
        finally:
            series.writing = False
            if series.pending and not series.queued:
                self._enqueue(series)

    async def _send(self, series: Series, write: Write) -> str:
        """The name of the Event ``write`` wrote."""
        events = f"/api/v1/namespaces/{series.namespace}/events"
        if write.verb == "patch":
            try:
                await self.kube.merge_patch(f"{events}/{write.name}", write.body)
                return write.name
            except ApiError as exc:
                if not isinstance(exc, NotFound):
                    raise
            write = series.post(write)  # the Event expired (or was deleted): post it anew
        created = await self.kube.create(events, write.body)
        return str(created.get("metadata", {}).get("name", ""))

    async def flush(self) -> None:
        """Wait until every Event recorded so far was written or dropped."""
        if self._task is not None and not self._task.done() and self._idle is not None:
            await self._idle.wait()

    async def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (for up to ``timeout`` seconds), then stop."""
        if self._task is None:
            return
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except TimeoutError:
            logger.warning(f"{len(self._queue)} Events not posted at shutdown")
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
