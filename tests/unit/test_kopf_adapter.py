"""The kopf adapter (``shared.controller.kopf_adapter``): the settings, the registrations, and the
pin of the kopf internals it wraps (the wrapping itself is tested in test_serving.py).

import-linter's contract "kopf is reached through one adapter" keeps every other module of the
operators from importing kopf; these tests make a kopf upgrade fail loudly here first.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging

import kopf
from kopf._cogs.clients import watching
from kopf._core.reactor import queueing

from shared.api.ownership import managed_selector
from shared.controller import kopf_adapter
from shared.controller.caches import managed_labels
from shared.controller.watches import Watch


def _ignore(event_type, body):
    return None


WATCHES = [
    Watch("demo.k8s.io", "v1alpha1", "webservers", _ignore),
    Watch("", "v1", "pods", _ignore, managed_labels("webserver")),
    Watch("autoscaling", "v2", "horizontalpodautoscalers", _ignore),
]


def test_the_kopf_whose_internals_the_adapter_wraps_is_installed():
    """track_watches wraps kopf internals (no public end-of-listing signal exists): a different
    kopf must be looked at again (docs/design/kopf-adapter.md), then this pin moved."""
    assert importlib.metadata.version("kopf") == kopf_adapter.KOPF_VERSION
    assert inspect.isasyncgenfunction(watching.continuous_watch)
    params = inspect.signature(watching.continuous_watch).parameters
    assert {"resource", "namespace", "settings"} <= set(params)
    assert inspect.signature(queueing.watcher).parameters["processor"].kind is inspect.Parameter.KEYWORD_ONLY
    # The direct dispatch replaces kopf's watcher for our resources: it is spawned with these
    # keywords, and its stream is infinite_watch(settings, resource, namespace, operator_paused).
    assert {
        "settings",
        "resource",
        "namespace",
        "operator_paused",
        "operator_indexed",
        "resource_indexed",
    } <= set(inspect.signature(queueing.watcher).parameters)
    assert inspect.isasyncgenfunction(watching.infinite_watch)
    assert {"settings", "resource", "namespace", "operator_paused"} <= set(
        inspect.signature(watching.infinite_watch).parameters
    )


def test_settings_make_kopf_a_watcher_that_never_writes():
    settings = kopf.OperatorSettings()
    kopf_adapter.configure_settings(settings, WATCHES)
    assert settings.peering.standalone is True
    assert settings.scanning.disabled is True
    # kopf posts no Events: ours go through the operator's fenced client.
    assert settings.posting.enabled is False and settings.posting.level > logging.CRITICAL
    # Children only: a server-side selector on the pods' watch, none on the others.
    selectors = {str(k.any_name): v for k, v in settings.watching.label_selectors.items()}
    assert selectors == {"pods": managed_selector("webserver")}
    assert settings.watching.server_timeout == 300 and settings.watching.client_timeout == 330


def test_each_watch_is_one_event_handler_and_nothing_that_writes():
    registry = kopf.OperatorRegistry()

    async def nothing() -> None:
        return None

    kopf_adapter.register(registry, WATCHES, startup=nothing, cleanup=nothing)
    handlers = registry._watching.get_all_handlers()
    assert len(handlers) == len(WATCHES)
    selectors = {(h.selector.group, h.selector.version, h.selector.plural): h.labels for h in handlers}
    assert selectors == {
        ("demo.k8s.io", "v1alpha1", "webservers"): None,
        ("", "v1", "pods"): managed_labels("webserver"),
        ("autoscaling", "v2", "horizontalpodautoscalers"): None,
    }
    # No handler kind that makes kopf write to an object (progress annotations, finalizers).
    assert not registry._changing.get_all_handlers() and not registry._spawning.get_all_handlers()


async def test_an_event_reaches_the_watchs_handler_and_coroutines_are_awaited():
    seen = []

    async def later(event_type, body):
        seen.append(("async", event_type, body["metadata"]["name"]))

    registry = kopf.OperatorRegistry()

    async def nothing() -> None:
        return None

    watches = [
        Watch("", "v1", "pods", lambda t, b: seen.append(("sync", t, b["metadata"]["name"]))),
        Watch("", "v1", "secrets", later),
    ]
    kopf_adapter.register(registry, watches, startup=nothing, cleanup=nothing)
    by_plural = {h.selector.plural: h for h in registry._watching.get_all_handlers()}
    pod, secret = {"metadata": {"name": "p"}}, {"metadata": {"name": "s"}}
    await by_plural["pods"].fn(type="ADDED", event={"type": "ADDED", "object": pod}, body=kopf.Body(pod))
    await by_plural["secrets"].fn(type=None, event={"type": None, "object": secret}, body=kopf.Body(secret))
    assert seen == [("sync", "ADDED", "p"), ("async", None, "s")]


def test_no_diff_base_costs_nothing_per_event_and_stores_nothing():
    """kopf's diff of each body against the last handled one serves change handlers only (none
    are registered): the diff base is one empty essence, never built from the body."""
    settings = kopf.OperatorSettings()
    kopf_adapter.configure_settings(settings, WATCHES)
    storage = settings.persistence.diffbase_storage
    assert isinstance(storage, kopf_adapter.NoDiffBase)
    body = kopf.Body({"metadata": {"name": "p", "annotations": {"a": "b"}}, "spec": {"x": 1}})
    assert storage.fetch(body=body) == storage.build(body=body, extra_fields=["status.x"]) == {}
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=kopf.BodyEssence())
    assert not patch


async def test_with_these_settings_kopf_hands_every_event_to_the_handler_and_writes_nothing():
    """kopf's own processing of an event (its internals, as the operator runs them): the
    handler sees each event, kopf patches nothing."""
    from kopf._cogs.structs import ephemera, references
    from kopf._core.actions import lifecycles
    from kopf._core.engines import indexing, posting
    from kopf._core.reactor import inventory, processing

    seen = []
    watch = Watch("", "v1", "pods", lambda t, b: seen.append((t, b["metadata"]["name"])))
    registry = kopf.OperatorRegistry()

    async def nothing() -> None:
        return None

    kopf_adapter.register(registry, [watch], startup=nothing, cleanup=nothing)
    settings = kopf.OperatorSettings()
    kopf_adapter.configure_settings(settings, [watch])
    resource = references.Resource("", "v1", "pods", namespaced=True)
    memories = inventory.ResourceMemories()
    body = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": []},
            "metadata": {"name": "p", "namespace": "n", "uid": "u1", "resourceVersion": "1"}}  # fmt: skip
    for event_type in ("ADDED", "MODIFIED", "DELETED"):
        patched = await processing.process_resource_event(
            lifecycle=lifecycles.all_at_once,
            indexers=indexing.OperatorIndexers(),
            registry=registry,
            settings=settings,
            memories=memories,
            memobase=ephemera.Memo(),
            resource=resource,
            raw_event={"type": event_type, "object": body},
            event_queue=posting.K8sEventQueue(),
            no_throttling=True,
        )
        assert patched is None  # no PATCH was sent
    assert seen == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


def test_kopfs_line_per_handled_event_is_not_logged_unless_verbose():
    objects = logging.getLogger(kopf_adapter.OBJECT_LOGGER)
    root = logging.getLogger()
    saved = (root.level, objects.level)
    try:
        root.setLevel(logging.INFO)
        objects.setLevel(logging.NOTSET)
        kopf_adapter.configure_settings(kopf.OperatorSettings(), WATCHES)
        assert not objects.isEnabledFor(logging.INFO) and objects.isEnabledFor(logging.WARNING)
        root.setLevel(logging.DEBUG)  # verbose: kopf's every line
        objects.setLevel(logging.NOTSET)
        kopf_adapter.configure_settings(kopf.OperatorSettings(), WATCHES)
        assert objects.isEnabledFor(logging.DEBUG)
    finally:
        root.setLevel(saved[0])
        objects.setLevel(saved[1])


async def test_handlers_get_the_raw_body_not_kopfs_wrapper():
    """The consumers keep the body (the work queue's store): the parsed dict, without kopf's
    Body and its three views around it."""
    got = []
    registry = kopf.OperatorRegistry()

    async def nothing() -> None:
        return None

    kopf_adapter.register(
        registry, [Watch("", "v1", "pods", lambda t, b: got.append(b))], startup=nothing, cleanup=nothing
    )
    (handler,) = registry._watching.get_all_handlers()
    raw = {"metadata": {"name": "p", "uid": "1"}}
    await handler.fn(type="ADDED", event={"type": "ADDED", "object": raw}, body=kopf.Body(raw))
    assert got == [raw] and got[0] is raw


def test_watch_streams_are_decoded_with_orjson_while_tracked_and_the_standard_module_after():
    """kopf's stream decoder calls its module's ``json.loads`` on each line: track_watches makes
    that orjson's (same values), and its undo puts the standard module back."""
    import json

    from kopf._cogs.clients import api

    from shared.controller.serving import Readiness

    assert "json.loads(line.decode('utf-8'))" in inspect.getsource(api.stream)
    assert vars(api)["json"] is json
    undo = kopf_adapter.track_watches(Readiness())
    try:
        line = '{"type":"ADDED","object":{"metadata":{"name":"p","uid":"ü"},"spec":{"n":1,"f":0.5,"x":null}}}'
        assert vars(api)["json"].loads(line) == json.loads(line)
        assert vars(api)["json"] is not json
    finally:
        undo()
    assert vars(api)["json"] is json


def test_collection_urls_are_told_apart_from_objects_and_subresources():
    assert kopf_adapter.collection_of("/api/v1/configmaps?watch=true") == ("", "v1", "configmaps")
    assert kopf_adapter.collection_of("/api/v1/namespaces/ns/configmaps?limit=500") == (
        "",
        "v1",
        "configmaps",
    )
    assert kopf_adapter.collection_of("https://h:6443/apis/apps/v1/deployments") == (
        "apps",
        "v1",
        "deployments",
    )
    assert kopf_adapter.collection_of("/apis/apps/v1/namespaces/ns/deployments") == (
        "apps",
        "v1",
        "deployments",
    )
    assert kopf_adapter.collection_of("/api/v1/namespaces/ns/configmaps/site") is None
    assert kopf_adapter.collection_of("/api/v1/namespaces/ns") is None
    assert kopf_adapter.collection_of("/apis/apps/v1") is None
    assert kopf_adapter.collection_of("/version") is None


async def test_lists_and_watches_of_a_metadata_only_kind_ask_for_partial_object_metadata(monkeypatch):
    """kopf's listing and watch streams call their module's ``request``: while tracked, a GET of
    a metadata-only kind's collection carries the PartialObjectMetadata Accept header, and no
    other request is changed; the undo puts kopf's own back."""
    from kopf._cogs.clients import api

    from shared.controller.serving import Readiness
    from shared.controller.watches import METADATA_ONLY, METADATA_ONLY_LIST

    assert "await request(" in inspect.getsource(api.get)
    assert "await request(" in inspect.getsource(api.stream)
    sent = []

    async def recorder(method, url, *, headers=None, **kwargs):
        sent.append((method, url, headers))

    monkeypatch.setitem(vars(api), "request", recorder)
    watches = [*WATCHES, Watch("", "v1", "configmaps", _ignore, metadata_only=True)]
    undo = kopf_adapter.track_watches(Readiness(), watches=watches)
    try:
        request = vars(api)["request"]
        assert request is not recorder
        await request("get", "/api/v1/namespaces/ns/configmaps?watch=true", headers=None)
        await request("get", "/api/v1/configmaps?limit=500")
        await request("get", "/api/v1/namespaces/ns/pods?watch=true", headers={"X": "y"})
        await request("get", "/api/v1/namespaces/ns/configmaps/site")
        await request("post", "/api/v1/namespaces/ns/configmaps", headers=None)
    finally:
        undo()
    assert vars(api)["request"] is recorder
    assert [h for _, _, h in sent] == [
        {"Accept": METADATA_ONLY},
        {"Accept": METADATA_ONLY_LIST},
        {"X": "y"},
        None,
        None,
    ]


def test_no_metadata_only_watch_leaves_kopfs_requests_alone():
    from kopf._cogs.clients import api

    from shared.controller.serving import Readiness

    original = vars(api)["request"]
    undo = kopf_adapter.track_watches(Readiness(), watches=WATCHES)
    try:
        assert vars(api)["request"] is original
    finally:
        undo()
