"""The TDSet operator against the real control plane, with a controllable clock.

Each test runs its own operator process restricted to the test's namespace, so it can be
started "at" another time of day (``OPERATOR_CLOCK_OFFSET``) without a second operator acting
on the same TDSets. Expectations are computed with the same pure schedule function the unit
tests check against an oracle, at the instant they are checked.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.tdset import schedule
from shared.api.conditions import rfc3339
from tests.framework.cluster import REPO
from tests.framework.tdsets import (
    BOUNDARY_MARGIN,
    GROUP,
    PLURAL,
    VERSION,
    co,
    condition,
    create,
    deployment,
    events,
    get,
    hpa,
    next_boundary,
    patch_spec,
    replicas_become,
    scale_deployment,
    shifted_now,
    steady,
    table,
    wait_event,
)
from tests.framework.waits import wait_for

UTC = datetime.UTC


def test_tutorial_example_gets_the_scheduled_replicas_and_is_garbage_collected(
    cluster, namespace, start_tdset_operator
):
    start_tdset_operator()
    example = yaml.safe_load((REPO / "examples" / "tdset.yaml").read_text())
    name = example["metadata"]["name"]
    co(cluster).create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, example)

    def scheduled() -> dict[str, Any] | None:
        # Computed at the instant of the check: the test may run across a boundary.
        decision = schedule.decide(example["spec"], datetime.datetime.now(UTC))
        tds, dep = get(cluster, namespace, name), deployment(cluster, namespace, name)
        st = tds.get("status") or {}
        want_window = decision.window.index if decision.window is not None else None
        if (
            dep.spec.replicas == decision.replicas
            and st.get("desiredReplicas") == decision.replicas
            and st.get("activeWindow") == want_window
            and st.get("nextTransitionTime") == rfc3339(decision.next_transition)
            and st.get("readyReplicas") == decision.replicas
            and condition(tds, "Available").get("status") == "True"
            and condition(tds, "Progressing").get("reason") == "DeploymentReady"
        ):
            return tds
        return None

    tds = wait_for(scheduled, 120, "Deployment and status at the scheduled count, pods ready")
    assert tds["status"]["observedGeneration"] == tds["metadata"]["generation"]
    assert condition(tds, "Degraded")["status"] == "False"
    dep = deployment(cluster, namespace, name)
    (owner,) = dep.metadata.owner_references
    assert (owner.kind, owner.name, owner.controller) == ("TDSet", name, True)
    assert dep.metadata.labels["app.kubernetes.io/name"] == "tdset"
    assert dep.metadata.labels["app.kubernetes.io/instance"] == name
    assert dep.spec.template.spec.containers[0].image == example["spec"]["container"]["image"]
    wait_event(cluster, namespace, name, "CreatedDeployment")

    columns = [c["name"] for c in table(cluster, namespace)["columnDefinitions"]]
    assert columns[:1] == ["Name"] and {"Desired", "Ready", "Window", "Next"} <= set(columns)

    co(cluster).delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    wait_for(
        lambda: not client.AppsV1Api(cluster.api).list_namespaced_deployment(namespace).items,
        120,
        "Deployment garbage-collected with its TDSet",
    )


BERLIN = "Europe/Berlin"


@pytest.mark.parametrize(
    "case",
    [
        # An ordinary boundary, at a minute chosen when the TDSet is created.
        ("UTC", None, None),
        # Spring forward in Berlin: 02:00 CET jumps to 03:00 CEST at 01:00Z. A window from 02:30
        # starts when the clock jumps, not an hour later.
        (
            BERLIN,
            datetime.datetime(2026, 3, 29, 1, 0, tzinfo=UTC),
            {"startTime": 2, "startMinute": 30, "endTime": 4, "replica": 4},
        ),
    ],
    ids=["utc", "berlin-spring-forward"],
)
def test_deployment_flips_at_the_boundary_not_before(cluster, namespace, start_tdset_operator, case):
    zone, boundary, window = case
    if boundary is None:
        op = start_tdset_operator(datetime.datetime.now(UTC).replace(second=20, microsecond=0))
        boundary = next_boundary(op)
        end = (boundary.hour + 8) % 24
        window = {"startTime": boundary.hour, "startMinute": boundary.minute, "endTime": end, "replica": 4}
    else:
        # Up well before the boundary, however busy the machine (see BOUNDARY_MARGIN).
        op = start_tdset_operator(boundary - BOUNDARY_MARGIN - datetime.timedelta(seconds=15))
    spec = {**steady(2, timeZone=zone), "schedulingConfig": [window], "intervalMint": 60}
    created_at = shifted_now(op)
    assert created_at < boundary - datetime.timedelta(seconds=3), "operator took too long to start"
    create(cluster, namespace, "flip", spec)

    # Before the boundary: the default count, and the boundary announced in status.
    def before() -> dict[str, Any] | None:
        tds = get(cluster, namespace, "flip")
        st = tds.get("status") or {}
        seen = deployment(cluster, namespace, "flip").spec.replicas
        if st.get("nextTransitionTime") == rfc3339(boundary) and seen == 2 and shifted_now(op) < boundary:
            return tds
        return None

    tds = wait_for(before, 30, "default replicas and nextTransitionTime = boundary, before the boundary")
    assert tds["status"].get("activeWindow") is None  # null is stored as absent

    replicas_become(cluster, namespace, "flip", 4, "the window's replicas after the boundary")
    flipped_at = shifted_now(op)
    assert flipped_at >= boundary
    after = schedule.decide(spec, boundary)
    tds = wait_for(
        lambda: (t := get(cluster, namespace, "flip"))["status"].get("activeWindow") == 0 and t,
        30,
        "status shows the active window",
    )
    assert tds["status"]["nextTransitionTime"] == rfc3339(after.next_transition)
    event = wait_event(cluster, namespace, "flip", "ScaledDeployment", "from 2 to 4", "window 0")
    assert event.type == "Normal"
    # Informational (timing is measured by tools/bench/tdset_boundary.py, not asserted here).
    print(f"{zone}: boundary {boundary.isoformat()}, Deployment seen at 4 after {flipped_at - boundary}")


def test_manual_scale_is_reverted_with_an_event(cluster, namespace, start_tdset_operator):
    start_tdset_operator()
    create(cluster, namespace, "rev", steady(3))
    replicas_become(cluster, namespace, "rev", 3, "scheduled replicas")
    scale_deployment(cluster, namespace, "rev", 8)
    event = wait_event(cluster, namespace, "rev", "RevertedManualScale", "scaled to 8", "scaled back to 3")
    assert event.type == "Normal"
    replicas_become(cluster, namespace, "rev", 3, "manual scale reverted")


def test_image_port_and_service_changes_are_applied(cluster, namespace, start_tdset_operator):
    start_tdset_operator()
    core = client.CoreV1Api(cluster.api)
    create(cluster, namespace, "web", steady(1))
    replicas_become(cluster, namespace, "web", 1, "Deployment created")

    patch_spec(cluster, namespace, "web", {"container": {"image": "nginx:1.28", "port": 80}})
    wait_for(
        lambda: deployment(cluster, namespace, "web").spec.template.spec.containers[0].image == "nginx:1.28",
        60,
        "image change applied to the pod template",
    )
    wait_event(cluster, namespace, "web", "UpdatedDeployment", "nginx:1.28")

    patch_spec(cluster, namespace, "web", {"service": {"port": 8000}})
    svc = wait_for(lambda: core.read_namespaced_service("web", namespace), 60, "Service created")
    # The container's named port: during a port change each pod is reached on its own port.
    assert (svc.spec.ports[0].port, svc.spec.ports[0].target_port) == (8000, "http")
    assert svc.metadata.owner_references[0].kind == "TDSet"
    assert svc.spec.selector == deployment(cluster, namespace, "web").spec.selector.match_labels
    wait_event(cluster, namespace, "web", "CreatedService")

    patch_spec(cluster, namespace, "web", {"container": {"image": "nginx:1.28", "port": 8080}})

    def port_followed() -> bool:
        ports = deployment(cluster, namespace, "web").spec.template.spec.containers[0].ports
        return (ports[0].container_port, ports[0].name) == (8080, "http") and (
            core.read_namespaced_service("web", namespace).spec.ports[0].target_port == "http"
        )

    wait_for(
        port_followed, 60, "the named container port follows spec.container.port; the Service targets it"
    )

    patch_spec(cluster, namespace, "web", {"service": None})
    wait_for(
        lambda: "web" not in {s.metadata.name for s in core.list_namespaced_service(namespace).items},
        60,
        "Service deleted when spec.service is removed",
    )


def test_pods_get_no_service_account_token_unless_asked_and_a_change_rolls(
    cluster, namespace, start_tdset_operator
):
    """The Deployment's pods get no ServiceAccount token unless the TDSet asks for one."""
    start_tdset_operator()
    apps, core = client.AppsV1Api(cluster.api), client.CoreV1Api(cluster.api)
    create(cluster, namespace, "tok", steady(1))
    replicas_become(cluster, namespace, "tok", 1, "Deployment created")
    assert get(cluster, namespace, "tok")["spec"]["container"]["automountServiceAccountToken"] is False
    before = deployment(cluster, namespace, "tok")
    assert before.spec.template.spec.automount_service_account_token is False

    def pods(token: bool) -> list | None:
        """The TDSet's live pods, if every one of them does (or does not) mount the token."""
        found = [
            p
            for p in core.list_namespaced_pod(
                namespace, label_selector="app.kubernetes.io/instance=tok"
            ).items
            if p.metadata.deletion_timestamp is None
        ]
        # The ServiceAccount admission plugin adds the projected token volume to mounting pods.
        mounted = [any(v.name.startswith("kube-api-access-") for v in p.spec.volumes or []) for p in found]
        return found if found and all(m == token for m in mounted) else None

    wait_for(lambda: pods(token=False), 60, "a pod without a token volume")

    asked = {"image": "nginx:1.27", "port": 80, "automountServiceAccountToken": True}
    patch_spec(cluster, namespace, "tok", {"container": asked})
    wait_for(
        lambda: deployment(cluster, namespace, "tok").spec.template.spec.automount_service_account_token,
        60,
        "the pod template asks for the token",
    )
    after = deployment(cluster, namespace, "tok")
    # The same Deployment, a new template: the Deployment controller rolls it out.
    assert after.metadata.uid == before.metadata.uid
    assert after.metadata.generation > before.metadata.generation
    wait_event(cluster, namespace, "tok", "UpdatedDeployment", "ServiceAccount token mounted")

    def rolled_out() -> bool:
        d = apps.read_namespaced_deployment("tok", namespace)
        return d.status.observed_generation == d.metadata.generation and d.status.updated_replicas == 1

    wait_for(rolled_out, 60, "the Deployment rolled out the new template")
    wait_for(lambda: pods(token=True), 60, "the old pod replaced by one with the token volume")


