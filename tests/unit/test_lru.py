"""The size-bounded cache (``shared.api.lru``) and the caches keyed by what tenants write."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.tdset.api import DISCOVERY_ENTRIES, ScaleTargets
from shared.api.lru import LRU
from tests.framework.fakekube import FakeKube
from tests.framework.properties import examples


@settings(max_examples=examples(200))
@given(
    size=st.integers(min_value=1, max_value=8),
    ops=st.lists(st.tuples(st.sampled_from(["get", "put", "pop"]), st.integers(0, 20)), max_size=100),
)
def test_an_lru_never_holds_more_than_its_size_and_drops_the_least_recently_used(size, ops):
    lru: LRU[int, int] = LRU(size)
    model: list[int] = []  # keys, least recently used first
    for op, key in ops:
        if op == "put":
            lru.put(key, key)
            if key in model:
                model.remove(key)
            model.append(key)
            del model[: max(0, len(model) - size)]
        elif op == "get":
            assert lru.get(key) == (key if key in model else None)
            if key in model:
                model.remove(key)
                model.append(key)
        else:
            assert lru.pop(key) == (key if key in model else None)
            if key in model:
                model.remove(key)
        assert len(lru) == len(model) <= size
        assert all(k in lru for k in model)


def test_an_lru_has_a_size():
    with pytest.raises(ValueError):
        LRU(0)


def test_discovery_by_tenant_chosen_api_versions_is_bounded():
    """scaleTargetRef.apiVersion is whatever a TDSet's author writes: the discovery cache keeps
    at most DISCOVERY_ENTRIES group-versions however many are asked for (most not served)."""
    kube = FakeKube()
    targets = ScaleTargets(kube)

    async def ask_many() -> None:
        for i in range(DISCOVERY_ENTRIES * 3):
            assert await targets.discover(f"g{i}.example.com/v1") is None
        assert await targets.discover("apps/v1") is not None

    asyncio.run(ask_many())
    assert len(targets._discovery) == DISCOVERY_ENTRIES
    assert "apps/v1" in targets._discovery and "g0.example.com/v1" not in targets._discovery
