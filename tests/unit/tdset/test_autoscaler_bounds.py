"""Per-entry minReplicas/maxReplicas for an HPA on the target.

The pure parts first (which bounds an instant asks for, what the HPA is held to, the patches and
the checks), then passes on a fake API server as in test_reconcile_actions.py: the exact HPA
writes, Events and status of a window that sets a floor and a cap, its end, a hand edit, and the
give-back when the TDSet is gone.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from operators.tdset import desired, schedule
from operators.tdset.description import DESCRIPTION
from operators.tdset.reconciler import VALIDATOR, TDSetReconciler
from shared.api import conditions
from shared.api.clock import Clock
from shared.api.errors import TerminalError
from shared.client.kube import namespaced
from tests.framework.fakekube import FakeKube
from tests.framework.passes import OnePass

UTC = datetime.UTC
NS = "ns"
TDS = "schedule.rs/v1"
TDS_PATH = namespaced(NS, "tdsets", "shop", TDS)
HPA_PATH = namespaced(NS, "horizontalpodautoscalers", "shop", "autoscaling/v2")
# Half past ten (UTC): inside the window 10-11 of the TDSets below, far from its boundaries.
NOW = datetime.datetime.now(UTC).replace(hour=10, minute=30, second=0, microsecond=0)


def spec(**extra: Any) -> dict[str, Any]:
    """Window 10-11 (5 replicas) named peak, default 1."""
    body: dict[str, Any] = {
        "container": {"image": "nginx:1.27", "port": 80},
        "schedulingConfig": [{"name": "peak", "startTime": 10, "endTime": 11, "replica": 5}],
        "defaultReplica": 1,
    }
    body.update(extra)
    return body


def window(**bounds: int) -> dict[str, Any]:
    return {"name": "peak", "startTime": 10, "endTime": 11, "replica": 5, **bounds}


def at(hour: int, minute: int = 30) -> datetime.datetime:
    return NOW.replace(hour=hour, minute=minute)


# --- which bounds an instant asks for (schedule) ---


def test_a_window_s_own_bounds_decide_while_it_does_and_the_spec_s_fill_what_it_leaves_unset():
    s = spec(schedulingConfig=[window(minReplicas=4)], minReplicas=2, maxReplicas=8)
    inside = schedule.decide(s, at(10)).decided
    assert inside is not None
    assert inside.bounds == schedule.Bounds(4, 8, "window/peak", "spec")
    outside = schedule.decide(s, at(12)).decided
    assert outside is not None
    assert outside.bounds == schedule.Bounds(2, 8, "spec", "spec")


def test_without_bounds_nothing_changes():
    decided = schedule.decide(spec(), at(10)).decided
    assert decided is not None and decided.bounds == schedule.Bounds()


def test_an_override_s_bounds_win_over_the_window_s():
    s = spec(
        schedulingConfig=[window(minReplicas=4, maxReplicas=6)],
        overrides=[
            {
                "name": "sale",
                "start": "2000-01-01T00:00:00Z",
                "end": "2999-01-01T00:00:00Z",
                "replicas": 3,
                "maxReplicas": 30,
            }
        ],
    )
    decided = schedule.decide(s, at(10)).decided
    assert decided is not None and decided.layer == "override"
    # The override sets only a cap: its floor is its replicas (no spec.minReplicas), not the window's.
    assert decided.bounds == schedule.Bounds(None, 30, None, "override/sale")


def test_a_window_differing_only_in_its_bounds_is_a_transition():
    s = spec(
        schedulingConfig=[
            {"startTime": 10, "endTime": 11, "replica": 5, "maxReplicas": 6},
            {"startTime": 11, "endTime": 12, "replica": 5, "maxReplicas": 9},
        ]
    )
    decision = schedule.decide(s, at(10))
    assert decision.next_transition == at(11, 0)
    assert decision.upcoming[0].decided.bounds.max_replicas == 9


def test_pre_warm_raises_the_floor_early_and_keeps_the_cap_in_force():
    s = spec(
        schedulingConfig=[window(minReplicas=7, maxReplicas=12)],
        leadTime="30m",
        maxReplicas=4,
        defaultReplica=1,
    )
    decided = schedule.decide(s, at(9, 45)).decided
    assert decided is not None and decided.layer == "leadTime"
    assert decided.bounds == schedule.Bounds(7, 4, "leadTime/peak", "spec")


# --- what the HPA is held to (desired) ---


def view(min_replicas: int = 2, max_replicas: int = 20, **annotations: str) -> desired.AutoscalerView:
    return desired.autoscaler_view(
        {
            "metadata": {"name": "shop", "namespace": NS, "uid": "h1", "annotations": annotations},
            "spec": {
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"},
            },
        }
    )


def test_held_bounds_take_the_entry_s_floor_and_cap():
    held = desired.autoscaler_bounds(5, schedule.Bounds(4, 6, "window/peak", "window/peak"), view())
    assert (held.floor, held.cap, held.clamp) == (4, 6, None)
    assert held.status(view()) == {
        "minReplicas": 4,
        "maxReplicas": 6,
        "minFrom": "window/peak",
        "maxFrom": "window/peak",
    }


def test_without_bounds_the_floor_is_the_schedule_s_and_the_cap_the_hpa_s_own():
    held = desired.autoscaler_bounds(5, schedule.Bounds(), view())
    assert (held.floor, held.cap, held.floor_from, held.cap_from) == (5, None, "schedule", "autoscaler")
    assert held.status(view())["maxReplicas"] == 20


def test_a_scheduled_floor_above_the_cap_is_clamped_to_it_and_reported():
    held = desired.autoscaler_bounds(9, schedule.Bounds(None, 6, None, "window/peak"), view())
    assert (held.floor, held.cap) == (6, 6)
    assert held.clamp is not None and "maxReplicas 6" in held.clamp


def test_the_cap_is_remembered_once_and_given_back_when_it_ends_or_the_tdset_goes():
    capped = desired.floor_patch(view(), "t1", 4, 6)
    assert capped == {
        "metadata": {
            "uid": "h1",
            "annotations": {
                desired.FLOOR_OWNER: "t1",
                desired.ORIGINAL_MIN: "2",
                desired.ORIGINAL_MAX: "20",
            },
        },
        "spec": {"minReplicas": 4, "maxReplicas": 6},
    }
    held = view(4, 6, **capped["metadata"]["annotations"])
    assert (held.original_min, held.original_max) == (2, 20)
    # Still capped (another window): the user's 20 stays remembered, not the 6 of ours.
    assert desired.floor_patch(held, "t1", 5, 8)["metadata"]["annotations"][desired.ORIGINAL_MAX] == "20"
    # The cap ends, the TDSet stays: maxReplicas back, its memory dropped, the floor kept.
    assert desired.floor_patch(held, "t1", 1) == {
        "metadata": {
            "uid": "h1",
            "annotations": {desired.FLOOR_OWNER: "t1", desired.ORIGINAL_MIN: "2", desired.ORIGINAL_MAX: None},
        },
        "spec": {"minReplicas": 1, "maxReplicas": 20},
    }
    assert desired.restore_patch(held)["spec"] == {"minReplicas": 2, "maxReplicas": 20}


def test_bounds_are_current_only_when_nothing_is_left_to_write_or_give_back():
    assert desired.bounds_current(view(4, 6), "t1", 4, 6)  # the user's own values already
    capped = view(4, 6, **{desired.FLOOR_OWNER: "t1", desired.ORIGINAL_MIN: "2", desired.ORIGINAL_MAX: "20"})
    assert desired.bounds_current(capped, "t1", 4, 6)
    assert not desired.bounds_current(capped, "t1", 4, None)  # the cap ended: 20 goes back
    edited = view(4, 15, **{desired.FLOOR_OWNER: "t1", desired.ORIGINAL_MIN: "2", desired.ORIGINAL_MAX: "20"})
    assert not desired.bounds_current(edited, "t1", 4, 6)  # a hand edit during the cap
    assert not desired.bounds_current(capped, "other", 4, 6)


# --- the same checks as the CEL rules ---


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        (
            {"schedulingConfig": [window(minReplicas=7, maxReplicas=6)]},
            "spec.schedulingConfig[0].maxReplicas",
        ),
        ({"minReplicas": 7, "maxReplicas": 6}, "spec.maxReplicas"),
        (
            {"schedulingConfig": [window(minReplicas=7)], "maxReplicas": 6},
            "spec.schedulingConfig[0].minReplicas",
        ),
        (
            {"schedulingConfig": [window(maxReplicas=3)], "minReplicas": 4},
            "spec.schedulingConfig[0].maxReplicas",
        ),
        (
            {
                "overrides": [
                    {
                        "name": "sale",
                        "start": "2026-11-27T00:00",
                        "end": "2026-11-28T00:00",
                        "replicas": 3,
                        "minReplicas": 9,
                        "maxReplicas": 2,
                    }
                ]
            },
            "spec.overrides[0].maxReplicas",
        ),
    ],
)
def test_a_floor_above_a_cap_is_an_invalid_spec_at_the_field(extra, path):
    assert [e.path for e in schedule.check(spec(**extra))] == [path]


def test_bounds_that_fit_pass_and_zero_is_refused_by_the_schema():
    fits = spec(schedulingConfig=[window(minReplicas=4, maxReplicas=6)], minReplicas=7, maxReplicas=9)
    assert schedule.check(fits) == []  # the window's own pair overrides both of the spec's
    assert [e.path for e in VALIDATOR.errors(spec(maxReplicas=0))] == ["spec.maxReplicas"]


BOUND = st.one_of(st.none(), st.integers(1, 12))


@given(
    top=st.tuples(BOUND, BOUND),
    own=st.tuples(BOUND, BOUND),
    replicas=st.integers(0, 15),
    hpa_max=st.integers(1, 12),
)
def test_every_spec_the_checks_pass_holds_an_hpa_to_a_valid_floor_and_cap(top, own, replicas, hpa_max):
    """Whatever the entry's and the spec's bounds and the HPA's own maxReplicas: a spec without
    errors gives ``1 <= minReplicas <= maxReplicas`` (the API server's rule), in one patch."""

    def named(pair: tuple[int | None, int | None]) -> dict[str, int]:
        return {k: v for k, v in zip(("minReplicas", "maxReplicas"), pair, strict=True) if v is not None}

    s = spec(schedulingConfig=[{**window(**named(own)), "replica": replicas}], **named(top))
    if schedule.check(s):
        return
    decided = schedule.decide(s, at(10)).decided
    assert decided is not None
    current = view(2, hpa_max)
    held = desired.autoscaler_bounds(replicas, decided.bounds, current)
    patch = desired.floor_patch(current, "t1", held.floor, held.cap)["spec"]
    assert 1 <= patch["minReplicas"] <= patch.get("maxReplicas", hpa_max)


# --- passes on a fake API server ---


def hpa(min_replicas: int = 2, max_replicas: int = 20) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "shop", "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"},
            "minReplicas": min_replicas,
            "maxReplicas": max_replicas,
        },
    }