def test_an_autoscaler_gets_the_schedule_as_its_floor_and_is_not_fought(
    cluster, namespace, start_tdset_operator
):
    start_tdset_operator()
    autoscaling = client.AutoscalingV2Api(cluster.api)
    create(cluster, namespace, "shop", steady(4))
    replicas_become(cluster, namespace, "shop", 4, "scheduled replicas")
    autoscaling.create_namespaced_horizontal_pod_autoscaler(namespace, hpa("shop-hpa", "shop", 1, 10))

    def floor(n: int) -> Callable[[], bool]:
        return lambda: (
            autoscaling.read_namespaced_horizontal_pod_autoscaler("shop-hpa", namespace).spec.min_replicas
            == n
        )

    wait_for(floor(4), 60, "HPA minReplicas set to the scheduled 4")
    wait_event(cluster, namespace, "shop", "SetAutoscalerFloor", "from 1 to 4")
    wait_for(
        lambda: get(cluster, namespace, "shop")["status"].get("autoscaler") == "shop-hpa",
        60,
        "status.autoscaler",
    )

    # The autoscaler scales up above the floor (as it would under load): left alone. The check
    # waits until the operator has seen the 7 (its status says so) before looking.
    scale_deployment(cluster, namespace, "shop", 7)
    wait_for(
        lambda: get(cluster, namespace, "shop")["status"].get("replicas") == 7,
        120,
        "operator saw the autoscaler's 7 replicas",
    )
    assert deployment(cluster, namespace, "shop").spec.replicas == 7
    assert not [e for e in events(cluster, namespace, "shop") if e.reason == "RevertedManualScale"]

    # A new schedule moves the floor; above maxReplicas it is clamped and reported.
    patch_spec(cluster, namespace, "shop", {"defaultReplica": 12})
    wait_for(floor(10), 60, "floor clamped to maxReplicas")
    tds = wait_for(
        lambda: (t := get(cluster, namespace, "shop"))["status"].get("warnings") and t, 60, "clamp warning"
    )
    assert "maxReplicas 10" in tds["status"]["warnings"][0]
    assert tds["status"]["scheduledReplicas"] == 12 and tds["status"]["desiredReplicas"] == 10

    # Without the autoscaler the TDSet sets replicas itself again.
    autoscaling.delete_namespaced_horizontal_pod_autoscaler("shop-hpa", namespace)
    patch_spec(cluster, namespace, "shop", {"defaultReplica": 2})
    replicas_become(cluster, namespace, "shop", 2, "TDSet scales again once the HPA is gone")
    wait_for(
        lambda: get(cluster, namespace, "shop")["status"].get("autoscaler") is None, 60, "autoscaler cleared"
    )


