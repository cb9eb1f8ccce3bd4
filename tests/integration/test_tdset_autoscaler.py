"""An HPA's floor and cap per calendar entry on the real API server.

A window, an override or the spec may set the HPA's ``minReplicas`` and ``maxReplicas`` while it
decides; the HPA's own values come back when it stops deciding, when the TDSet is deleted (also
while the operator is down) and a hand edit of the cap during the window is set back. Each test
runs its own operator restricted to the test's namespace (``start_tdset_operator``), its clock
shifted where a boundary is crossed, as in test_tdset_calendar.py.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.tdset import desired
from tests.framework.tdsets import (
    GROUP,
    PLURAL,
    VERSION,
    co,
    create,
    get,
    hpa,
    next_boundary,
    replicas_become,
    shifted_now,
    steady,
    wait_event,
)
from tests.framework.waits import wait_for

UTC = datetime.UTC


def window_until(end: datetime.datetime, **extra: Any) -> dict[str, Any]:
    """A window named peak from two hours before ``end`` (UTC) up to ``end``: open now."""
    start = end - datetime.timedelta(hours=2)
    return {
        "name": "peak",
        "startTime": start.hour,
        "startMinute": start.minute,
        "endTime": end.hour,
        "endMinute": end.minute,
        "replica": 3,
        **extra,
    }


class HPA:
    """The test's HorizontalPodAutoscaler ``name`` (made on Deployment ``target``, 1..10)."""

    def __init__(self, cluster: Any, namespace: str, name: str = "shop-hpa", target: str = "shop") -> None:
        self.api = client.AutoscalingV2Api(cluster.api)
        self.namespace, self.name = namespace, name
        self.api.create_namespaced_horizontal_pod_autoscaler(namespace, hpa(name, target, 1, 10))

    def read(self) -> Any:
        return self.api.read_namespaced_horizontal_pod_autoscaler(self.name, self.namespace)

    def bounds(self) -> tuple[int, int]:
        spec = self.read().spec
        return spec.min_replicas, spec.max_replicas

    def annotations(self) -> dict[str, str]:
        return self.read().metadata.annotations or {}

    def becomes(self, low: int, high: int, what: str) -> None:
        wait_for(lambda: self.bounds() == (low, high), 60, f"HPA {low}..{high}: {what}")


def bounds_in_status(cluster: Any, namespace: str, name: str, expected: dict[str, Any]) -> None:
    wait_for(
        lambda: (get(cluster, namespace, name).get("status") or {}).get("autoscalerBounds") == expected,
        60,
        f"status.autoscalerBounds {expected}",
    )


def test_a_window_holds_the_hpa_to_its_floor_and_cap_and_gives_both_back(
    cluster, namespace, start_tdset_operator
):
    op = start_tdset_operator(datetime.datetime.now(UTC).replace(second=20, microsecond=0))
    boundary = next_boundary(op)
    autoscaler = HPA(cluster, namespace)
    create(
        cluster,
        namespace,
        "shop",
        steady(2, schedulingConfig=[window_until(boundary, minReplicas=4, maxReplicas=6)]),
    )

    autoscaler.becomes(4, 6, "the window's floor and cap")
    assert shifted_now(op) < boundary, "the machine was too slow to see the window before its end"
    annotations = autoscaler.annotations()
    assert (annotations[desired.ORIGINAL_MIN], annotations[desired.ORIGINAL_MAX]) == ("1", "10")
    bounds_in_status(
        cluster,
        namespace,
        "shop",
        {"minReplicas": 4, "maxReplicas": 6, "minFrom": "window/peak", "maxFrom": "window/peak"},
    )
    wait_event(cluster, namespace, "shop", "SetAutoscalerFloor", "maxReplicas from 10 to 6")

    # The window ends: the default's floor (2, the scheduled replicas) and the HPA's own cap.
    autoscaler.becomes(2, 10, "the cap given back when the window ends")
    assert shifted_now(op) >= boundary
    assert desired.ORIGINAL_MAX not in autoscaler.annotations()
    bounds_in_status(
        cluster,
        namespace,
        "shop",
        {"minReplicas": 2, "maxReplicas": 10, "minFrom": "schedule", "maxFrom": "autoscaler"},
    )

    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "shop")
    autoscaler.becomes(1, 10, "the HPA's own minReplicas back with the TDSet deleted")
    wait_for(
        lambda: not {desired.FLOOR_OWNER, desired.ORIGINAL_MIN} & set(autoscaler.annotations()),
        60,
        "the TDSet's annotations dropped",
    )