class HPAPass(OnePass):
    """The TDSet operator on one FakeKube, one pass at a time, at ``NOW`` (``at`` moves
    its clock), the HPA in its watch cache."""

    def __init__(self, kube: FakeKube) -> None:
        super().__init__(
            DESCRIPTION, TDSetReconciler, kube, TDS_PATH, Clock(NOW - datetime.datetime.now(UTC))
        )
        assert isinstance(self.reconciler, TDSetReconciler)
        self.tds = self.reconciler
        self.see_hpa()

    def see_hpa(self) -> dict[str, Any]:
        """The HPA as the watch would deliver it to the cache (sweeps are left to the tests)."""
        obj = self.kube.object(HPA_PATH)
        assert obj is not None
        view = desired.autoscaler_view(obj)
        self.tds.autoscalers[(view.namespace, view.name)] = view
        return obj

    def at(self, when: datetime.datetime) -> None:
        self.tds.clock = Clock(when - datetime.datetime.now(UTC))


def capped_tdset() -> dict[str, Any]:
    """Window 10-11 (5 replicas) holding the HPA to 4..6, default 1."""
    return {
        "apiVersion": TDS,
        "kind": "TDSet",
        "metadata": {"name": "shop", "namespace": NS},
        "spec": spec(schedulingConfig=[window(minReplicas=4, maxReplicas=6)]),
    }


