"""TDSet's layered calendar on the real control plane: each layer and
their precedence, the override annotation and its expiry, status.upcoming and the wide printer
columns, pre-warm with its ready report, and what admission refuses.

As in test_tdset.py, each test runs its own operator restricted to the test's namespace, with
its clock shifted (``OPERATOR_CLOCK_OFFSET``) to the instant the test needs; expectations come
from the same pure calendar the unit tests check, at the instant they are checked.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.tdset import schedule
from shared.api.conditions import rfc3339
from tests.framework.cluster import Cluster
from tests.framework.tdsets import (
    BOUNDARY_MARGIN,
    GROUP,
    PLURAL,
    VERSION,
    co,
    condition,
    create,
    deployment,
    get,
    next_boundary,
    patch_spec,
    replicas_become,
    shifted_now,
    steady,
    table,
    wait_event,
)
from tests.framework.waits import wait_for

UTC = datetime.UTC
ANNOTATION = schedule.OVERRIDE_ANNOTATION


def annotate(cluster: Cluster, namespace: str, name: str, value: str | None) -> None:
    """``kubectl annotate tds <name> tdset.k8s-operators-py.dev/override=<value>`` (None removes it)."""
    co(cluster).patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name, {"metadata": {"annotations": {ANNOTATION: value}}}
    )


def decided_by(
    cluster: Cluster, namespace: str, name: str, layer: str, entry: str | None
) -> Callable[[], Any]:
    def probe() -> dict[str, Any] | None:
        tds = get(cluster, namespace, name)
        got = (tds.get("status") or {}).get("decidedBy") or {}
        return tds if (got.get("layer"), got.get("entry")) == (layer, entry) else None

    return probe


# A Thursday, 10:00 in Berlin: inside the 09:00-17:00 window below.
THURSDAY = datetime.datetime(2026, 12, 24, 9, 0, tzinfo=UTC)
WINDOW = {"name": "office", "startTime": 9, "endTime": 17, "replica": 4}


def test_each_layer_wins_over_the_ones_below(cluster, namespace, start_tdset_operator):
    start_tdset_operator(THURSDAY)
    spec = {**steady(2, timeZone="Europe/Berlin"), "schedulingConfig": [WINDOW]}
    create(cluster, namespace, "cal", spec)
    replicas_become(cluster, namespace, "cal", 4, "the window's replicas")
    wait_for(decided_by(cluster, namespace, "cal", "window", "office"), 60, "decidedBy window office")

    patch_spec(cluster, namespace, "cal", {"holidays": {"dates": ["2026-12-24"], "replicas": 1}})
    replicas_become(cluster, namespace, "cal", 1, "holidays.replicas on a holiday")
    tds = wait_for(decided_by(cluster, namespace, "cal", "holiday", "2026-12-24"), 60, "decidedBy holiday")
    assert tds["status"].get("activeWindow") is None  # the window is not what decides
    # The holiday ends at midnight in Berlin: 23:00 UTC.
    assert tds["status"]["nextTransitionTime"] == "2026-12-24T23:00:00Z"

    sale = {"name": "sale", "start": "2026-12-24T00:00", "end": "2026-12-27T00:00", "replicas": 6}
    patch_spec(cluster, namespace, "cal", {"overrides": [sale]})
    replicas_become(cluster, namespace, "cal", 6, "the override's replicas, above the holiday")
    tds = wait_for(decided_by(cluster, namespace, "cal", "override", "sale"), 60, "decidedBy override sale")
    assert tds["status"]["upcoming"][0]["time"] == "2026-12-26T23:00:00Z"  # 27 Dec 00:00 in Berlin
    wait_event(cluster, namespace, "cal", "ScaledDeployment", "from 1 to 6", "override 'sale'")

    # On-call: the annotation is above every spec override.
    annotate(cluster, namespace, "cal", "replicas=9,until=2026-12-24T12:00:00Z")
    replicas_become(cluster, namespace, "cal", 9, "the annotation's replicas, above the spec's override")
    wait_for(decided_by(cluster, namespace, "cal", "override", "annotation"), 60, "decidedBy the annotation")

    # Each removed layer hands over to the next one down.
    annotate(cluster, namespace, "cal", None)
    replicas_become(cluster, namespace, "cal", 6, "back to the spec's override")
    patch_spec(cluster, namespace, "cal", {"overrides": None})
    replicas_become(cluster, namespace, "cal", 1, "back to the holiday")
    patch_spec(cluster, namespace, "cal", {"holidays": None})
    replicas_become(cluster, namespace, "cal", 4, "back to the window")
    wait_for(decided_by(cluster, namespace, "cal", "window", "office"), 60, "decidedBy window again")


def test_the_override_annotation_expires_at_its_until_and_a_malformed_one_is_reported(
    cluster, namespace, start_tdset_operator
):
    op = start_tdset_operator(datetime.datetime.now(UTC).replace(second=20, microsecond=0))
    create(cluster, namespace, "oncall", steady(2))
    replicas_become(cluster, namespace, "oncall", 2, "defaultReplica")

    # At least BOUNDARY_MARGIN ahead of the annotation, however busy the machine was so far.
    boundary = next_boundary(op)
    annotate(cluster, namespace, "oncall", f"replicas=5,until={rfc3339(boundary)}")
    replicas_become(cluster, namespace, "oncall", 5, "the annotation's replicas")
    tds = wait_for(decided_by(cluster, namespace, "oncall", "override", "annotation"), 60, "decidedBy")
    assert shifted_now(op) < boundary, "the override expired before the test could see it"
    assert tds["status"]["nextTransitionTime"] == rfc3339(boundary)
    assert tds["status"]["upcoming"][0] == {
        "time": rfc3339(boundary),
        "localTime": boundary.isoformat(),
        "replicas": 2,
        "layer": "default",
    }

    replicas_become(cluster, namespace, "oncall", 2, "defaultReplica once the override expired")
    assert shifted_now(op) >= boundary
    tds = wait_for(decided_by(cluster, namespace, "oncall", "default", None), 60, "decidedBy default")
    assert any("expired" in w for w in tds["status"].get("warnings") or [])

    annotate(cluster, namespace, "oncall", "replicas=lots,until=tomorrow")

    def degraded() -> dict[str, Any] | None:
        c = condition(get(cluster, namespace, "oncall"), "Degraded")
        return c if c.get("reason") == "InvalidOverrideAnnotation" else None

    cond = wait_for(degraded, 60, "Degraded=True InvalidOverrideAnnotation")
    assert cond["status"] == "True" and ANNOTATION in cond["message"]
    event = wait_event(cluster, namespace, "oncall", "InvalidOverrideAnnotation", "the override is ignored")
    assert event.type == "Warning"
    assert deployment(cluster, namespace, "oncall").spec.replicas == 2  # the calendar runs on without it
    annotate(cluster, namespace, "oncall", None)
    wait_for(
        lambda: condition(get(cluster, namespace, "oncall"), "Degraded").get("status") == "False",
        60,
        "Degraded=False once the annotation is gone",
    )


def test_upcoming_transitions_in_status_and_the_wide_columns(cluster, namespace, start_tdset_operator):
    op = start_tdset_operator(THURSDAY)
    spec = {
        **steady(2, timeZone="Europe/Berlin"),
        "schedulingConfig": [WINDOW],
        "holidays": {"dates": ["2026-12-25"], "replicas": 1},
        "leadTime": "15m",
    }
    create(cluster, namespace, "up", spec)

    def listed() -> dict[str, Any] | None:
        tds = get(cluster, namespace, "up")
        return tds if (tds.get("status") or {}).get("upcoming") else None

    tds = wait_for(listed, 60, "status.upcoming")
    expected = schedule.decide(tds["spec"], shifted_now(op)).upcoming
    got = tds["status"]["upcoming"]
    assert [(u["time"], u["replicas"], u["layer"], u.get("entry")) for u in got] == [
        (rfc3339(t.time), t.decided.replicas, t.decided.layer, t.decided.entry) for t in expected
    ]
    # 17:00 Berlin, the holiday (all 25 Dec, no window), 26 Dec: 08:45 pre-warm, 09:00 window.
    assert [(u["localTime"], u["layer"]) for u in got] == [
        ("2026-12-24T17:00:00+01:00", "default"),
        ("2026-12-25T00:00:00+01:00", "holiday"),
        ("2026-12-26T00:00:00+01:00", "default"),
        ("2026-12-26T08:45:00+01:00", "leadTime"),
        ("2026-12-26T09:00:00+01:00", "window"),
    ]

    columns = table(cluster, namespace)["columnDefinitions"]
    wide = {c["name"]: c["priority"] for c in columns if c.get("priority")}
    assert wide == {"Layer": 1, "Next-Replicas": 1, "Next-Layer": 1}
    (row,) = table(cluster, namespace)["rows"]
    names = [c["name"] for c in columns]
    cells = dict(zip(names, row["cells"], strict=True))
    assert (cells["Layer"], cells["Next-Replicas"], cells["Next-Layer"]) == ("window", 2, "default")


def test_lead_time_scales_up_before_the_window_and_reports_when_ready(
    cluster, namespace, start_tdset_operator
):
    op = start_tdset_operator(datetime.datetime.now(UTC).replace(second=20, microsecond=0))
    warm = next_boundary(op)
    opens = warm + datetime.timedelta(minutes=1)
    window = {
        "name": "peak",
        "startTime": opens.hour,
        "startMinute": opens.minute,
        "endTime": (opens.hour + 8) % 24,
        "replica": 3,
        "leadTime": "1m",
    }
    create(cluster, namespace, "warm", {**steady(1), "schedulingConfig": [window]})
    tds = wait_for(
        lambda: (t := get(cluster, namespace, "warm")).get("status", {}).get("upcoming") and t, 60, "upcoming"
    )
    assert shifted_now(op) < warm, "the operator took too long to start"
    first, second = tds["status"]["upcoming"][:2]
    assert (first["time"], first["layer"], first["replicas"]) == (rfc3339(warm), "leadTime", 3)
    assert (second["time"], second["layer"], second["replicas"]) == (rfc3339(opens), "window", 3)

    replicas_become(cluster, namespace, "warm", 3, "pre-warmed replicas")
    assert warm <= shifted_now(op) < opens + BOUNDARY_MARGIN
    wait_for(decided_by(cluster, namespace, "warm", "leadTime", "peak"), 60, "decidedBy leadTime")

    def reported() -> dict[str, Any] | None:
        pre = (get(cluster, namespace, "warm").get("status") or {}).get("preWarm") or {}
        return pre if "readyAt" in pre else None

    pre = wait_for(reported, 120, "status.preWarm.readyAt")
    assert (pre["entry"], pre["windowStart"], pre["replicas"]) == ("peak", rfc3339(opens), 3)
    ready_at = datetime.datetime.fromisoformat(pre["readyAt"])
    assert pre["readySecondsAfterStart"] == round((ready_at - opens).total_seconds())
    wait_for(decided_by(cluster, namespace, "warm", "window", "peak"), 120, "decidedBy window once it opened")
    # Never scaled down early: the window's replicas stay.
    assert deployment(cluster, namespace, "warm").spec.replicas == 3


def test_holidays_from_an_unlabelled_configmap_follow_its_changes(cluster, namespace, start_tdset_operator):
    start_tdset_operator(THURSDAY)
    core = client.CoreV1Api(cluster.api)
    spec = {
        **steady(2, timeZone="Europe/Berlin"),
        "schedulingConfig": [WINDOW],
        "holidays": {"configMapRef": {"name": "days-off"}, "replicas": 1},
    }
    create(cluster, namespace, "hol", spec)
    replicas_become(cluster, namespace, "hol", 4, "the window's replicas while the ConfigMap is missing")

    def degraded(reason: str) -> Callable[[], Any]:
        return lambda: condition(get(cluster, namespace, "hol"), "Degraded").get("reason") == reason

    wait_for(degraded("HolidaysUnavailable"), 60, "Degraded HolidaysUnavailable")
    wait_event(cluster, namespace, "hol", "HolidaysUnavailable", "no ConfigMap days-off")

    core.create_namespaced_config_map(  # no label needed: any ConfigMap of the namespace
        namespace, {"metadata": {"name": "days-off"}, "data": {"2026": "2026-12-24 # Christmas Eve"}}
    )
    replicas_become(cluster, namespace, "hol", 1, "holidays.replicas once the ConfigMap lists today")
    wait_for(decided_by(cluster, namespace, "hol", "holiday", "2026-12-24"), 60, "decidedBy holiday")
    wait_for(degraded("SpecValid"), 60, "Degraded=False")

    core.patch_namespaced_config_map("days-off", namespace, {"data": {"2026": "2026-12-25"}})
    replicas_become(cluster, namespace, "hol", 4, "the window again once today is no longer listed")
    tds = wait_for(decided_by(cluster, namespace, "hol", "window", "office"), 60, "decidedBy window")
    assert any(
        u["layer"] == "holiday" and u["localTime"].startswith("2026-12-25") for u in tds["status"]["upcoming"]
    )


def test_a_bad_date_in_a_shared_holidays_configmap_is_reported_by_every_reader_and_the_rest_apply(
    cluster, namespace, start_tdset_operator
):
    """``9999-12-31`` in a ConfigMap two TDSets read stopped both without a word. Each now reports
    it (Degraded HolidaysUnavailable naming the word, a Warning Event) while today's holiday,
    also listed, still decides."""
    start_tdset_operator(THURSDAY)
    client.CoreV1Api(cluster.api).create_namespaced_config_map(
        namespace,
        {"metadata": {"name": "shared"}, "data": {"days": "2026-12-24\n9999-12-31"}},
    )
    spec = {
        **steady(2, timeZone="Europe/Berlin"),
        "schedulingConfig": [WINDOW],
        "holidays": {"configMapRef": {"name": "shared"}, "replicas": 1},
    }
    for name in ("a", "b"):
        create(cluster, namespace, name, spec)
    for name in ("a", "b"):
        replicas_become(cluster, namespace, name, 1, f"{name}: holidays.replicas from the valid date")
        wait_for(
            lambda name=name: (
                condition(get(cluster, namespace, name), "Degraded").get("reason") == "HolidaysUnavailable"
            ),
            60,
            f"{name}: Degraded HolidaysUnavailable",
        )
        message = condition(get(cluster, namespace, name), "Degraded")["message"]
        assert "9999-12-31" in message and schedule.RANGE_MESSAGE in message
        assert wait_event(cluster, namespace, name, "HolidaysUnavailable", "9999-12-31").type == "Warning"


@pytest.mark.parametrize(
    ("patch", "fragments"),
    [
        (
            {
                "overrides": [
                    {
                        "name": "x",
                        "start": "2026-12-02T00:00:00Z",
                        "end": "2026-12-01T00:00:00Z",
                        "replicas": 1,
                    }
                ]
            },
            ["spec.overrides[0]", "end must be after start"],
        ),
        (
            {
                "overrides": [
                    {"name": "x", "start": "2026-12-02T00:00", "end": "2026-12-01T23:00", "replicas": 1}
                ]
            },
            ["spec.overrides[0]", "end must be after start"],
        ),
        (
            {
                "overrides": [
                    {"name": "x", "start": "2026-12-01 09:00:00", "end": "2026-12-01T00:00", "replicas": 1}
                ]
            },
            ["spec.overrides[0].start", "should match"],
        ),
        (
            {
                "overrides": [
                    {"name": f"o{i}", "start": "2026-12-01T00:00", "end": "2026-12-02T00:00", "replicas": 1}
                    for i in range(33)
                ]
            },
            ["spec.overrides", "must have at most 32 items"],
        ),
        (
            {
                "overrides": [
                    {"name": "same", "start": "2026-12-01T00:00", "end": "2026-12-02T00:00", "replicas": 1},
                    {"name": "same", "start": "2026-12-03T00:00", "end": "2026-12-04T00:00", "replicas": 2},
                ]
            },
            ["spec.overrides[1]", "Duplicate value"],
        ),
        ({"holidays": {"dates": ["25.12.2026"], "replicas": 1}}, ["spec.holidays.dates[0]", "should match"]),
        ({"holidays": {"dates": ["2026-12-25"]}}, ["spec.holidays.replicas", "Required value"]),
        ({"leadTime": "25h"}, ["spec.leadTime", "must be at most 24h"]),
        ({"leadTime": "soon"}, ["spec.leadTime", "should match"]),
        (
            {
                "timeZone": "America/New_York",
                "overrides": [
                    {"name": "x", "start": "2026-12-01T00:00", "end": "9999-12-31T23:00", "replicas": 1}
                ],
            },
            ["spec.overrides[0].end", schedule.RANGE_MESSAGE],
        ),
        (
            {"holidays": {"dates": ["2026-12-25", "9999-12-31"], "replicas": 1}},
            ["spec.holidays.dates", schedule.RANGE_MESSAGE],
        ),
        (
            {"holidays": {"dates": ["1969-12-31"], "replicas": 1}},
            ["spec.holidays.dates", schedule.RANGE_MESSAGE],
        ),
    ],
    ids=[
        "override-end-before-start",
        "override-local-end-before-start",
        "override-bad-time",
        "too-many-overrides",
        "duplicate-override-names",
        "holiday-bad-date",
        "holidays-without-replicas",
        "lead-time-over-a-day",
        "lead-time-not-a-duration",
        "override-past-the-calendars-years",
        "holiday-past-the-calendars-years",
        "holiday-before-the-calendars-years",
    ],
)
def test_invalid_calendars_are_rejected_at_admission_with_the_field(cluster, namespace, patch, fragments):
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "bad", {**steady(1), **patch})
    assert err.value.status == 422, err.value.body
    for fragment in fragments:
        assert fragment in err.value.body


def test_a_full_calendar_is_admitted(cluster, namespace):
    """The limits themselves pass: the CEL rules' cost at maxItems is within the API server's budget."""
    spec = {
        **steady(1),
        "schedulingConfig": [
            {"name": f"w{i}", "startTime": i % 24, "endTime": (i + 1) % 24, "replica": 1, "leadTime": "5m"}
            for i in range(48)
        ],
        "overrides": [
            {
                "name": f"o{i}",
                "start": "2026-12-01T00:00:00Z",
                "end": "2026-12-02T00:00:00+01:00",
                "replicas": 1,
            }
            for i in range(32)
        ],
        "holidays": {
            "dates": [
                (datetime.date(2027, 1, 1) + datetime.timedelta(days=i)).isoformat() for i in range(365)
            ],
            "replicas": 1,
        },
        "leadTime": "24h",
    }
    created = create(cluster, namespace, "full", spec)
    assert len(created["spec"]["holidays"]["dates"]) == 365
