"""Status writes and the Service a WebServer or TDSet puts in front of its pods, as
kubernetes/sample-controller tests its controller: objects in a fake API server
(``tests.framework.fakekube.FakeKube``), one pass, then the exact actions it sent and the
objects that result.
"""

from __future__ import annotations

import pytest

from shared.api import ownership
from shared.api.errors import ApiError, SupersededError
from shared.api.services import ServiceConflictError, manifest, view
from shared.client import services
from shared.client.kube import namespaced
from shared.client.statuses import StatusWriter
from tests.framework.fakekube import FakeKube, fail

NS = "ns"
GROUP, VERSION, PLURAL = "demo.k8s.io", "v1alpha1", "webservers"
WS = f"{GROUP}/{VERSION}"
WS_PATH = namespaced(NS, PLURAL, "web", WS)
SVC_PATH = namespaced(NS, "services", "web")


def webserver(name: str = "web") -> dict:
    return {
        "apiVersion": WS,
        "kind": "WebServer",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": 2},
    }


def wanted(owner: dict, **changes) -> dict:
    return manifest(owner, "webserver", selector={"app": "web"}, port=80, target_port="http", **changes)


def status_patch(name: str = "web") -> tuple[str, str, str, str, str]:
    return ("patch", PLURAL, NS, name, "status")


# -- StatusWriter -------------------------------------------------------------------------------


async def test_a_status_is_written_once_and_only_when_it_differs():
    kube = FakeKube(webserver())
    writer = StatusWriter(kube, GROUP, VERSION, PLURAL)
    read = kube.object(WS_PATH)

    assert await writer.write(read, {"replicas": 2, "count": 2})
    assert kube.keys() == [status_patch()]
    assert kube.object(WS_PATH)["status"] == {"replicas": 2, "count": 2}

    # The next pass: the watch has not delivered our write yet (the same old read), then has.
    kube.clear_actions()
    assert not await writer.write(read, {"replicas": 2, "count": 2})
    assert not await writer.write(kube.object(WS_PATH), {"replicas": 2, "count": 2})
    assert kube.actions == []

    assert await writer.write(kube.object(WS_PATH), {"replicas": 1})
    assert kube.keys() == [status_patch()]
    # Sent whole, as a merge patch would leave it, and only the status: the spec is untouched.
    written = kube.object(WS_PATH)
    assert written["status"] == {"replicas": 1, "count": 2}
    assert written["metadata"]["generation"] == 1


async def test_each_key_is_replaced_whole_never_merged_into():
    """A nested object written with fewer keys keeps none of the old ones (TDSet's decidedBy
    went from {override, annotation} to {default} and kept the stale entry); keys the write does
    not name stay; None removes a key, and nulls inside a value are dropped."""
    kube = FakeKube(webserver())
    writer = StatusWriter(kube, GROUP, VERSION, PLURAL)
    assert await writer.write(
        kube.object(WS_PATH),
        {"decidedBy": {"layer": "override", "entry": "annotation"}, "replicas": 5, "old": "x"},
    )
    assert await writer.write(
        kube.object(WS_PATH), {"decidedBy": {"layer": "default", "entry": None}, "replicas": 2, "old": None}
    )
    assert kube.object(WS_PATH)["status"] == {"decidedBy": {"layer": "default"}, "replicas": 2}
    # Through a stale read (the watch has not shown the first write): the same result.
    read = kube.object(WS_PATH)
    assert await writer.write(read, {"decidedBy": {"layer": "window", "entry": "peak"}})
    assert await writer.write(read, {"decidedBy": {"layer": "default"}})
    assert kube.object(WS_PATH)["status"] == {"decidedBy": {"layer": "default"}, "replicas": 2}


async def test_the_status_write_carries_the_uid_of_the_object_the_pass_read():
    kube = FakeKube(webserver())
    writer = StatusWriter(kube, GROUP, VERSION, PLURAL)
    read = kube.object(WS_PATH)
    await writer.write(read, {"replicas": 2})
    assert kube.writes()[0].body[0] == {
        "op": "test",
        "path": "/metadata/uid",
        "value": read["metadata"]["uid"],
    }


