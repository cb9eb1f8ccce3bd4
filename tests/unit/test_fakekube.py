"""The fake API server of the reconciler tests (``tests.framework.fakekube``): one test per rule.

``tests/integration/test_fakekube_contract.py`` checks the same rules against a real API server.
"""

from __future__ import annotations

import asyncio
import datetime

import pytest

from shared.api.errors import ApiError
from shared.client.kube import is_uid_mismatch, namespaced
from tests.framework.fakekube import (
    Action,
    FakeKube,
    JsonPatchError,
    Resource,
    fail,
    json_patch,
    merge_patch,
    status_error,
)

NS = "ns"
WS = "demo.k8s.io/v1alpha1"
OTHER_UID = "00000000-0000-4000-8000-000000000000"


def configmap(name: str = "c", **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


def webserver(name: str = "w", replicas: int = 1) -> dict:
    return {"apiVersion": WS, "kind": "WebServer", "metadata": {"name": name}, "spec": {"replicas": replicas}}


def pod(name: str = "p", **spec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "x"}], **spec},
    }


CM = namespaced(NS, "configmaps")
WSS = namespaced(NS, "webservers", group_version=WS)


def ws_path(name: str = "w") -> str:
    return namespaced(NS, "webservers", name, WS)


async def test_paths_are_the_ones_the_real_client_builds():
    kube = FakeKube()
    await kube.create(CM, configmap())
    await kube.create(namespaced(NS, "deployments", group_version="apps/v1"), {"metadata": {"name": "d"}})
    assert (await kube.get(namespaced(NS, "configmaps", "c")))["metadata"]["namespace"] == NS
    deployment = await kube.get(namespaced(NS, "deployments", "d", "apps/v1"))
    assert (deployment["apiVersion"], deployment["kind"]) == ("apps/v1", "Deployment")
    assert [i["metadata"]["name"] for i in (await kube.get("/api/v1/configmaps"))["items"]] == ["c"]
    for wrong in (
        namespaced(NS, "configmap", "c"),  # a typo in the plural
        namespaced(NS, "deployments", "d", "apps/v1beta1"),  # a version not served
        namespaced(NS, "deployments", "d"),  # the wrong group
        namespaced(NS, "configmaps", "c") + "/status",  # no status subresource
    ):
        with pytest.raises(ApiError) as err:
            await kube.get(wrong)
        assert (err.value.status, err.value.message) == (
            404,
            "the server could not find the requested resource",
        )


async def test_create_assigns_uid_resource_version_timestamp_and_generation():
    kube = FakeKube(now=lambda: 0.0)
    first = await kube.create(WSS, webserver("a"))
    second = await kube.create(WSS, webserver("b"))
    meta = first["metadata"]
    assert meta["uid"] and meta["uid"] != second["metadata"]["uid"]
    assert int(second["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    assert meta["creationTimestamp"] == "1970-01-01T00:00:00Z"
    assert meta["generation"] == 1 and meta["namespace"] == NS
    assert "generation" not in (await kube.create(CM, configmap()))["metadata"]  # as the API server


async def test_create_fills_in_a_generated_name():
    kube = FakeKube()
    made = await kube.create(
        CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "x-"}}
    )
    assert made["metadata"]["name"].startswith("x-") and len(made["metadata"]["name"]) == 7
    assert kube.object(namespaced(NS, "configmaps", made["metadata"]["name"])) is not None


async def test_create_drops_the_status_of_a_kind_with_a_status_subresource_and_applies_defaults():
    kube = FakeKube()
    made = await kube.create(WSS, {**webserver(), "status": {"replicas": 9}})
    assert "status" not in made
    assert made["spec"]["image"] == "nginxdemos/hello"  # the CRD schema's default


async def test_a_second_create_is_already_exists_with_the_api_servers_status_body():
    kube = FakeKube(webserver() | {"metadata": {"name": "w", "namespace": NS}})
    with pytest.raises(ApiError) as err:
        await kube.create(WSS, webserver())
    exc = err.value
    assert (exc.status, exc.reason, exc.message) == (
        409,
        "AlreadyExists",
        'webservers.demo.k8s.io "w" already exists',
    )
    assert exc.body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'webservers.demo.k8s.io "w" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "w", "group": "demo.k8s.io", "kind": "webservers"},
        "code": 409,
    }


