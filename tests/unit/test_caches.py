import kopf

from shared import caches, ownership

OWNER = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "o", "namespace": "ns", "uid": "u1"}}


def pod(name, owner=OWNER):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"}}
    return ownership.adopt(body, owner, "app", "server") if owner else body


def test_index_entry_keyed_by_namespace_and_controller_uid():
    entry = caches.owner_index_entry(pod("p1"), lambda b: b["metadata"]["name"])
    assert entry == {("ns", "u1"): "p1"}
    assert caches.owner_index_entry(pod("orphan", owner=None), lambda b: b) is None


def test_children_lookup_from_index_mapping():
    index = {("ns", "u1"): ["p1", "p2"]}
    assert caches.children(index, "ns", "u1") == ["p1", "p2"]
    assert caches.children(index, "ns", "other") == []


def test_watch_only_managed_sets_server_side_selectors():
    settings = kopf.OperatorSettings()
    selector = caches.watch_only_managed(settings, ["pods", "services"], "app")
    assert selector == ownership.managed_selector("app")
    assert len(list(settings.watching.label_selectors)) == 2


def test_register_owner_index_adds_an_indexer():
    registry = kopf.OperatorRegistry()
    original = kopf.get_default_registry()
    kopf.set_default_registry(registry)
    try:
        caches.register_owner_index("pods", "pods-by-owner", lambda b: b["metadata"]["name"], "app")
    finally:
        kopf.set_default_registry(original)
    handlers = list(registry._indexing.get_all_handlers())
    assert [h.id for h in handlers] == ["pods-by-owner"]
    assert handlers[0].labels == {
        "app.kubernetes.io/managed-by": ownership.MANAGED_BY,
        "app.kubernetes.io/name": "app",
    }