async def test_a_status_for_an_object_replaced_under_its_name_is_never_written_on_the_new_one():
    """``kubectl replace --force`` while a pass runs: the UID test fails (a bare 422), the writer
    asks with a list, finds another UID under the name, and the pass is superseded."""
    kube = FakeKube(webserver())
    writer = StatusWriter(kube, GROUP, VERSION, PLURAL)
    read = kube.object(WS_PATH)
    kube.remove(WS_PATH)
    kube.add(webserver())  # the same name, another UID

    with pytest.raises(SupersededError):
        await writer.write(read, {"replicas": 2})
    assert kube.keys(reads=True) == [status_patch(), ("list", PLURAL, NS, "", "")]
    assert kube.actions[1].params == {"fieldSelector": "metadata.name=web"}
    assert "status" not in kube.object(WS_PATH)
    assert writer.last(read) is None


async def test_a_status_for_a_deleted_object_is_superseded_without_a_list():
    kube = FakeKube(webserver())
    writer = StatusWriter(kube, GROUP, VERSION, PLURAL)
    read = kube.object(WS_PATH)
    kube.remove(WS_PATH)
    with pytest.raises(SupersededError):
        await writer.write(read, {"replicas": 2})
    assert kube.keys(reads=True) == [status_patch()]


async def test_a_refused_status_write_for_the_same_object_is_an_error_not_superseded():
    kube = FakeKube(webserver())
    kube.prepend_reactor("patch", "webservers/status", fail(422, message="status.replicas: Invalid value"))
    writer = StatusWriter(kube, GROUP, VERSION, PLURAL)
    with pytest.raises(ApiError) as err:
        await writer.write(kube.object(WS_PATH), {"replicas": -1})
    assert err.value.status == 422
    assert kube.keys(reads=True) == [status_patch(), ("list", PLURAL, NS, "", "")]
    assert writer.last(kube.object(WS_PATH)) is None  # not remembered: the next pass writes again


async def test_a_conflicting_status_write_reaches_the_caller():
    kube = FakeKube(webserver())
    kube.prepend_reactor("patch", "webservers/status", fail(409), times=1)
    writer = StatusWriter(kube, GROUP, VERSION, PLURAL)
    read = kube.object(WS_PATH)
    with pytest.raises(ApiError) as err:
        await writer.write(read, {"replicas": 2})
    assert err.value.status == 409
    assert await writer.write(read, {"replicas": 2})  # the retry of the next pass
    assert kube.keys() == [status_patch(), status_patch()]


# -- services.converge ----------------------------------------------------------------------------


async def test_a_missing_service_is_created_controlled_by_its_owner():
    kube = FakeKube(webserver())
    owner = kube.object(WS_PATH)
    done = await services.converge(kube, NS, [], wanted(owner), owner=owner)
    assert done == [("CreatedService", "Created service web")]
    assert kube.keys() == [("create", "services", NS, "web", "")]
    svc = kube.object(SVC_PATH)
    assert ownership.is_controlled_by(svc, owner["metadata"]["uid"])
    assert svc["spec"]["selector"] == {"app": "web"}
    assert svc["metadata"]["labels"][ownership.INSTANCE] == "web"


async def test_a_service_as_wanted_is_left_alone():
    kube = FakeKube(webserver())
    owner = kube.object(WS_PATH)
    svc = kube.add(wanted(owner))
    assert await services.converge(kube, NS, [view(svc)], wanted(owner), owner=owner) == []
    assert kube.actions == []


async def test_a_drifted_service_is_set_back_whole_with_its_uid_as_precondition():
    """A selector key someone added is removed, the allocated node port and cluster IP stay."""
    kube = FakeKube(webserver())
    owner = kube.object(WS_PATH)
    drifted = wanted(owner)
    drifted["spec"]["selector"] = {"app": "web", "tier": "foreign"}
    drifted["spec"]["clusterIP"] = "10.0.0.7"
    svc = kube.add(drifted)

    done = await services.converge(kube, NS, [view(svc)], wanted(owner), owner=owner)
    assert done == [("UpdatedService", "Updated service web")]
    assert kube.keys() == [("patch", "services", NS, "web", "")]
    assert kube.writes()[0].body[0] == {
        "op": "test",
        "path": "/metadata/uid",
        "value": svc["metadata"]["uid"],
    }
    now = kube.object(SVC_PATH)
    assert now["spec"]["selector"] == {"app": "web"} and now["spec"]["clusterIP"] == "10.0.0.7"