async def test_a_missing_object_is_not_found():
    kube = FakeKube()
    with pytest.raises(ApiError) as err:
        await kube.get(namespaced(NS, "pods", "p"))
    assert (err.value.status, err.value.reason, err.value.message) == (404, "NotFound", 'pods "p" not found')
    assert await kube.get_if_exists(namespaced(NS, "pods", "p")) is None


async def test_lists_filter_by_label_and_field_selectors():
    kube = FakeKube()
    for name, labels in (("a", {"app": "x", "tier": "web"}), ("b", {"app": "x"}), ("c", {"app": "y"})):
        await kube.create(CM, configmap(name, **labels))

    async def names(**params: str) -> list[str]:
        return [i["metadata"]["name"] for i in (await kube.get(CM, params=params))["items"]]

    assert await names(labelSelector="app=x") == ["a", "b"]
    assert await names(labelSelector="app==x,tier") == ["a"]
    assert await names(labelSelector="app!=x") == ["c"]
    assert await names(labelSelector="!tier") == ["b", "c"]
    assert await names(labelSelector="app in (x, y),tier notin (web)") == ["b", "c"]
    assert await names(fieldSelector="metadata.name=b") == ["b"]
    listing = await kube.get(CM)
    assert listing["kind"] == "ConfigMapList" and listing["metadata"]["resourceVersion"]