def test_suspend_leaves_manual_scale_and_resume_reverts_it(cluster, namespace, start_tdset_operator):
    start_tdset_operator()
    create(cluster, namespace, "p", steady(3))
    replicas_become(cluster, namespace, "p", 3, "scheduled replicas")
    patch_spec(cluster, namespace, "p", {"suspend": True})
    wait_for(
        lambda: condition(get(cluster, namespace, "p"), "Progressing").get("reason") == "Suspended",
        60,
        "Progressing=False/Suspended",
    )
    wait_event(cluster, namespace, "p", "Suspended")
    scale_deployment(cluster, namespace, "p", 6)
    # Once the operator has recorded the 6 it has decided about it: it must still be 6.
    wait_for(lambda: get(cluster, namespace, "p")["status"].get("desiredReplicas") == 6, 60, "status sees 6")
    assert deployment(cluster, namespace, "p").spec.replicas == 6
    assert get(cluster, namespace, "p")["status"]["scheduledReplicas"] == 3

    patch_spec(cluster, namespace, "p", {"suspend": False})
    replicas_become(cluster, namespace, "p", 3, "schedule applied again on resume")
    wait_event(cluster, namespace, "p", "Resumed")


@pytest.mark.parametrize(
    ("patch", "fragments"),
    [
        (
            {"schedulingConfig": [{"startTime": 24, "endTime": 6, "replica": 1}]},
            ["spec.schedulingConfig[0].startTime", "less than or equal to 23"],
        ),
        (
            {"schedulingConfig": [{"startTime": 9, "endTime": 9, "replica": 1}]},
            ["spec.schedulingConfig[0]", "start and end are equal"],
        ),
        (
            {"schedulingConfig": [{"startTime": 9, "endTime": 17, "replica": -1}]},
            ["spec.schedulingConfig[0].replica", "greater than or equal to 0"],
        ),
        (
            {"schedulingConfig": [{"startTime": 9, "endTime": 17, "replica": 1, "days": ["Funday"]}]},
            ["spec.schedulingConfig[0].days[0]", "Unsupported value"],
        ),
        ({"defaultReplica": 0}, ["spec.defaultReplica", "greater than or equal to 1"]),
        ({"intervalMint": 1441}, ["spec.intervalMint", "less than or equal to 1440"]),
        ({"container": {"port": 80}}, ["spec.container.image", "Required value"]),
        ({"timeZone": "not a zone"}, ["spec.timeZone", "should match"]),
        (
            {"container": {"image": "nginx:1.27", "port": 80, "automountServiceAccountToken": "yes"}},
            ["spec.container.automountServiceAccountToken", "must be of type boolean"],
        ),
    ],
)
def test_invalid_specs_are_rejected_at_admission_with_the_field(cluster, namespace, patch, fragments):
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "bad", {**steady(1), **patch})
    assert err.value.status == 422
    for fragment in fragments:
        assert fragment in err.value.body


