"""The Service an operator puts in front of its pods: the manifest, drift, and the writes
``shared.client.services.converge`` sends, against the fake API server (exact actions)."""

import asyncio

import pytest

from shared.api import ownership, services
from shared.client import services as service_writes
from tests.framework.fakekube import FakeKube

OWNER = {"apiVersion": "v1x", "kind": "Thing", "metadata": {"name": "web", "namespace": "ns", "uid": "u9"}}


def manifest(**kw):
    return services.manifest(OWNER, "demo", selector={"app": "web"}, port=80, target_port=8080, **kw)


def test_manifest_is_owned_and_named_like_the_owner():
    svc = manifest()
    assert svc["metadata"]["name"] == "web"
    assert ownership.is_controlled_by(svc, "u9")
    assert svc["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]


def test_server_filled_fields_do_not_count_as_drift():
    observed = services.view(manifest())
    observed["nodePort"] = 31234  # allocated by the API server for a NodePort service
    assert not services.differs(observed, manifest())


def test_changes_we_own_are_drift():
    observed = services.view(manifest())
    assert services.differs(
        observed, services.manifest(OWNER, "demo", selector={"app": "web"}, port=81, target_port=8080)
    )
    assert services.differs(observed, manifest(service_type="NodePort", node_port=30080))


PATH = "/api/v1/namespaces/ns/services/web"


def stored(**meta) -> dict:
    """Our Service as the API server holds it (controller: OWNER), with ``meta`` merged in."""
    svc = manifest()
    svc["metadata"] = {**svc["metadata"], "namespace": "ns", **meta}
    return svc


def foreign_service(owner_uid: str | None) -> dict:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "ns"}, "spec": {}}
    if owner_uid:
        svc["metadata"]["ownerReferences"] = [
            {"apiVersion": "x/v1", "kind": "TDSet", "name": "web", "uid": owner_uid, "controller": True}
        ]
    return svc


def converge(kube: FakeKube, observed: list, wanted) -> list:
    return asyncio.run(service_writes.converge(kube, "ns", observed, wanted, owner=OWNER))


@pytest.mark.parametrize("controller_uid", [None, "another-owner"])
def test_a_service_someone_else_controls_is_never_patched(controller_uid):
    kube = FakeKube(foreign_service(controller_uid))
    with pytest.raises(services.ServiceConflictError, match="not controlled by this Thing"):
        converge(kube, [], manifest())
    assert kube.keys() == [("create", "services", "ns", "web", "")]


def test_our_own_service_missing_from_a_stale_cache_is_updated():
    kube = FakeKube(stored())
    kube.add({**kube.object(PATH), "spec": {"type": "ClusterIP", "selector": {}, "ports": [{"port": 1}]}})
    done = converge(kube, [], manifest())
    assert [r for r, _ in done] == ["UpdatedService"]
    assert kube.keys() == [("create", "services", "ns", "web", ""), ("patch", "services", "ns", "web", "")]
    assert kube.object(PATH)["spec"]["ports"] == manifest()["spec"]["ports"]


def test_delete_is_preconditioned_on_the_uid_we_saw():
    """The cache shows our Service s1; the name now holds someone else's: nothing is deleted."""
    kube = FakeKube(foreign_service(None))
    observed = [services.view(stored(uid="s1"))]
    done = converge(kube, observed, None)
    assert [a.body for a in kube.writes()] == [{"preconditions": {"uid": "s1"}}]
    assert done == []
    assert kube.object(PATH) is not None


def test_an_update_sets_exactly_the_desired_fields_with_the_uid_as_precondition():
    """A selector key someone added is removed: type, selector and ports are set whole."""
    ours = stored()
    ours["spec"] = {**ours["spec"], "selector": {"app": "web", "tier": "foreign"}}
    kube = FakeKube(ours)
    current = kube.object(PATH)
    done = converge(kube, [services.view(current)], manifest())
    assert [r for r, _ in done] == ["UpdatedService"]
    (patch,) = kube.writes()
    test, *ops = patch.body
    assert test == {"op": "test", "path": "/metadata/uid", "value": current["metadata"]["uid"]}
    assert {op["path"]: op["value"] for op in ops} == {
        "/spec/type": "ClusterIP",
        "/spec/selector": {"app": "web"},
        "/spec/ports": manifest()["spec"]["ports"],
    }
    assert kube.object(PATH)["spec"]["selector"] == {"app": "web"}


def test_a_stale_cache_showing_ours_where_someone_else_s_now_stands_is_a_conflict():
    """Our Service (seen, drifted, by the cache) was deleted and a user's took the name: the
    update's UID test fails (a bare 422) and the answer says whose the name is."""
    drifted = services.view(stored(uid="s1"))
    drifted["selector"] = {"app": "old"}
    kube = FakeKube(foreign_service("another-owner"))
    with pytest.raises(services.ServiceConflictError, match="not controlled by this Thing"):
        converge(kube, [drifted], manifest())
    assert [a.verb for a in kube.actions] == ["patch", "get"]
    assert kube.object(PATH)["spec"] == {}


def test_a_stale_cache_showing_ours_after_it_was_deleted_is_not_a_failure():
    """The deletion's watch event is on its way: nothing to report, the next pass creates it."""
    drifted = services.view(stored(uid="s1"))
    drifted["selector"] = {"app": "old"}
    kube = FakeKube()
    assert converge(kube, [drifted], manifest()) == []
    assert [a.verb for a in kube.actions] == ["patch"]


def test_an_orphan_of_ours_holding_the_name_is_adopted_with_a_uid_precondition():
    kube = FakeKube(stored(ownerReferences=[]))
    uid = kube.object(PATH)["metadata"]["uid"]
    done = converge(kube, [], manifest())
    assert [r for r, _ in done] == ["AdoptedService"]  # and nothing else differed
    assert [a.body for a in kube.writes()][1:] == [
        {"metadata": {"uid": uid, "ownerReferences": [ownership.owner_reference(OWNER)]}}
    ]
    assert ownership.is_controlled_by(kube.object(PATH), "u9")


def test_a_service_of_ours_labelled_for_another_owner_name_is_not_adopted():
    orphan = stored(ownerReferences=[])
    orphan["metadata"]["labels"] = {**orphan["metadata"]["labels"], ownership.INSTANCE: "other"}
    kube = FakeKube(orphan)
    with pytest.raises(services.ServiceConflictError):
        converge(kube, [], manifest())
    assert [a.verb for a in kube.writes()] == ["create"]


def test_a_named_target_port_is_drift_from_a_numbered_one():
    named = services.manifest(OWNER, "demo", selector={"app": "web"}, port=80, target_port="http")
    assert named["spec"]["ports"][0]["targetPort"] == "http"
    assert services.differs(services.view(manifest()), named)
    assert not services.differs(services.view(named), named)
