"""shared.controller.informer: a relist replaces the store, and what vanished is reported as DELETED."""

import asyncio

from shared.controller import informer

LISTED = object()


def pod(name: str, uid: str, **meta) -> dict:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "uid": uid, "managedFields": [{"big": 1}], **meta},
        "status": {"phase": "Running"},
    }


async def run(store: informer.Store, items: list, **kw) -> list:
    async def stream():
        for item in items:
            yield item

    return [e async for e in informer.converging(stream(), store, listed_marker=LISTED, **kw)]


def names(events: list) -> list:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events if isinstance(e, dict)]


async def test_a_relist_reports_what_vanished_in_the_gap_as_deleted():
    store = informer.Store()
    first = await run(
        store,
        [
            {"type": None, "object": pod("a", "1")},
            {"type": None, "object": pod("b", "2")},
            LISTED,
            {"type": "ADDED", "object": pod("c", "3")},
        ],
    )
    assert names(first) == [(None, "a"), (None, "b"), ("ADDED", "c")]  # nothing invented
    # 410 Gone; meanwhile b and c were deleted and d created. kopf lists again:
    second = await run(
        store, [{"type": None, "object": pod("a", "1")}, {"type": None, "object": pod("d", "4")}, LISTED]
    )
    assert names(second) == [(None, "a"), (None, "d"), ("DELETED", "b"), ("DELETED", "c")]
    assert second[-1] is LISTED  # after the deletions: consumers see them before "listed"
    deleted = second[2]["object"]
    assert "status" not in deleted and "managedFields" not in deleted["metadata"]
    assert len(store) == 2


async def test_a_deletion_seen_live_is_not_reported_again():
    store = informer.Store()
    await run(
        store, [{"type": None, "object": pod("a", "1")}, LISTED, {"type": "DELETED", "object": pod("a", "1")}]
    )
    assert names(await run(store, [LISTED])) == []


async def test_a_listing_cut_short_changes_nothing():
    store = informer.Store()
    await run(store, [{"type": None, "object": pod("a", "1")}, LISTED])
    await run(store, [])  # the listing failed before it ended (connection lost)
    assert names(await run(store, [{"type": None, "object": pod("a", "1")}, LISTED])) == [(None, "a")]


async def test_the_stream_ends_after_the_resync_period_so_kopf_lists_again():
    store, closed = informer.Store(), asyncio.Event()

    async def endless():
        try:
            yield {"type": None, "object": pod("a", "1")}
            yield LISTED
            await asyncio.Event().wait()  # an idle watch
        finally:
            closed.set()

    out = [e async for e in informer.converging(endless(), store, listed_marker=LISTED, resync_after=0.05)]
    assert names(out) == [(None, "a")] and out[-1] is LISTED
    assert closed.is_set()  # the watch connection is released