def test_unknown_zone_is_degraded_with_the_field_then_recovers(cluster, namespace, start_tdset_operator):
    start_tdset_operator()
    create(cluster, namespace, "tz", steady(2, timeZone="Mars/Olympus"))

    def degraded() -> dict[str, Any] | None:
        c = condition(get(cluster, namespace, "tz"), "Degraded")
        return c if c.get("status") == "True" else None

    cond = wait_for(degraded, 60, "Degraded=True")
    assert cond["reason"] == "InvalidSpec"
    assert "spec.timeZone" in cond["message"] and "Mars/Olympus" in cond["message"]
    assert wait_event(cluster, namespace, "tz", "InvalidSpec", "spec.timeZone").type == "Warning"
    # The operator decided with the bad spec in hand: nothing was created for it.
    assert not client.AppsV1Api(cluster.api).list_namespaced_deployment(namespace).items

    patch_spec(cluster, namespace, "tz", {"timeZone": BERLIN})
    replicas_become(cluster, namespace, "tz", 2, "Deployment once the zone is valid")
    wait_for(
        lambda: condition(get(cluster, namespace, "tz"), "Degraded").get("status") == "False",
        60,
        "Degraded=False after the fix",
    )


def test_overlapping_windows_are_allowed_and_reported(cluster, namespace, start_tdset_operator):
    start_tdset_operator()
    windows = [
        {"startTime": 0, "endTime": 12, "replica": 2},
        {"startTime": 10, "endTime": 14, "replica": 5},
    ]
    create(cluster, namespace, "ov", {**steady(1), "schedulingConfig": windows})
    tds = wait_for(
        lambda: (t := get(cluster, namespace, "ov")).get("status", {}).get("warnings") and t,
        60,
        "overlap warning",
    )
    (warning,) = tds["status"]["warnings"]
    # 10:00-12:00 every day: 14 h a week
    for fragment in ("spec.schedulingConfig[1]", "14 h a week", "earlier window wins"):
        assert fragment in warning
    assert condition(tds, "Degraded").get("status") == "False"
    wait_event(cluster, namespace, "ov", "ScheduleWarning", "spec.schedulingConfig[1]")


