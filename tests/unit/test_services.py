import asyncio

import pytest

from shared.api import ownership, services
from shared.client import services as service_writes
from shared.client.kube import ApiError

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


class FakeKube:
    """Records writes; answers create with 409 and get with ``existing`` (the name is taken)."""

    def __init__(self, existing: dict) -> None:
        self.existing = existing
        self.writes: list[tuple[str, str]] = []
        self.patches: list = []

    async def create(self, path, body):
        self.writes.append(("POST", path))
        raise ApiError(409, "AlreadyExists", "exists")

    async def get(self, path, params=None):
        return self.existing

    async def merge_patch(self, path, body):
        self.writes.append(("PATCH", path))
        self.patches.append(body)
        return {**self.existing, "metadata": {**self.existing["metadata"], **body["metadata"]}}

    async def json_patch(self, path, operations, *, uid=None):
        self.writes.append(("PATCH", path))
        self.patches.append((uid, operations))
        return {}

    async def delete(self, path, body=None):
        self.writes.append(("DELETE", path))
        return {}


def foreign_service(owner_uid: str | None) -> dict:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "uid": "s1"}, "spec": {}}
    if owner_uid:
        svc["metadata"]["ownerReferences"] = [
            {"apiVersion": "x/v1", "kind": "TDSet", "name": "web", "uid": owner_uid, "controller": True}
        ]
    return svc


@pytest.mark.parametrize("controller_uid", [None, "another-owner"])
def test_a_service_someone_else_controls_is_never_patched(controller_uid):
    kube = FakeKube(foreign_service(controller_uid))
    with pytest.raises(services.ServiceConflictError, match="not controlled by this Thing"):
        asyncio.run(service_writes.converge(kube, "ns", [], manifest(), owner=OWNER))
    assert kube.writes == [("POST", "/api/v1/namespaces/ns/services")]


def test_our_own_service_missing_from_a_stale_cache_is_updated():
    ours = {**manifest(), "spec": {"type": "ClusterIP", "selector": {}, "ports": [{"port": 1}]}}
    kube = FakeKube(ours)
    done = asyncio.run(service_writes.converge(kube, "ns", [], manifest(), owner=OWNER))
    assert [r for r, _ in done] == ["UpdatedService"]
    assert kube.writes[-1] == ("PATCH", "/api/v1/namespaces/ns/services/web")


def test_delete_is_preconditioned_on_the_uid_we_saw():
    seen = []

    class Kube(FakeKube):
        async def delete(self, path, body=None):
            seen.append(body)
            raise ApiError(409, "Conflict", "Precondition failed: UID in precondition: s1")

    observed = [services.view({**manifest(), "metadata": {**manifest()["metadata"], "uid": "s1"}})]
    done = asyncio.run(service_writes.converge(Kube({}), "ns", observed, None, owner=OWNER))
    assert seen == [{"preconditions": {"uid": "s1"}}]
    assert done == []  # the name now holds someone else's Service: nothing deleted, nothing claimed


def test_an_update_sets_exactly_the_desired_fields_with_the_uid_as_precondition():
    """A selector key someone added is removed: type, selector and ports are set whole."""
    ours = {**manifest(), "metadata": {**manifest()["metadata"], "uid": "s1"}}
    ours["spec"] = {**ours["spec"], "selector": {"app": "web", "tier": "foreign"}}
    kube = FakeKube(ours)
    done = asyncio.run(service_writes.converge(kube, "ns", [services.view(ours)], manifest(), owner=OWNER))
    assert [r for r, _ in done] == ["UpdatedService"]
    uid, ops = kube.patches[-1]
    assert uid == "s1"
    assert {op["path"]: op["value"] for op in ops} == {
        "/spec/type": "ClusterIP",
        "/spec/selector": {"app": "web"},
        "/spec/ports": manifest()["spec"]["ports"],
    }


def test_an_orphan_of_ours_holding_the_name_is_adopted_with_a_uid_precondition():
    orphan = {**manifest(), "metadata": {**manifest()["metadata"], "uid": "s1", "ownerReferences": []}}
    kube = FakeKube(orphan)
    done = asyncio.run(service_writes.converge(kube, "ns", [], manifest(), owner=OWNER))
    assert [r for r, _ in done] == ["AdoptedService"]  # and nothing else differed
    assert kube.patches == [
        {"metadata": {"uid": "s1", "ownerReferences": [ownership.owner_reference(OWNER)]}}
    ]


def test_a_service_of_ours_labelled_for_another_owner_name_is_not_adopted():
    orphan = {**manifest(), "metadata": {**manifest()["metadata"], "uid": "s1", "ownerReferences": []}}
    orphan["metadata"]["labels"] = {**orphan["metadata"]["labels"], ownership.INSTANCE: "other"}
    kube = FakeKube(orphan)
    with pytest.raises(services.ServiceConflictError):
        asyncio.run(service_writes.converge(kube, "ns", [], manifest(), owner=OWNER))
    assert kube.patches == []


def test_a_named_target_port_is_drift_from_a_numbered_one():
    named = services.manifest(OWNER, "demo", selector={"app": "web"}, port=80, target_port="http")
    assert named["spec"]["ports"][0]["targetPort"] == "http"
    assert services.differs(services.view(manifest()), named)
    assert not services.differs(services.view(named), named)
