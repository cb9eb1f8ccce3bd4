from shared.api import ownership
from shared.controller import caches

OWNER = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "o", "namespace": "ns", "uid": "u1"}}
OTHER = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "p", "namespace": "ns", "uid": "u2"}}


def pod(name, owner=OWNER, phase="Pending"):
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns"},
        "status": {"phase": phase},
    }
    return ownership.adopt(body, owner, "app", "server") if owner else body


def summary(body):
    return (body["metadata"]["name"], body["status"]["phase"])


def test_cache_follows_added_modified_deleted():
    cache = caches.OwnerCache(summary)
    assert cache.observe(None, pod("a")) == "u1"  # initial listing
    assert cache.observe("ADDED", pod("b")) == "u1"
    assert cache.observe("MODIFIED", pod("a", phase="Running")) == "u1"
    assert sorted(cache.children("ns", "u1")) == [("a", "Running"), ("b", "Pending")]
    assert cache.observe("DELETED", pod("b")) == "u1"
    assert cache.children("ns", "u1") == [("a", "Running")]
    assert cache.children("ns", "nobody") == [] and len(cache) == 1


def test_orphans_and_owner_changes():
    cache = caches.OwnerCache(summary)
    assert cache.observe("ADDED", pod("x", owner=None)) is None
    assert len(cache) == 0
    cache.observe("ADDED", pod("y"))
    # re-parented (controller reference replaced): moves, and the new owner is woken
    assert cache.observe("MODIFIED", pod("y", owner=OTHER)) == "u2"
    assert cache.children("ns", "u1") == [] and cache.children("ns", "u2") == [("y", "Pending")]
    # orphaned: dropped, and the previous owner is woken
    assert cache.observe("MODIFIED", pod("y", owner=None)) == "u2"
    assert len(cache) == 0


def test_children_are_watched_by_the_managed_labels():
    assert caches.managed_labels("app") == {
        ownership.MANAGED_BY_LABEL: ownership.MANAGED_BY,
        ownership.NAME: "app",
    }


def test_orphans_are_kept_apart_by_instance_until_adopted_or_gone():
    cache = caches.OwnerCache(summary)
    child = pod("o-1")
    orphan = {**child, "metadata": {**child["metadata"], "uid": "p1", "ownerReferences": []}}
    cache.observe("ADDED", child)
    assert cache.observe("MODIFIED", orphan) == "u1"  # the old owner is woken as before
    assert cache.children("ns", "u1") == []
    assert [o.name for o in cache.orphans("ns", "o")] == ["o-1"]  # instance label = owner's name
    adopted = ownership.adopt(
        orphan, OTHER | {"metadata": {**OTHER["metadata"], "name": "o"}}, "app", "server"
    )
    assert cache.observe("MODIFIED", adopted) == "u2"
    assert cache.orphans("ns", "o") == []
    cache.observe("MODIFIED", orphan)
    cache.observe("DELETED", orphan)
    assert cache.orphans("ns", "o") == []


def at(body, uid, rv, **meta):
    """``body`` as the object ``uid`` at resourceVersion ``rv``."""
    return {**body, "metadata": {**body["metadata"], "uid": uid, "resourceVersion": str(rv), **meta}}


def test_a_write_through_read_before_the_delete_does_not_bring_the_child_back():
    cache = caches.OwnerCache(summary)
    cache.observe("ADDED", at(pod("a"), "c1", 10))
    answer = at(pod("a", phase="Running"), "c1", 11)  # a GET answered before the delete...
    cache.observe("DELETED", at(pod("a", phase="Running"), "c1", 12))  # ...whose event came first
    cache.observe("MODIFIED", answer)  # the handler's write-through
    assert cache.children("ns", "u1") == []
    assert len(cache) == 0