async def test_an_update_with_a_stale_resource_version_conflicts():
    kube = FakeKube()
    made = await kube.create(CM, configmap())
    await kube.replace(namespaced(NS, "configmaps", "c"), {**made, "data": {"a": "1"}})
    with pytest.raises(ApiError) as err:
        await kube.replace(namespaced(NS, "configmaps", "c"), {**made, "data": {"a": "2"}})
    assert (err.value.status, err.value.reason) == (409, "Conflict")
    assert err.value.message == (
        'Operation cannot be fulfilled on configmaps "c": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert not is_uid_mismatch(err.value)
    # A built-in kind takes an update without a resourceVersion; a custom resource does not.
    await kube.replace(namespaced(NS, "configmaps", "c"), {**configmap(), "data": {"a": "3"}})
    await kube.create(WSS, webserver())
    with pytest.raises(ApiError) as err:
        await kube.replace(ws_path(), webserver(replicas=2))
    assert err.value.status == 422 and "resourceVersion" in err.value.message


async def test_generation_counts_spec_changes_only():
    kube = FakeKube()
    await kube.create(WSS, webserver())
    await kube.merge_patch(ws_path(), {"metadata": {"labels": {"a": "b"}}})
    assert (await kube.get(ws_path()))["metadata"]["generation"] == 1
    await kube.json_patch(ws_path() + "/status", [{"op": "add", "path": "/status", "value": {"replicas": 1}}])
    assert (await kube.get(ws_path()))["metadata"]["generation"] == 1
    changed = await kube.merge_patch(ws_path(), {"spec": {"replicas": 3}})
    assert changed["metadata"]["generation"] == 2


async def test_a_write_that_changes_nothing_keeps_the_resource_version():
    kube = FakeKube()
    made = await kube.create(WSS, webserver())
    same = await kube.merge_patch(ws_path(), {"spec": {"replicas": 1}})
    assert same["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]


async def test_merge_patch_is_rfc_7386():
    kube = FakeKube()
    await kube.create(CM, {**configmap(a="1", b="2"), "data": {"list": "x"}})
    patched = await kube.merge_patch(
        namespaced(NS, "configmaps", "c"), {"metadata": {"labels": {"a": None, "c": "3"}}}
    )
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert merge_patch({"a": [1, 2], "b": {"c": 1}}, {"a": [3], "b": {"c": None, "d": {"e": None}}}) == {
        "a": [3],
        "b": {"d": {}},
    }
    assert merge_patch({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}


def test_json_patch_is_rfc_6902():
    doc = {"a": {"b": [1, 2]}, "c~d/e": 1}
    assert json_patch(doc, [{"op": "add", "path": "/a/b/-", "value": 3}]) == {
        "a": {"b": [1, 2, 3]},
        "c~d/e": 1,
    }
    assert json_patch(doc, [{"op": "add", "path": "/a/b/0", "value": 0}])["a"]["b"] == [0, 1, 2]
    assert json_patch(doc, [{"op": "remove", "path": "/c~0d~1e"}]) == {"a": {"b": [1, 2]}}
    assert json_patch(doc, [{"op": "replace", "path": "/a/b/1", "value": 9}])["a"]["b"] == [1, 9]
    assert json_patch(doc, [{"op": "move", "from": "/a/b", "path": "/x"}]) == {
        "a": {},
        "c~d/e": 1,
        "x": [1, 2],
    }
    assert json_patch(doc, [{"op": "copy", "from": "/a/b/0", "path": "/y"}])["y"] == 1
    assert json_patch(doc, [{"op": "test", "path": "/a/b", "value": [1, 2]}]) == doc
    assert doc == {"a": {"b": [1, 2]}, "c~d/e": 1}  # never changed in place
    for failing in (
        {"op": "test", "path": "/a/b", "value": [2]},
        {"op": "test", "path": "/nothing", "value": None},
        {"op": "test", "path": "/a", "value": {"b": [True, 2]}},  # JSON: true is not 1
        {"op": "replace", "path": "/nothing", "value": 1},
        {"op": "remove", "path": "/a/b/5"},
        {"op": "add", "path": "/x/y", "value": 1},
        {"op": "frobnicate", "path": "/a"},
    ):
        with pytest.raises(JsonPatchError):
            json_patch(doc, [failing])


async def test_a_failed_json_patch_is_the_api_servers_bare_422_not_a_uid_mismatch():
    """The client's UID precondition is a ``test`` of ``/metadata/uid``; kube-apiserver says only
    422 when it fails, so ``is_uid_mismatch`` cannot tell (StatusWriter asks with a list)."""
    kube = FakeKube()
    await kube.create(WSS, webserver())
    with pytest.raises(ApiError) as err:
        await kube.json_patch(
            ws_path() + "/status", [{"op": "add", "path": "/status", "value": {}}], uid=OTHER_UID
        )
    exc = err.value
    assert (exc.status, exc.reason) == (422, "Invalid")
    assert exc.message == "the server rejected our request due to an error in our request"
    assert not is_uid_mismatch(exc)
    assert "status" not in kube.object(ws_path())


async def test_a_merge_patch_changing_the_uid_is_refused_as_immutable():
    kube = FakeKube()
    await kube.create(namespaced(NS, "pods"), pod())
    with pytest.raises(ApiError) as err:
        await kube.merge_patch(
            namespaced(NS, "pods", "p"), {"metadata": {"uid": OTHER_UID, "labels": {"a": "b"}}}
        )
    assert err.value.status == 422 and "field is immutable" in err.value.message
    assert is_uid_mismatch(err.value)


async def test_a_patch_naming_a_resource_version_is_conditional_on_it():
    kube = FakeKube()
    await kube.create(WSS, webserver())
    with pytest.raises(ApiError) as err:
        await kube.merge_patch(ws_path(), {"metadata": {"resourceVersion": "0"}, "spec": {"replicas": 2}})
    assert err.value.status == 409


async def test_delete_preconditions_conflict_when_they_do_not_hold():
    kube = FakeKube()
    made = await kube.create(CM, configmap())
    path = namespaced(NS, "configmaps", "c")
    with pytest.raises(ApiError) as err:
        await kube.delete(path, {"preconditions": {"uid": OTHER_UID}})
    assert err.value.status == 409 and is_uid_mismatch(err.value)
    with pytest.raises(ApiError) as err:
        await kube.delete(path, {"preconditions": {"resourceVersion": "0"}})
    assert err.value.status == 409 and not is_uid_mismatch(err.value)
    answer = await kube.delete(path, {"preconditions": {"uid": made["metadata"]["uid"]}})
    assert answer["status"] == "Success" and kube.object(path) is None
    with pytest.raises(ApiError) as err:
        await kube.delete(path)
    assert err.value.status == 404


async def test_the_main_resource_ignores_status_and_the_status_subresource_writes_only_status():
    kube = FakeKube()
    await kube.create(WSS, webserver())
    await kube.merge_patch(ws_path(), {"status": {"replicas": 5}})
    assert "status" not in kube.object(ws_path())
    written = await kube.merge_patch(
        ws_path() + "/status",
        {
            "metadata": {"uid": OTHER_UID, "labels": {"a": "b"}},
            "spec": {"replicas": 9},
            "status": {"replicas": 2},
        },
    )
    assert written["status"] == {"replicas": 2}
    assert written["spec"]["replicas"] == 1 and "labels" not in written["metadata"]
    assert written["metadata"]["uid"] != OTHER_UID  # metadata in a status patch is no precondition


async def test_without_a_status_subresource_the_main_resource_writes_status():
    kube = FakeKube(resources=[Resource("example.com", ("v1",), "things", "Thing", custom=True)])
    path = namespaced(NS, "things", "t", "example.com/v1")
    await kube.create(namespaced(NS, "things", group_version="example.com/v1"), {"metadata": {"name": "t"}})
    assert (await kube.merge_patch(path, {"status": {"a": 1}}))["status"] == {"a": 1}
    with pytest.raises(ApiError) as err:
        await kube.get(path + "/status")
    assert err.value.status == 404


async def test_finalizers_and_pods_on_nodes_hold_a_deleted_object_as_terminating():
    kube = FakeKube()
    await kube.create(WSS, {**webserver(), "metadata": {"name": "w", "finalizers": ["example.com/f"]}})
    deleting = await kube.delete(ws_path())
    assert deleting["metadata"]["deletionTimestamp"] and deleting["metadata"]["generation"] == 2
    await kube.json_patch(ws_path(), [{"op": "remove", "path": "/metadata/finalizers"}])
    assert kube.object(ws_path()) is None
    await kube.create(namespaced(NS, "pods"), pod("bound", nodeName="n1"))
    await kube.create(namespaced(NS, "pods"), pod("unbound"))
    await kube.delete(namespaced(NS, "pods", "bound"))
    await kube.delete(namespaced(NS, "pods", "unbound"))
    assert kube.object(namespaced(NS, "pods", "bound"))["metadata"]["deletionTimestamp"]
    assert kube.object(namespaced(NS, "pods", "unbound")) is None
    kube.remove(namespaced(NS, "pods", "bound"))  # the kubelet confirms
    assert kube.objects("pods", NS) == []


async def test_the_scale_subresource_reads_and_writes_replicas():
    kube = FakeKube()
    await kube.create(WSS, webserver(replicas=2))
    scale = await kube.get(ws_path() + "/scale")
    assert (scale["kind"], scale["apiVersion"], scale["spec"]) == ("Scale", "autoscaling/v1", {"replicas": 2})
    await kube.merge_patch(ws_path() + "/scale", {"spec": {"replicas": 4}})
    assert kube.object(ws_path())["spec"]["replicas"] == 4


async def test_actions_record_each_request_like_client_gos_fake():
    kube = FakeKube()
    await kube.create(CM, configmap())
    await kube.get(CM, params={"labelSelector": "a=b"})
    await kube.get_if_exists(namespaced(NS, "configmaps", "missing"))
    await kube.merge_patch(namespaced(NS, "configmaps", "c"), {"data": {"a": "1"}})
    await kube.create(WSS, webserver())
    await kube.json_patch(ws_path() + "/status", [{"op": "add", "path": "/status", "value": {}}])
    await kube.delete(namespaced(NS, "configmaps", "c"))
    assert kube.keys(reads=True) == [
        ("create", "configmaps", NS, "c", ""),
        ("list", "configmaps", NS, "", ""),
        ("get", "configmaps", NS, "missing", ""),
        ("patch", "configmaps", NS, "c", ""),
        ("create", "webservers", NS, "w", ""),
        ("patch", "webservers", NS, "w", "status"),
        ("delete", "configmaps", NS, "c", ""),
    ]
    assert [a.verb for a in kube.writes()] == ["create", "patch", "create", "patch", "delete"]
    patch = kube.writes()[1]
    assert (patch.patch_type, patch.body, patch.group) == ("merge", {"data": {"a": "1"}}, "")
    assert kube.actions[1].params == {"labelSelector": "a=b"}
    kube.clear_actions()
    assert kube.actions == []


async def test_answers_and_recorded_bodies_never_alias_the_store():
    kube = FakeKube()
    body = configmap()
    made = await kube.create(CM, body)
    body["metadata"]["name"] = "changed"
    made["metadata"]["labels"]["x"] = "y"
    assert kube.actions[0].body["metadata"]["name"] == "c"
    assert kube.object(namespaced(NS, "configmaps", "c"))["metadata"]["labels"] == {}


async def test_a_reactor_refuses_a_verb_on_a_resource():
    """A quota refusal of a pod create, as the API server words it."""
    kube = FakeKube()
    kube.prepend_reactor("create", "pods", fail(403, message="exceeded quota: q, requested: pods=1"))
    with pytest.raises(ApiError) as err:
        await kube.create(namespaced(NS, "pods"), pod())
    assert (err.value.status, err.value.reason) == (403, "Forbidden")
    assert err.value.message == 'pods "p" is forbidden: exceeded quota: q, requested: pods=1'
    assert kube.objects("pods") == [] and kube.keys() == [("create", "pods", NS, "p", "")]
    await kube.create(CM, configmap())  # other resources are untouched


async def test_a_reactor_can_fire_a_number_of_times_and_name_a_subresource():
    kube = FakeKube()
    await kube.create(WSS, webserver())
    kube.prepend_reactor("patch", "webservers/status", fail(409), times=1)
    status = [{"op": "add", "path": "/status", "value": {"replicas": 1}}]
    with pytest.raises(ApiError) as err:
        await kube.json_patch(ws_path() + "/status", status)
    assert err.value.status == 409 and "the object has been modified" in err.value.message
    await kube.merge_patch(ws_path(), {"spec": {"replicas": 2}})  # the main resource: no match
    assert (await kube.json_patch(ws_path() + "/status", status))["status"] == {"replicas": 1}


async def test_a_reactor_can_answer_or_alter_the_stores_answer():
    kube = FakeKube()
    await kube.create(CM, configmap())

    async def older(action: Action) -> dict:
        answer = await kube.serve(action)
        return {**answer, "data": {"stale": "yes"}}

    kube.prepend_reactor("get", "configmaps", older)
    kube.prepend_reactor("*", "secrets", lambda action: {"kind": "Secret", "metadata": {"name": action.name}})
    assert (await kube.get(namespaced(NS, "configmaps", "c")))["data"] == {"stale": "yes"}
    assert (await kube.get(namespaced(NS, "secrets", "s")))["metadata"]["name"] == "s"
    kube.prepend_reactor("get", "*", lambda action: None)  # passes: the next reactor answers
    assert (await kube.get(namespaced(NS, "configmaps", "c")))["data"] == {"stale": "yes"}
    kube.prepend_reactor("delete", "*", fail(500))
    with pytest.raises(ApiError) as err:
        await kube.delete(namespaced(NS, "configmaps", "c"))
    assert (err.value.status, err.value.reason) == (500, "InternalError")


async def test_writes_are_fenced_as_the_real_client_fences_them():
    kube = FakeKube()
    asked: list[tuple[str, str]] = []

    def fence(method: str, path: str) -> None:
        asked.append((method, path))
        raise RuntimeError("not the leader")

    kube.fence = fence
    assert await kube.get_if_exists(namespaced(NS, "configmaps", "c")) is None  # reads are not fenced
    with pytest.raises(RuntimeError, match="not the leader"):
        await kube.create(CM, configmap())
    assert asked == [("POST", CM)]
    assert kube.keys() == [] and kube.objects("configmaps") == []  # never sent


async def test_status_errors_look_like_the_real_clients():
    exc = status_error(404, "NotFound", 'pods "p" not found', name="p", resource="pods")
    assert (exc.status, exc.reason, exc.message) == (404, "NotFound", 'pods "p" not found')
    assert exc.body["details"] == {"name": "p", "kind": "pods"} and exc.body["code"] == 404


async def test_seeded_objects_are_stored_without_actions():
    owner = webserver() | {"metadata": {"name": "w", "namespace": NS, "uid": "u1"}}
    kube = FakeKube(owner, configmap() | {"metadata": {"name": "c", "namespace": NS}})
    assert kube.actions == []
    assert kube.object(ws_path())["metadata"]["uid"] == "u1"
    assert [c["metadata"]["name"] for c in kube.objects("configmaps", NS)] == ["c"]
    with pytest.raises(ValueError, match="namespace"):
        kube.add(configmap())


async def test_the_observer_sees_every_request_like_the_real_clients():
    seen: list[tuple[str, int | str]] = []
    kube = FakeKube(observer=lambda method, host, code, seconds: seen.append((method, code)))
    await kube.create(CM, configmap())
    await kube.get_if_exists(namespaced(NS, "configmaps", "x"))
    assert seen == [("POST", 201), ("GET", 404)]
    await kube.load()
    await kube.close()
    assert kube.closed


async def test_timestamps_come_from_the_clock_given():
    moment = datetime.datetime(2026, 3, 29, 1, 30, tzinfo=datetime.UTC)
    kube = FakeKube(now=lambda: moment)
    made = await kube.create(CM, configmap())
    assert made["metadata"]["creationTimestamp"] == "2026-03-29T01:30:00Z"


async def test_concurrent_requests_are_recorded_in_the_order_they_were_started():
    kube = FakeKube()
    await asyncio.gather(*(kube.create(namespaced(NS, "pods"), pod(f"p{i}")) for i in range(5)))
    assert [a.name for a in kube.actions] == ["p0", "p1", "p2", "p3", "p4"]


async def test_events_are_actions_that_a_test_can_set_aside():
    kube = FakeKube()
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": "w."}}
    await kube.create(CM, configmap())
    await kube.create(namespaced(NS, "events"), {**event, "type": "Warning", "reason": "R", "message": "m"})
    await kube.create(
        namespaced(NS, "events", group_version="events.k8s.io/v1"),
        {**event, "apiVersion": "events.k8s.io/v1", "type": "Normal", "reason": "S", "note": "n"},
    )
    assert kube.events() == [("Warning", "R", "m"), ("Normal", "S", "n")]
    assert kube.keys(ignore=["events"]) == [("create", "configmaps", NS, "c", "")]
    assert [a.resource for a in kube.writes(ignore=["configmaps"])] == ["events", "events"]
    # An Event that recurs is patched (its count grown): reported again, with its latest message.
    (posted,) = [o for o in kube.objects("events", NS) if o["reason"] == "R"]
    await kube.merge_patch(
        namespaced(NS, "events", posted["metadata"]["name"]), {"count": 2, "message": "m2"}
    )
    assert kube.events()[-1] == ("Warning", "R", "m2")


async def test_methods_a_path_does_not_allow_are_refused():
    kube = FakeKube()
    for call in (
        kube.create(namespaced(NS, "configmaps", "c"), configmap()),  # create on an object
        kube.delete(CM),  # delete on a collection
        kube.create("/api/v1/configmaps", configmap()),  # create without a namespace
        kube.delete(namespaced(NS, "pods", "p") + "/status"),
    ):
        with pytest.raises(ApiError) as err:
            await call
        assert err.value.status == 405


async def test_clients_of_one_server_share_objects_not_actions_reactors_or_fences():
    kube = FakeKube()
    user = kube.client()
    user.prepend_reactor("delete", "*", fail(403))
    kube.fence = lambda method, path: None
    await user.create(CM, configmap())
    assert (await kube.get(namespaced(NS, "configmaps", "c")))["metadata"]["name"] == "c"
    await kube.delete(namespaced(NS, "configmaps", "c"))  # the user's reactor is the user's
    assert user.keys() == [("create", "configmaps", NS, "c", "")]
    assert kube.keys(reads=True) == [
        ("get", "configmaps", NS, "c", ""),
        ("delete", "configmaps", NS, "c", ""),
    ]
    assert user.fence is None and kube.objects("configmaps") == []