def test_operator_killed_mid_way_converges_after_restart(cluster, namespace, start_tdset_operator):
    day = datetime.datetime.now(UTC).date()
    ten = datetime.datetime.combine(day, datetime.time(10, 0), UTC)
    spec = {**steady(2), "schedulingConfig": [{"startTime": 9, "endTime": 17, "replica": 5}]}
    first = start_tdset_operator(ten)
    create(cluster, namespace, "r", spec)
    replicas_become(cluster, namespace, "r", 5, "window replicas at 10:00")
    first.kill()  # SIGKILL: no clean shutdown

    # While no operator runs: a manual scale and a spec change; then it comes back at 20:00.
    scale_deployment(cluster, namespace, "r", 8)
    patch_spec(cluster, namespace, "r", {"container": {"image": "nginx:1.28", "port": 80}})
    second = start_tdset_operator(datetime.datetime.combine(day, datetime.time(20, 0), UTC))

    def converged() -> dict[str, Any] | None:
        tds, dep = get(cluster, namespace, "r"), deployment(cluster, namespace, "r")
        st = tds.get("status") or {}
        if (
            dep.spec.replicas == 2
            and dep.spec.template.spec.containers[0].image == "nginx:1.28"
            and st.get("observedGeneration") == tds["metadata"]["generation"]
            and st.get("activeWindow") is None
            and st.get("desiredReplicas") == 2
        ):
            return tds
        return None

    tds = wait_for(converged, 90, "restarted operator converges to the 20:00 schedule")
    next_day_nine = datetime.datetime.combine(day + datetime.timedelta(days=1), datetime.time(9, 0), UTC)
    assert tds["status"]["nextTransitionTime"] == rfc3339(next_day_nine)
    deps = client.AppsV1Api(cluster.api).list_namespaced_deployment(namespace).items
    assert [d.metadata.name for d in deps] == ["r"]
    wait_event(cluster, namespace, "r", "RevertedManualScale", "scaled to 8", "scaled back to 2")
    assert "clock shifted" in second.log_tail(200_000)


def test_a_strangers_deployment_with_the_name_is_reported_not_adopted(
    cluster, namespace, start_tdset_operator
):
    start_tdset_operator()
    apps = client.AppsV1Api(cluster.api)
    labels = {"app": "mine"}
    apps.create_namespaced_deployment(
        namespace,
        {
            "metadata": {"name": "taken"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        },
    )
    create(cluster, namespace, "taken", steady(3))

    def conflict() -> dict[str, Any] | None:
        c = condition(get(cluster, namespace, "taken"), "Degraded")
        return c if c.get("status") == "True" else None

    cond = wait_for(conflict, 60, "Degraded=True DeploymentConflict")
    assert cond["reason"] == "DeploymentConflict" and "not controlled by this TDSet" in cond["message"]
    dep = deployment(cluster, namespace, "taken")
    assert dep.metadata.owner_references is None and dep.spec.replicas == 1