def test_a_hand_edit_of_the_cap_during_the_window_is_set_back_and_a_deleted_hpa_hands_back_the_replicas(
    cluster, namespace, start_tdset_operator
):
    start_tdset_operator()
    later = datetime.datetime.now(UTC) + datetime.timedelta(hours=1)
    autoscaler = HPA(cluster, namespace)
    create(
        cluster,
        namespace,
        "shop",
        steady(2, schedulingConfig=[window_until(later, minReplicas=4, maxReplicas=6)]),
    )
    autoscaler.becomes(4, 6, "the window's floor and cap")

    # The TDSet's window decides while it is open: the edit is set back, with a Warning; the
    # user's own 10 (from before the window) is still what comes back at its end.
    autoscaler.api.patch_namespaced_horizontal_pod_autoscaler(
        autoscaler.name, namespace, {"spec": {"maxReplicas": 15}}
    )
    event = wait_event(cluster, namespace, "shop", "RevertedAutoscalerEdit", "maxReplicas set to 15")
    assert event.type == "Warning"
    autoscaler.becomes(4, 6, "the cap set back")
    assert autoscaler.annotations()[desired.ORIGINAL_MAX] == "10"

    # Without its HPA the TDSet scales the Deployment itself, to the window's replicas.
    autoscaler.api.delete_namespaced_horizontal_pod_autoscaler(autoscaler.name, namespace)
    replicas_become(cluster, namespace, "shop", 3, "the window's replicas with no HPA")
    bounds_in_status(cluster, namespace, "shop", None)


def test_the_spec_s_floor_and_cap_go_back_when_the_tdset_was_deleted_while_the_operator_was_down(
    cluster, namespace, start_tdset_operator
):
    first = start_tdset_operator()
    apps = client.AppsV1Api(cluster.api)
    labels = {"app": "app"}
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "app"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
                },
            },
        },
    )
    autoscaler = HPA(cluster, namespace, "app-hpa", "app")
    create(
        cluster,
        namespace,
        "gone",
        {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app"},
            "schedulingConfig": [],
            "defaultReplica": 2,
            "minReplicas": 3,
            "maxReplicas": 5,
        },
    )
    autoscaler.becomes(3, 5, "the spec's floor and cap")
    bounds_in_status(
        cluster, namespace, "gone", {"minReplicas": 3, "maxReplicas": 5, "minFrom": "spec", "maxFrom": "spec"}
    )
    first.stop()

    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "gone")
    wait_for(
        lambda: not co(cluster).list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)["items"],
        60,
        "the TDSet deleted while no operator runs",
    )
    assert autoscaler.bounds() == (3, 5)
    start_tdset_operator()
    autoscaler.becomes(1, 10, "the restarted operator gives the HPA its own floor and cap back")
    wait_for(
        lambda: (
            not {desired.FLOOR_OWNER, desired.ORIGINAL_MIN, desired.ORIGINAL_MAX}
            & set(autoscaler.annotations())
        ),
        60,
        "the TDSet's annotations dropped",
    )


WINDOW = {"startTime": 9, "endTime": 17, "replica": 3}
OVERRIDE = {"name": "sale", "start": "2026-11-27T00:00", "end": "2026-11-28T00:00", "replicas": 3}


@pytest.mark.parametrize(
    ("patch", "fragments"),
    [
        (
            {"schedulingConfig": [{**WINDOW, "minReplicas": 7, "maxReplicas": 6}]},
            ["spec.schedulingConfig", "a window's maxReplicas must be at least its minReplicas"],
        ),
        (
            {"overrides": [{**OVERRIDE, "minReplicas": 7, "maxReplicas": 6}]},
            ["spec.overrides[0].maxReplicas", "maxReplicas must be at least minReplicas"],
        ),
        (
            {"minReplicas": 7, "maxReplicas": 6},
            ["spec.maxReplicas", "maxReplicas must be at least minReplicas"],
        ),
        (
            {"schedulingConfig": [{**WINDOW, "minReplicas": 7}], "maxReplicas": 6},
            ["spec.schedulingConfig", "minReplicas must not exceed spec.maxReplicas"],
        ),
        (
            {"overrides": [{**OVERRIDE, "maxReplicas": 3}], "minReplicas": 4},
            ["spec.overrides", "maxReplicas must be at least spec.minReplicas"],
        ),
        ({"maxReplicas": 0}, ["spec.maxReplicas", "should be greater than or equal to 1"]),
    ],
)
def test_a_floor_above_a_cap_is_rejected_at_admission_with_the_field(cluster, namespace, patch, fragments):
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "bad", {**steady(1), **patch})
    assert err.value.status == 422, err.value.body
    for fragment in fragments:
        assert fragment in err.value.body


def test_bounds_that_fit_are_admitted(cluster, namespace):
    """A window's own pair overrides both of the spec's, so 4..6 under a spec of 7..9 is valid."""
    create(
        cluster,
        namespace,
        "fits",
        {
            **steady(1),
            "schedulingConfig": [{**WINDOW, "minReplicas": 4, "maxReplicas": 6}],
            "minReplicas": 7,
            "maxReplicas": 9,
        },
    )
