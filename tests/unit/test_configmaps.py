"""ConfigMaps read by reference (``shared.controller.configmaps``): what no object references is
never read nor kept, what is referenced is kept as its summary only, read again after a write
the watch reports, and the readers of a ConfigMap are woken by its writes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.webserver import reconciler as webserver_reconciler
from operators.webserver.reconciler import ConfigMaps, content_digest
from shared.api.errors import ApiError
from shared.controller.configmaps import ReferencedConfigMaps
from shared.controller.watches import METADATA_ONLY
from tests.framework.fakekube import FakeKube, fail
from tests.framework.properties import examples

NS = "ns"


def webserver_summary():
    """The WebServer operator's summary of a ConfigMap, as its reconciler makes it (a new
    one each time: it keeps digests by the ConfigMap's UID and resourceVersion)."""
    return ConfigMaps(None, lambda ns, name: None).summarize  # type: ignore[arg-type]


def store(kube: FakeKube, name: str, data: dict[str, str], namespace: str = NS) -> dict[str, Any]:
    """Store ConfigMap ``name``; returns what the metadata-only watch delivers of it."""
    meta = {"name": name, "namespace": namespace}
    stored = kube.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    return {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": stored["metadata"]}


def reads(kube: FakeKube) -> list[str]:
    return [a.name for a in kube.actions if a.resource == "configmaps" and a.verb == "get"]


def maps_on(kube: FakeKube, kicked: list[tuple[str, str]] | None = None) -> ReferencedConfigMaps[Any]:
    return ReferencedConfigMaps(
        kube, lambda ns, name: (kicked if kicked is not None else []).append((ns, name)), webserver_summary()
    )


def test_the_watch_is_of_metadata_only():
    watch = maps_on(FakeKube()).watch()
    assert (watch.group, watch.version, watch.plural, watch.metadata_only) == ("", "v1", "configmaps", True)
    assert not watch.labels  # any ConfigMap, labelled or not
    assert METADATA_ONLY.startswith("application/json;as=PartialObjectMetadata")


async def test_an_unreferenced_configmap_is_never_read_nor_kept_however_large():
    kube = FakeKube()
    kicked: list[tuple[str, str]] = []
    maps = maps_on(kube, kicked)
    maps.refer(NS, "web", ["site"])
    big = {f"k{i}": "x" * 10 for i in range(10_000)}
    for name in ("big", "bigger"):
        for event in ("ADDED", "MODIFIED", None, "DELETED"):
            maps.changed(event, store(kube, name, big))
    assert maps.held() == {} and kicked == [] and reads(kube) == []
    assert maps.readers(NS, "big") == frozenset()


async def test_a_referenced_configmap_is_kept_as_its_digest_and_the_keys_asked_for_only():
    kube = FakeKube()
    maps = maps_on(kube)
    data = {f"k{i}": "x" * 10 for i in range(10_000)}
    store(kube, "big", data)
    maps.refer(NS, "web", ["big"])
    digest, present = await maps.read(NS, "big", frozenset({"k1", "missing"}))
    assert present == frozenset({"k1"})
    assert digest == content_digest({"data": data})
    (held,) = maps.held().values()
    assert held.value == (digest, frozenset({"k1"})) and held.want == frozenset({"k1", "missing"})
    # Asked again, also for fewer keys: no read.
    kube.clear_actions()
    assert await maps.read(NS, "big", frozenset({"k1"})) == (digest, frozenset({"k1"}))
    assert reads(kube) == []
    # A key not asked before: read again, answering for both.
    assert (await maps.read(NS, "big", frozenset({"k2"})))[1] == frozenset({"k1", "k2"})
    assert reads(kube) == ["big"]


@settings(max_examples=examples(50), deadline=None)
@given(
    data=st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=50), max_size=30),
    want=st.frozensets(st.text(min_size=1, max_size=20), max_size=10),
)
def test_what_is_kept_of_any_content_is_its_digest_and_a_subset_of_the_keys_asked(data, want):
    kube = FakeKube()
    maps = maps_on(kube)
    store(kube, "cm", data)
    maps.refer(NS, "web", ["cm"])
    digest, present = asyncio.run(maps.read(NS, "cm", want))
    assert digest == content_digest({"data": data})
    assert present == frozenset(k for k in want if k in data)
    (held,) = maps.held().values()
    assert held.value == (digest, present)