def hpa_spec(kube: FakeKube) -> tuple[int, int]:
    obj = kube.object(HPA_PATH)
    assert obj is not None
    return obj["spec"]["minReplicas"], obj["spec"]["maxReplicas"]


def test_a_window_holds_the_hpa_to_its_floor_and_cap_and_gives_the_cap_back_at_its_end():
    kube = FakeKube(capped_tdset(), hpa())
    p = HPAPass(kube)
    p.run()
    assert hpa_spec(kube) == (4, 6)
    assert [(reason, message) for _, reason, message in p.events] == [
        ("CreatedDeployment", "Created deployment shop with 4 replicas: window 0 (10:00-11:00 UTC)"),
        (
            "SetAutoscalerFloor",
            "Set minReplicas of HPA shop from 2 to 4, maxReplicas from 20 to 6: window 0 (10:00-11:00 UTC)",
        ),
    ]
    status = kube.object(TDS_PATH)["status"]
    assert status["autoscalerBounds"] == {
        "minReplicas": 4,
        "maxReplicas": 6,
        "minFrom": "window/peak",
        "maxFrom": "window/peak",
    }

    p.see_hpa()
    p.at(at(11))  # the window has ended: the default's floor (1), the HPA's own cap back
    p.run()
    assert hpa_spec(kube) == (1, 20)
    annotations = p.see_hpa()["metadata"]["annotations"]
    assert desired.ORIGINAL_MAX not in annotations and annotations[desired.ORIGINAL_MIN] == "2"
    assert kube.object(TDS_PATH)["status"]["autoscalerBounds"] == {
        "minReplicas": 1,
        "maxReplicas": 20,
        "minFrom": "schedule",
        "maxFrom": "autoscaler",
    }


