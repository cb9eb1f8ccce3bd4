"""Events through the operator's own client (``shared.client.events``): posted in order, in the
background, never failing the caller, refused on a standby by the fence, bounded; correlated as
client-go's recorder does (``shared.api.correlator``): a recurring Event patched, similar ones
combined, an object's flood filtered, namespaces served in turn and bounded apart."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from shared.api.correlator import AGGREGATE_PREFIX, Correlator, FairQueue, SpamFilter, TokenBucket
from shared.api.errors import ApiError, NotLeaderError
from shared.api.lru import LRU
from shared.client.events import MAX_MESSAGE, EventRecorder, event_manifest
from shared.client.kube import KubeClient
from tests.framework.properties import examples

WS = {
    "apiVersion": "demo.k8s.io/v1alpha1",
    "kind": "WebServer",
    "metadata": {"name": "web", "namespace": "team-a", "uid": "u1", "resourceVersion": "7"},
}


class Recording(KubeClient):
    """Our client with the HTTP exchange replaced by a store of Events: POSTs are named and kept,
    PATCHes merged into the Event named (404 when it is not there), or all refused as told."""

    def __init__(self, refuse: BaseException | None = None) -> None:
        super().__init__()
        self.posted: list[tuple[str, dict[str, Any]]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []
        self.store: dict[str, dict[str, Any]] = {}
        self.refuse = refuse

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        self._fence_write(method, path)
        if self.refuse is not None:
            raise self.refuse
        if method == "PATCH":
            self.patched.append((path, dict(body)))
            name = path.rsplit("/", 1)[1]
            if name not in self.store:
                raise ApiError(404, "NotFound", f'events "{name}" not found')
            self.store[name].update(body)
            return dict(self.store[name])
        name = f"{body['metadata']['generateName']}{len(self.posted)}"
        self.posted.append((path, dict(body)))
        self.store[name] = {**body, "metadata": {**body["metadata"], "name": name}}
        return dict(self.store[name])


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
        self.waiting.append(body.get("reason", method))
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


class Clock:
    """The recorder's ``now``, moved by the test."""

    def __init__(self) -> None:
        self.at = datetime.datetime(2026, 11, 25, 12, 0, 0, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += datetime.timedelta(seconds=seconds)


def webserver(name: str, namespace: str = "team-a", uid: str = "u1") -> dict[str, Any]:
    return {**WS, "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "7"}}


async def test_a_recurring_event_is_patched_not_posted_again():
    """A pass failing the same way on every retry: one Event, its count and lastTimestamp
    growing; another object (the same name re-created: another uid) gets its own."""
    kube, clock = Recording(), Clock()
    recorder = EventRecorder(kube, "webserver-operator", now=clock)
    for _ in range(3):
        recorder.record(WS, type="Warning", reason="ServiceConflict", message="service web is not ours")
        await recorder.flush()
        clock.advance(30)
    assert len(kube.posted) == 1
    name = kube.posted[0][1]["metadata"]["generateName"] + "0"
    assert kube.patched == [
        (f"/api/v1/namespaces/team-a/events/{name}", {"count": n, "lastTimestamp": stamp, "message": message})
        for n, stamp, message in [
            (2, "2026-11-25T12:00:30Z", "service web is not ours"),
            (3, "2026-11-25T12:01:00Z", "service web is not ours"),
        ]
    ]
    stored = kube.store[name]
    assert (stored["count"], stored["firstTimestamp"], stored["lastTimestamp"]) == (
        3,
        "2026-11-25T12:00:00Z",
        "2026-11-25T12:01:00Z",
    )
    recorder.record(
        webserver("web", uid="u2"),
        type="Warning",
        reason="ServiceConflict",
        message="service web is not ours",
    )
    await recorder.flush()
    assert len(kube.posted) == 2 and kube.posted[1][1]["involvedObject"]["uid"] == "u2"
    await recorder.close()


async def test_occurrences_waiting_together_are_one_write():
    kube = Gated()
    recorder = EventRecorder(kube, "webserver-operator")
    for _ in range(5):  # recorded while nothing was written yet: one POST of count 5
        recorder.record(WS, type="Warning", reason="FailedCreate", message="quota")
    while not kube.waiting:  # the POST is out (waiting for the gate)
        await asyncio.sleep(0)
    recorder.record(WS, type="Warning", reason="FailedCreate", message="quota")
    recorder.record(WS, type="Warning", reason="FailedCreate", message="quota")
    kube.gate.set()
    await recorder.flush()
    assert [body["count"] for _, body in kube.posted] == [5]
    assert [body["count"] for _, body in kube.patched] == [7]
    await recorder.close()


async def test_a_patch_that_finds_the_event_gone_posts_it_again():
    kube, clock = Recording(), Clock()
    recorder = EventRecorder(kube, "webserver-operator", now=clock)
    recorder.record(WS, type="Warning", reason="FailedCreate", message="quota")
    await recorder.flush()
    kube.store.clear()  # expired (an hour after its last change) or deleted by someone
    clock.advance(3600)
    recorder.record(WS, type="Warning", reason="FailedCreate", message="quota")
    await recorder.flush()
    assert len(kube.patched) == 1 and len(kube.posted) == 2  # tried, 404, posted anew
    (_, again) = kube.posted[1]
    assert (again["count"], again["firstTimestamp"], again["lastTimestamp"]) == (
        2,
        "2026-11-25T12:00:00Z",
        "2026-11-25T13:00:00Z",
    )
    recorder.record(WS, type="Warning", reason="FailedCreate", message="quota")
    await recorder.flush()  # and the new one is patched from then on
    assert len(kube.posted) == 2 and kube.patched[-1][1]["count"] == 3
    await recorder.close()


async def test_similar_events_are_combined_after_ten_different_messages():
    """client-go's rule: a group of similar Events (one object, type, reason) has at most ten on
    the server, the tenth combining the rest; a lull of more than ten minutes starts afresh."""
    kube, clock = Recording(), Clock()
    recorder = EventRecorder(kube, "webserver-operator", now=clock, correlator=Correlator(burst=1000))
    for i in range(15):
        recorder.record(WS, type="Warning", reason="FailedCreate", message=f"pod web-{i}: quota")
        await recorder.flush()
        clock.advance(60)
    messages = [body["message"] for _, body in kube.posted]
    assert messages == [*(f"pod web-{i}: quota" for i in range(9)), AGGREGATE_PREFIX + "pod web-9: quota"]
    assert kube.patched[-1][1] == {
        "count": 6,
        "lastTimestamp": "2026-11-25T12:14:00Z",
        "message": AGGREGATE_PREFIX + "pod web-14: quota",
    }
    # Another reason is another group.
    recorder.record(WS, type="Warning", reason="FailedDelete", message="pod web-0: gone")
    await recorder.flush()
    assert kube.posted[-1][1]["message"] == "pod web-0: gone"
    clock.advance(601)
    recorder.record(WS, type="Warning", reason="FailedCreate", message="pod web-15: quota")
    await recorder.flush()
    assert kube.posted[-1][1]["message"] == "pod web-15: quota"
    await recorder.close()


async def test_the_spam_filter_lets_an_object_burst_25_then_one_per_five_minutes():
    kube, clock = Recording(), Clock()
    recorder = EventRecorder(kube, "webserver-operator", now=clock)
    for i in range(30):  # different reasons: not combined, only the filter stops them
        recorder.record(WS, type="Normal", reason=f"R{i}", message="")
    await recorder.flush()
    assert [body["reason"] for _, body in kube.posted] == [f"R{i}" for i in range(25)]
    assert recorder.filtered == 5
    recorder.record(webserver("other"), type="Normal", reason="R0", message="")  # another object
    clock.advance(299)
    recorder.record(WS, type="Normal", reason="R30", message="")
    clock.advance(1)
    recorder.record(WS, type="Normal", reason="R31", message="")
    recorder.record(WS, type="Normal", reason="R32", message="")
    await recorder.flush()
    assert [(b["involvedObject"]["name"], b["reason"]) for _, b in kube.posted[25:]] == [
        ("other", "R0"),
        ("web", "R31"),
    ]
    assert recorder.filtered == 7
    await recorder.close()


def webservers_flood(recorder: EventRecorder, namespace: str, n: int) -> None:
    for i in range(n):  # distinct objects: neither combined nor filtered
        recorder.record(
            webserver(f"w{i}", namespace, f"{namespace}-{i}"), type="Warning", reason="Failed", message="x"
        )


async def test_namespaces_take_turns():
    """One namespace's 50 waiting Events delay another's by one write, not 50."""
    kube = Gated()
    recorder = EventRecorder(kube, "webserver-operator", max_in_flight=1)
    webservers_flood(recorder, "noisy", 50)
    recorder.record(webserver("web", "quiet"), type="Warning", reason="Failed", message="x")
    kube.gate.set()
    await recorder.flush()
    namespaces = [body["metadata"]["namespace"] for _, body in kube.posted]
    assert namespaces[:3] == ["noisy", "quiet", "noisy"] and len(namespaces) == 51
    await recorder.close()


async def test_a_namespace_flood_drops_its_own_oldest_never_another_namespaces():
    kube = Gated()
    recorder = EventRecorder(kube, "webserver-operator", max_queued=6, max_queued_per_namespace=4)
    recorder.record(webserver("web", "quiet"), type="Warning", reason="Failed", message="x")
    webservers_flood(recorder, "noisy", 10)  # its own bound: its newest 4 kept
    webservers_flood(recorder, "other", 2)  # the total bound: the noisy one's oldest makes room
    kube.gate.set()
    await recorder.flush()
    posted = sorted((b["metadata"]["namespace"], b["involvedObject"]["name"]) for _, b in kube.posted)
    assert posted == [
        ("noisy", "w7"),
        ("noisy", "w8"),
        ("noisy", "w9"),
        ("other", "w0"),
        ("other", "w1"),
        ("quiet", "web"),
    ]
    assert recorder.dropped == 7
    await recorder.close()


async def test_caches_are_bounded():
    """Dedup forgets the least recently used Events beyond its size: one more is posted again."""
    kube = Recording()
    recorder = EventRecorder(kube, "webserver-operator", correlator=Correlator(size=3))
    for reason in ["A", "B", "C", "D", "A"]:
        recorder.record(WS, type="Normal", reason=reason, message="")
        await recorder.flush()
    assert len(recorder.correlator) == 3
    assert [body["reason"] for _, body in kube.posted] == ["A", "B", "C", "D", "A"]
    assert kube.patched == []
    await recorder.close()


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 100)), max_size=60))
def test_an_lru_keeps_the_most_recently_used(ops: list[tuple[int, int]]):
    lru: LRU[int, int] = LRU(3)
    used: list[int] = []
    for key, value in ops:
        lru.put(key, value)
        used = [k for k in used if k != key] + [key]
    assert len(lru) == min(3, len(set(used)))
    assert all(key in lru for key in used[-3:])


