"""Events through the operator's own client (``shared.client.events``): posted in order, in the
background, never failing the caller, refused on a standby by the fence, bounded."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from shared.client.events import MAX_MESSAGE, EventRecorder, event_manifest
from shared.client.kube import ApiError, KubeClient
from shared.client.leader import NotLeaderError

WS = {
    "apiVersion": "demo.k8s.io/v1alpha1",
    "kind": "WebServer",
    "metadata": {"name": "web", "namespace": "team-a", "uid": "u1", "resourceVersion": "7"},
}


class Recording(KubeClient):
    """Our client with the HTTP exchange replaced: POSTs are recorded, or refused as told."""

    def __init__(self, refuse: BaseException | None = None) -> None:
        super().__init__()
        self.posted: list[tuple[str, dict[str, Any]]] = []
        self.refuse = refuse

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        self._fence_write(method, path)
        if self.refuse is not None:
            raise self.refuse
        self.posted.append((path, dict(body)))
        return dict(body)


def test_the_manifest_is_a_core_event_about_the_object():
    now = datetime.datetime(2026, 11, 25, 12, 0, 1, 500, tzinfo=datetime.UTC)
    event = event_manifest(
        WS, type="Warning", reason="FailedCreate", message="x" * 2000, component="webserver-operator", now=now
    )
    assert event["involvedObject"] == {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "name": "web",
        "namespace": "team-a",
        "uid": "u1",
        "resourceVersion": "7",
    }
    assert event["metadata"] == {"generateName": "web.", "namespace": "team-a"}
    assert (event["type"], event["reason"], event["source"]) == (
        "Warning",
        "FailedCreate",
        {"component": "webserver-operator"},
    )
    assert len(event["message"]) == MAX_MESSAGE and event["message"].endswith("...")
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-11-25T12:00:01Z"


async def test_events_are_posted_in_order_through_the_client():
    kube = Recording()
    recorder = EventRecorder(kube, "webserver-operator")
    for i in range(3):
        recorder.record(WS, type="Normal", reason=f"R{i}", message=f"m{i}")
    assert kube.posted == []  # recording returns at once; a background task posts
    await recorder.flush()
    assert [(path, body["reason"]) for path, body in kube.posted] == [
        ("/api/v1/namespaces/team-a/events", "R0"),
        ("/api/v1/namespaces/team-a/events", "R1"),
        ("/api/v1/namespaces/team-a/events", "R2"),
    ]
    await recorder.close()


async def test_a_standby_posts_nothing_and_a_refused_event_fails_nobody():
    kube = Recording()

    def not_leader(method: str, path: str) -> None:
        raise NotLeaderError("standby")

    kube.fence = not_leader
    recorder = EventRecorder(kube, "webserver-operator")
    recorder.record(WS, type="Normal", reason="SuccessfulCreate", message="Created pods: web-0")
    await recorder.flush()
    assert kube.posted == []

    refused = EventRecorder(Recording(refuse=ApiError(403, "Forbidden", "quota")), "webserver-operator")
    refused.record(WS, type="Warning", reason="FailedCreate", message="quota")
    await refused.flush()  # logged and dropped; the recorder goes on
    refused.record(WS, type="Warning", reason="FailedCreate", message="again")
    await refused.flush()
    await recorder.close()
    await refused.close()


class Gated(Recording):
    """Every POST waits for ``gate``; ``waiting`` lists the Events' reasons as their POSTs start."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.waiting: list[str] = []

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
        self.waiting.append(body["reason"])
        await self.gate.wait()
        return await super().request(method, path, body, **kw)


async def test_the_queue_is_bounded_when_events_are_not_taken():
    kube = Gated()
    recorder = EventRecorder(kube, "webserver-operator", max_queued=5)
    for i in range(20):
        recorder.record(WS, type="Normal", reason=f"R{i}", message="")
    kube.gate.set()
    await recorder.flush()
    # Recorded without a pause (the poster never ran in between): the newest 5 were kept.
    assert [body["reason"] for _, body in kube.posted] == ["R15", "R16", "R17", "R18", "R19"]
    assert recorder.dropped == 15
    await recorder.close()


async def test_a_few_events_are_posted_at_once_never_more():
    """Started in the order recorded, MAX_IN_FLIGHT overlapping round trips (one at a time fell
    behind 200 scheduled Netperfs' Events), and all of them posted."""
    kube = Gated()
    recorder = EventRecorder(kube, "webserver-operator", max_in_flight=3)
    for i in range(7):
        recorder.record(WS, type="Normal", reason=f"R{i}", message="")
    for _ in range(20):  # the poster gets every chance to start more than three: it must not
        await asyncio.sleep(0)
    assert kube.waiting == ["R0", "R1", "R2"]
    kube.gate.set()
    await recorder.flush()
    assert kube.waiting == [f"R{i}" for i in range(7)]
    assert sorted(body["reason"] for _, body in kube.posted) == [f"R{i}" for i in range(7)]
    await recorder.close()