def test_an_older_write_through_does_not_overwrite_a_newer_state_from_the_watch():
    cache = caches.OwnerCache(summary)
    cache.observe("ADDED", at(pod("a"), "c1", 10))
    answer = at(pod("a"), "c1", 11)
    cache.observe("MODIFIED", at(pod("a", phase="Running"), "c1", 12))
    cache.observe("MODIFIED", answer)
    assert cache.children("ns", "u1") == [("a", "Running")]
    cache.observe("MODIFIED", at(pod("a", phase="Succeeded"), "c1", 12))  # the same state: taken
    cache.observe("MODIFIED", at(pod("a", phase="Failed"), "c1", 13))  # a newer one: taken
    assert cache.children("ns", "u1") == [("a", "Failed")]


def test_an_object_recreated_under_the_name_is_taken_and_its_predecessor_stays_gone():
    cache = caches.OwnerCache(summary)
    cache.observe("ADDED", at(pod("a"), "c1", 10))
    # The create's answer is written through before the watch brings the predecessor's DELETED.
    cache.observe("ADDED", at(pod("a", phase="Running"), "c2", 13))
    cache.observe("DELETED", at(pod("a"), "c1", 12))
    assert cache.children("ns", "u1") == [("a", "Running")]
    cache.observe("MODIFIED", at(pod("a", phase="Failed"), "c1", 11))  # a late answer about c1
    assert cache.children("ns", "u1") == [("a", "Running")]
    cache.observe("ADDED", at(pod("a", phase="Running"), "c2", 13))  # the watch catches up
    cache.observe("DELETED", at(pod("a", phase="Running"), "c2", 14))
    assert len(cache) == 0
    cache.observe("ADDED", at(pod("a"), "c3", 15))
    assert cache.children("ns", "u1") == [("a", "Pending")]


def test_an_object_back_in_the_label_selector_is_taken_again():
    """A watch sends DELETED for an object whose labels stop matching its selector, and ADDED
    when they match again: the same UID at a later resourceVersion than the DELETED."""
    cache = caches.OwnerCache(summary)
    cache.observe("ADDED", at(pod("a"), "c1", 10))
    cache.observe("DELETED", at(pod("a"), "c1", 11))
    cache.observe("ADDED", at(pod("a", phase="Running"), "c1", 12))
    assert cache.children("ns", "u1") == [("a", "Running")]
    cache.observe("DELETED", at(pod("a", phase="Running"), "c1", 13))
    cache.observe("MODIFIED", at(pod("a", phase="Running"), "c1", 12))  # a write-through: stale
    assert len(cache) == 0


def test_orphans_ignore_stale_write_throughs_too():
    cache = caches.OwnerCache(summary)
    orphan = {**pod("o-1"), "metadata": {**pod("o-1")["metadata"], "ownerReferences": []}}
    cache.observe("ADDED", at(orphan, "p1", 10))
    cache.observe("MODIFIED", at(orphan, "p1", 12, deletionTimestamp="2024-01-01T00:00:00Z"))
    cache.observe("MODIFIED", at(orphan, "p1", 11))  # older: still terminating
    assert [(o.name, o.deleting) for o in cache.orphans("ns", "o")] == [("o-1", True)]
    cache.observe("DELETED", at(orphan, "p1", 13, deletionTimestamp="2024-01-01T00:00:00Z"))
    cache.observe("MODIFIED", at(orphan, "p1", 11))  # read before the delete
    assert cache.orphans("ns", "o") == []


def test_only_the_latest_deleted_uids_are_remembered(monkeypatch):
    monkeypatch.setattr(caches, "DELETED_UIDS", 2)
    cache = caches.OwnerCache(summary)
    for uid in ("c1", "c2", "c3"):
        cache.observe("ADDED", at(pod(uid), uid, 10))
        cache.observe("DELETED", at(pod(uid), uid, 12))
    for uid in ("c1", "c2", "c3"):
        cache.observe("MODIFIED", at(pod(uid), uid, 11))
    # c1 was forgotten (the bound): its stale write-through is taken; c2 and c3 stay gone.
    assert cache.children("ns", "u1") == [("c1", "Pending")]
