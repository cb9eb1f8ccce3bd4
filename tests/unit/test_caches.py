import kopf

from shared import caches, ownership

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


def test_watch_only_managed_sets_server_side_selectors():
    settings = kopf.OperatorSettings()
    selector = caches.watch_only_managed(settings, ["pods", "services"], "app")
    assert selector == ownership.managed_selector("app")
    assert len(list(settings.watching.label_selectors)) == 2
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