async def test_an_unwanted_service_is_deleted_with_its_uid_as_precondition():
    kube = FakeKube(webserver())
    owner = kube.object(WS_PATH)
    svc = kube.add(wanted(owner))
    done = await services.converge(kube, NS, [view(svc)], None, owner=owner)
    assert done == [("DeletedService", "Deleted service web")]
    assert kube.keys() == [("delete", "services", NS, "web", "")]
    assert kube.writes()[0].body == {"preconditions": {"uid": svc["metadata"]["uid"]}}
    assert kube.object(SVC_PATH) is None


async def test_a_stale_cache_never_deletes_a_service_someone_re_created_under_the_name():
    kube = FakeKube(webserver())
    owner = kube.object(WS_PATH)
    ours = view(kube.add(wanted(owner)))
    kube.remove(SVC_PATH)
    theirs = kube.add({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": NS}})

    assert await services.converge(kube, NS, [ours], None, owner=owner) == []
    assert kube.keys() == [("delete", "services", NS, "web", "")]
    assert kube.object(SVC_PATH)["metadata"]["uid"] == theirs["metadata"]["uid"]


async def test_a_service_someone_else_controls_is_reported_and_never_written():
    kube = FakeKube(webserver())
    owner = kube.object(WS_PATH)
    foreign = kube.add(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": NS},
            "spec": {"selector": {"app": "theirs"}},
        }
    )
    with pytest.raises(ServiceConflictError, match="not controlled by this WebServer"):
        await services.converge(kube, NS, [], wanted(owner), owner=owner)
    assert kube.keys(reads=True) == [
        ("create", "services", NS, "web", ""),  # refused: AlreadyExists
        ("get", "services", NS, "web", ""),
    ]
    assert kube.object(SVC_PATH) == foreign


async def test_an_orphan_of_ours_is_adopted_then_set_back():
    kube = FakeKube(webserver())
    owner = kube.object(WS_PATH)
    orphan = wanted(owner)
    orphan["metadata"]["ownerReferences"] = []
    orphan["spec"]["ports"][0]["port"] = 8080
    orphan = kube.add(orphan)

    done = await services.converge(kube, NS, [], wanted(owner), owner=owner)
    assert [reason for reason, _ in done] == ["AdoptedService", "UpdatedService"]
    assert kube.keys(reads=True) == [
        ("create", "services", NS, "web", ""),
        ("get", "services", NS, "web", ""),
        ("patch", "services", NS, "web", ""),  # adoption: a merge patch carrying the UID
        ("patch", "services", NS, "web", ""),  # the update: a JSON patch testing the UID
    ]
    adoption, update = kube.writes()[1:]
    assert (adoption.patch_type, adoption.body["metadata"]["uid"]) == ("merge", orphan["metadata"]["uid"])
    assert update.patch_type == "json"
    svc = kube.object(SVC_PATH)
    assert ownership.is_controlled_by(svc, owner["metadata"]["uid"])
    assert svc["spec"]["ports"][0]["port"] == 80


async def test_an_update_through_a_stale_cache_fails_on_its_uid_and_touches_nothing():
    """Ours was replaced by another Service of the same name since the cache saw it: the UID
    test refuses the update (the API server's bare 422, which reaches the caller as an error)."""
    kube = FakeKube(webserver())
    owner = kube.object(WS_PATH)
    ours = view(kube.add(wanted(owner, service_type="NodePort")))
    kube.remove(SVC_PATH)
    theirs = kube.add(wanted(owner, service_type="NodePort"))

    with pytest.raises(ApiError) as err:
        await services.converge(kube, NS, [ours], wanted(owner), owner=owner)
    assert err.value.status == 422
    assert kube.keys() == [("patch", "services", NS, "web", "")]
    assert kube.object(SVC_PATH) == theirs