async def test_a_write_wakes_the_readers_and_is_read_again_a_relist_of_the_same_state_is_not():
    kube = FakeKube()
    kicked: list[tuple[str, str]] = []
    maps = maps_on(kube, kicked)
    event = store(kube, "site", {"a": "1"})
    maps.refer(NS, "web", ["site"])
    maps.refer(NS, "api", ["site", "other"])
    first = await maps.read(NS, "site")
    maps.changed(None, event)  # a relist: the state already read
    assert kicked == []
    kube.clear_actions()
    maps.changed("MODIFIED", store(kube, "site", {"a": "2"}))
    assert sorted(kicked) == [(NS, "api"), (NS, "web")]
    assert maps.held() == {}
    assert await maps.read(NS, "site") != first
    assert reads(kube) == ["site"]


async def test_a_missing_configmap_is_none_until_its_arrival_wakes_the_readers():
    kube = FakeKube()
    kicked: list[tuple[str, str]] = []
    maps = maps_on(kube, kicked)
    maps.refer(NS, "web", ["site"])
    assert await maps.read(NS, "site") is None
    assert await maps.read(NS, "site") is None
    assert reads(kube) == ["site"]  # the absence is kept too, until an event
    maps.changed("ADDED", store(kube, "site", {"a": "1"}))
    assert kicked == [(NS, "web")]
    assert await maps.read(NS, "site") is not None


async def test_a_write_during_a_read_is_not_taken_for_the_state_read():
    kube = FakeKube()
    maps = maps_on(kube)
    store(kube, "site", {"a": "1"})
    maps.refer(NS, "web", ["site"])

    async def written_meanwhile(action):
        maps.changed("MODIFIED", store(kube, "site", {"a": "2"}))
        return await kube.serve(action)

    kube.prepend_reactor("get", "configmaps", written_meanwhile, times=1)
    await maps.read(NS, "site")
    assert maps.held() == {}  # the next pass reads again
    digest, _ = await maps.read(NS, "site")
    assert digest == content_digest({"data": {"a": "2"}})


async def test_what_no_object_reads_any_more_is_dropped():
    kube = FakeKube()
    maps = maps_on(kube)
    store(kube, "site", {"a": "1"})
    maps.refer(NS, "web", ["site"])
    maps.refer(NS, "api", ["site"])
    await maps.read(NS, "site")
    maps.refer(NS, "web", [])
    assert len(maps) == 1 and maps.readers(NS, "site") == {"api"}
    maps.refer(NS, "api", [])
    assert len(maps) == 0 and maps.readers(NS, "site") == frozenset()
    assert maps._reads == {} and maps._readers == {} and maps._epoch == {}


async def test_a_read_that_fails_raises_and_keeps_nothing():
    kube = FakeKube()
    maps = maps_on(kube)
    store(kube, "site", {"a": "1"})
    maps.refer(NS, "web", ["site"])
    kube.prepend_reactor("get", "configmaps", fail(403, "Forbidden", "no"), times=1)
    with pytest.raises(ApiError):
        await maps.read(NS, "site")
    assert maps.held() == {}
    assert await maps.read(NS, "site") is not None


async def test_at_most_reads_at_once_configmaps_are_read_at_a_time():
    kube = FakeKube()
    maps = ReferencedConfigMaps(kube, lambda ns, name: None, webserver_summary(), reads_at_once=2)
    names = [f"cm{i}" for i in range(6)]
    for name in names:
        store(kube, name, {"a": name})
    maps.refer(NS, "web", names)
    running, most = 0, 0

    async def slow(action):
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        running -= 1
        return await kube.serve(action)

    kube.prepend_reactor("get", "configmaps", slow)
    await asyncio.gather(*(maps.read(NS, name) for name in names))
    assert most == 2 and len(maps) == 6


def test_a_configmaps_digest_is_computed_once_per_state_whatever_keys_are_asked(monkeypatch):
    """WebServers asking for different keys of one large ConfigMap read it again, but hash its
    content once per UID and resourceVersion; a new state is hashed again."""
    hashed = []

    def counting(body):
        hashed.append(body["metadata"]["resourceVersion"])
        return f"digest-{body['metadata']['resourceVersion']}"

    monkeypatch.setattr(webserver_reconciler, "content_digest", counting)
    summarize = ConfigMaps(None, lambda ns, name: None).summarize  # type: ignore[arg-type]
    body = {"metadata": {"uid": "u1", "resourceVersion": "7"}, "data": {"a": "1", "b": "2"}}
    assert summarize(body, frozenset({"a"})) == ("digest-7", frozenset({"a"}))
    assert summarize(body, frozenset({"b", "c"})) == ("digest-7", frozenset({"b"}))
    assert hashed == ["7"]
    edited = {**body, "metadata": {"uid": "u1", "resourceVersion": "8"}}
    assert summarize(edited, frozenset({"a"})) == ("digest-8", frozenset({"a"}))
    assert hashed == ["7", "8"]