@settings(max_examples=examples(200))
@given(
    st.integers(1, 30),
    st.floats(0.001, 1e6),
    st.lists(st.floats(0, 1e7, allow_nan=False), max_size=80),
)
def test_a_token_bucket_never_gives_more_than_its_burst_and_refill(
    burst: int, refill: float, times: list[float]
):
    times = sorted(times)
    start = times[0] if times else 0.0
    bucket = TokenBucket(burst, refill, start)
    accepted = 0
    for t in times:
        accepted += bucket.try_accept(t)
        assert accepted <= burst + (t - start) / refill + 1e-6
    # A bucket never refilled past its burst, and full again after a burst's refills.
    end = (times[-1] if times else 0.0) + (burst + 1) * refill
    assert sum(bucket.try_accept(end) for _ in range(burst + 1)) == burst


def test_the_spam_filter_counts_by_source_and_object_only():
    spam = SpamFilter(burst=2, refill=300)
    event = event_manifest(WS, type="Normal", reason="R", message="m", component="c", now=Clock()())
    other_reason = {**event, "reason": "S", "type": "Warning", "message": "n"}
    other_source = {**event, "source": {"component": "d"}}
    assert [spam.allow(e, 0) for e in [event, other_reason, event, other_source]] == [True, True, False, True]