def test_a_hand_edit_of_maxreplicas_during_the_window_is_set_back_with_a_warning():
    kube = FakeKube(capped_tdset(), hpa())
    p = HPAPass(kube)
    p.run()
    p.see_hpa()
    p.run()  # the pass the HPA's event wakes: its own write seen, nothing to do
    assert kube.writes() == []
    asyncio.run(kube.merge_patch(HPA_PATH, {"spec": {"maxReplicas": 15}}))  # kubectl edit hpa
    p.see_hpa()
    p.run()
    assert hpa_spec(kube) == (4, 6)
    assert [(t, reason) for t, reason, _ in p.events] == [("Warning", "RevertedAutoscalerEdit")]
    assert "Its own maxReplicas (20) comes back" in p.events[0][2]
    # The user's own value from before the window is still the one to give back.
    assert p.see_hpa()["metadata"]["annotations"][desired.ORIGINAL_MAX] == "20"


def test_outside_a_cap_a_hand_edit_of_maxreplicas_is_the_user_s_and_left_alone():
    kube = FakeKube(capped_tdset(), hpa())
    p = HPAPass(kube)
    p.at(at(12))
    p.run()
    p.see_hpa()
    asyncio.run(kube.merge_patch(HPA_PATH, {"spec": {"maxReplicas": 15}}))
    p.see_hpa()
    p.run()
    assert hpa_spec(kube) == (1, 15)
    assert [reason for _, reason, _ in p.events] == []


def test_the_tdset_gone_gives_the_hpa_its_own_floor_and_cap_back():
    kube = FakeKube(capped_tdset(), hpa())
    p = HPAPass(kube)
    p.run()
    p.see_hpa()
    kube.remove(TDS_PATH)
    p.tds.floor_sweeps._live = set  # no live TDSet any more (the controller's store)
    p.tds.floor_sweeps._active = lambda: True  # listed, leading

    async def sweep() -> None:
        p.tds.floor_sweeps.request()
        await asyncio.wait_for(p.tds.floor_sweeps.wait(), timeout=60)

    asyncio.run(sweep())
    assert hpa_spec(kube) == (2, 20)
    annotations = kube.object(HPA_PATH)["metadata"].get("annotations") or {}
    assert not {desired.FLOOR_OWNER, desired.ORIGINAL_MIN, desired.ORIGINAL_MAX} & set(annotations)


def test_a_floor_above_a_cap_stored_before_the_rules_is_degraded_and_the_hpa_left_alone():
    body = capped_tdset()
    body["spec"]["schedulingConfig"] = [window(minReplicas=7, maxReplicas=6)]
    kube = FakeKube(body, hpa())
    p = HPAPass(kube)
    with pytest.raises(TerminalError):
        p.run()
    assert kube.object(HPA_PATH)["spec"] == hpa()["spec"]
    degraded = conditions.get(kube.object(TDS_PATH)["status"]["conditions"], "Degraded")
    assert degraded is not None and degraded["reason"] == "InvalidSpec"
    assert "spec.schedulingConfig[0].maxReplicas" in degraded["message"]
    assert [(t, reason) for t, reason, _ in p.events] == [("Warning", "InvalidSpec")]