def test_strip_drops_managed_fields_and_the_last_applied_annotation_only():
    body = {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "1",
            "resourceVersion": "7",
            "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "deletionTimestamp": "2026-01-02T00:00:00Z",
            "labels": {"app": "w"},
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {}}',
                "demo.k8s.io/original-min-replicas": "2",
            },
            "ownerReferences": [{"uid": "o", "controller": True}],
            "finalizers": ["x"],
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"replicas": 3},
        "status": {"readyReplicas": 3},
    }
    out = informer.strip(body)
    assert out is body  # in place: no second copy
    assert "managedFields" not in body["metadata"]
    assert body["metadata"]["annotations"] == {"demo.k8s.io/original-min-replicas": "2"}
    kept = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp"}
    kept |= {"deletionTimestamp", "labels", "annotations", "ownerReferences", "finalizers"}
    assert set(body["metadata"]) == kept
    assert body["spec"] == {"replicas": 3} and body["status"] == {"readyReplicas": 3}
    only_applied = {"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}
    assert informer.strip(only_applied) == {"metadata": {}}
    assert informer.strip({"metadata": None}) == {"metadata": None}  # not ours to judge


async def test_events_are_stripped_where_they_enter():
    store = informer.Store()
    events = await run(
        store,
        [{"type": None, "object": pod("a", "1")}, LISTED, {"type": "MODIFIED", "object": pod("a", "1")}],
    )
    assert all("managedFields" not in e["object"]["metadata"] for e in events if isinstance(e, dict))
    assert events[0]["object"]["status"] == {"phase": "Running"}  # only the unread parts go


async def test_the_store_keeps_identity_not_bodies():
    store = informer.Store()
    owner = [
        {
            "apiVersion": "demo.k8s.io/v1alpha1",
            "kind": "WebServer",
            "name": "w",
            "uid": "o",
            "controller": True,
        }
    ]
    labelled = pod(
        "a",
        "1",
        namespace="ns",
        resourceVersion="5",
        creationTimestamp="2026-01-01T00:00:00Z",
        labels={"app.kubernetes.io/instance": "w"},
        ownerReferences=owner,
    )
    labelled["spec"] = {"containers": [{"name": "web", "image": "nginx"}]}
    await run(store, [{"type": None, "object": labelled}, LISTED])
    (held,) = store._objects.values()
    assert isinstance(held, informer.Tombstone)
    deleted, listed = await run(store, [LISTED])
    assert listed is LISTED
    assert deleted == {
        "type": "DELETED",
        "object": {
            "apiVersion": "",
            "kind": "Pod",
            "metadata": {
                "name": "a",
                "namespace": "ns",
                "uid": "1",
                "resourceVersion": "5",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app.kubernetes.io/instance": "w"},
                "ownerReferences": owner,
            },
        },
    }
    assert len(store) == 0


def test_compact_is_an_equal_copy_with_shared_strings():
    import json

    raw = '{"status": {"conditions": [{"type": "Ready", "status": "True", "message": "%s"}], "n": 1.5}}'
    long = "x" * 100
    a, b = informer.compact(json.loads(raw % long)), informer.compact(json.loads(raw % long))
    assert a == b == json.loads(raw % long)
    ca, cb = a["status"]["conditions"][0], b["status"]["conditions"][0]
    assert next(iter(ca)) is next(iter(cb))  # keys shared
    assert ca["status"] is cb["status"]  # short values shared
    assert ca["message"] is not cb["message"]  # long strings (messages, annotations) are not
    assert informer.compact(None) is None and informer.compact(3) == 3


async def test_a_relist_updates_held_objects_in_place_and_adds_new_ones_at_its_end():
    store = informer.Store()
    await run(store, [{"type": None, "object": pod("a", "1", resourceVersion="1")}, LISTED])
    store.begin_listing()
    store.observe({"type": None, "object": pod("a", "1", resourceVersion="2")})
    store.observe({"type": None, "object": pod("b", "2")})
    # No second set of tombstones: the held object is updated where it is, the new one waits.
    assert [t.resource_version for t in store._objects.values()] == ["2"] and list(store._new) == ["2"]
    assert store.end_listing() == []
    assert sorted(t.name for t in store._objects.values()) == ["a", "b"] and not store._new
    store.begin_listing()
    store.observe({"type": None, "object": pod("c", "3")})  # this listing breaks off
    assert names(await run(store, [{"type": None, "object": pod("a", "1")}, LISTED])) == [
        (None, "a"),
        ("DELETED", "b"),
    ]
    assert [t.name for t in store._objects.values()] == ["a"]  # c was never held


def test_an_identity_only_store_keeps_no_labels_and_still_replays_deletions():
    """A metadata-only kind's tombstones (read by reference, by name): no labels or owners,
    which tenants choose and which no consumer reads."""
    from shared.controller.informer import Store

    store = Store(identity_only=True)
    body = {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": {
            "name": "big",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {f"k{i}": "v" * 63 for i in range(1000)},
            "ownerReferences": [{"uid": "o"}],
        },
    }
    store.begin_listing()
    store.observe({"type": None, "object": body})
    assert store.end_listing() == []
    (tomb,) = store._objects.values()
    assert tomb.labels is None and tomb.owner_references is None
    store.begin_listing()
    (deleted,) = store.end_listing()
    assert deleted["type"] == "DELETED"
    assert deleted["object"]["metadata"] == {
        "name": "big",
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": "7",
    }