@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.booleans()), max_size=200),
    st.integers(1, 8),
    st.integers(1, 8),
)
def test_a_fair_queue_is_bounded_and_drops_only_from_the_fullest(
    ops: list[tuple[str, bool]], total: int, per_namespace: int
):
    """Any sequence of puts and takes: the bounds hold, each namespace's items come out in the
    order they went in, and an item is dropped only from a namespace holding at least as many
    as the newcomer's (its own, or a fuller one)."""
    queue: FairQueue[tuple[str, int]] = FairQueue(total, per_namespace)
    model: dict[str, list[int]] = {}
    for i, (namespace, take) in enumerate(ops):
        if take and len(queue):
            ns, n = queue.take()
            assert model[ns].pop(0) == n
            continue
        held = {ns: len(items) for ns, items in model.items()}
        dropped = queue.put(namespace, (namespace, i))
        if dropped is not None:
            ns, n = dropped
            assert model[ns].pop(0) == n
            assert ns == namespace or held[ns] > held.get(namespace, 0)
        else:
            assert held.get(namespace, 0) < per_namespace and sum(held.values()) < total
        model.setdefault(namespace, []).append(i)
        assert len(queue) == sum(map(len, model.values())) <= total
        assert all(queue.queued(ns) == len(items) <= per_namespace for ns, items in model.items())
