"""Properties of the regression verdict over the whole accepted input space: what a measurement
is, a verdict in status (finite, consistent with its condition and its series), when it stops
applying, and that a refused schedule never touches the history."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.netperf import measurement, schedule, schema, status, verdicts
from operators.netperf.description import DESCRIPTION
from operators.netperf.reconciler import NetperfReconciler
from shared.api import conditions
from shared.api.clock import Clock
from shared.client.kube import namespaced
from tests.framework.fakekube import FakeKube
from tests.framework.netperfs import fixture
from tests.framework.passes import OnePass
from tests.framework.properties import examples

NOW = datetime.datetime(2026, 1, 5, 12, 0, tzinfo=datetime.UTC)
SETTINGS = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])

NODES = st.sampled_from(["node-a", "node-b", "kwok-node-0"])
RUN_SPECS = st.fixed_dictionaries(
    {},
    optional={
        "testType": st.sampled_from(schema.TEST_TYPES),
        "parallel": st.integers(1, schema.MAX_PARALLEL),
        "messageSize": st.integers(1, 65507),
        "path": st.sampled_from(schema.PATHS),
        "serverNode": NODES,
        "clientNode": NODES,
        "placement": st.sampled_from(schema.PLACEMENTS),
        "image": st.sampled_from(
            [schema.DEFAULT_IMAGE, "example.com/netperf:2.7", "netperf@sha256:" + "a" * 64]
        ),
        "duration": st.integers(1, schema.MAX_DURATION),
        "samples": st.integers(1, schema.MAX_SAMPLES),
        "timeoutSeconds": st.integers(5, 86400),
    },
)
FIGURE = st.one_of(
    st.floats(0, 1e12, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1e-300, 5e-324, 1e12]),
)
SAMPLES = st.lists(FIGURE, max_size=schema.MAX_SAMPLES)
KEYS = st.sampled_from(["k1", "k2", "k3"])
ENTRIES = st.lists(
    st.builds(
        lambda run, key, result, samples: {
            "run": run,
            "testType": "TCP_STREAM",
            "measurement": key,
            "result": result,
            **({"samples": samples} if result == "Done" else {"reason": "ClientTimeout"}),
        },
        st.integers(1, 1000),
        st.one_of(KEYS, st.none()),
        st.sampled_from(["Done", "Done", "Error"]),
        SAMPLES,
    ),
    max_size=30,
)
REGRESSION = st.fixed_dictionaries(
    {},
    optional={
        "baselineRuns": st.integers(1, schedule.MAX_BASELINE_RUNS),
        "baseline": st.lists(FIGURE, min_size=2, max_size=schedule.MAX_BASELINE_SAMPLES),
        "minChangePercent": st.floats(1, 100),
        "pValue": st.floats(0.0001, 0.5),
        "direction": st.sampled_from(schedule.DIRECTIONS),
        "acknowledgedRun": st.integers(1, 1200),
    },
).filter(lambda r: "baseline" not in r or "acknowledgedRun" not in r)  # exclusive at admission


@SETTINGS
@given(RUN_SPECS, RUN_SPECS)
def test_two_runs_share_a_key_exactly_when_they_measure_the_same(a, b):
    fa, fb = measurement.fields(a), measurement.fields(b)
    assert (measurement.key(fa) == measurement.key(fb)) == (fa == fb)
    assert (measurement.change(fa, fb) == "") == (fa == fb)
    # How many samples, and how long a run may take, change how well a figure is known, not it.
    assert measurement.fields({**a, "samples": 7, "timeoutSeconds": 999}) == measurement.fields(
        {**a, "samples": 2}
    )


@SETTINGS
@given(RUN_SPECS, st.sampled_from(["testType", "parallel", "messageSize", "path", "image", "duration"]))
def test_every_figure_field_changes_the_key_and_is_named(spec, field):
    before = measurement.fields(spec)
    other = {
        "testType": "UDP_RR" if before["testType"] != "UDP_RR" else "TCP_RR",
        "parallel": before["parallel"] % schema.MAX_PARALLEL + 1,
        "messageSize": (before.get("messageSize") or 0) % 65507 + 1,
        "path": "host" if before["path"] != "host" else "pod",
        "image": before["image"] + "-other",
        "duration": before["duration"] % schema.MAX_DURATION + 1,
    }[field]
    changed = {**spec, field: other, "compare": None}
    after = measurement.fields(changed)
    assert measurement.key(after) != measurement.key(before) or after == before
    if after != before:
        assert f"{field} " in measurement.change(before, after)


def _recorded(history: list[dict[str, Any]], item: dict[str, Any], regression: dict[str, Any], previous=None):
    s = schedule.settings({"regression": regression})
    outcome = schedule.verdict(history, item, s)
    measured = {"key": item["measurement"], "testType": "TCP_STREAM"}
    st_ = {"regression": previous} if previous else {}
    if outcome is None:
        return s, outcome, st_
    return s, outcome, verdicts.recorded(st_, item, measured, outcome, generation=3, now=NOW)


def test_samples_whose_sums_overflow_are_not_judged_instead_of_failing_the_pass():
    item = {"run": 3, "measurement": "k", "result": "Done", "samples": [1e308]}
    earlier = [
        {"run": run, "measurement": "k", "result": "Done", "samples": [1.7e308, 1.7e308]} for run in (1, 2)
    ]
    found = schedule.judge(earlier, item, schedule.Settings())
    assert isinstance(found, schedule.NotJudged) and found.reason == "NotFinite"


def test_a_baseline_of_zeros_is_not_judged():
    item = {"run": 3, "measurement": "k", "result": "Done", "samples": [1.0]}
    earlier = [{"run": run, "measurement": "k", "result": "Done", "samples": [0.0, 0.0]} for run in (1, 2)]
    found = schedule.judge(earlier, item, schedule.Settings())
    assert isinstance(found, schedule.NotJudged) and found.reason == "ZeroBaseline"


@SETTINGS
@given(ENTRIES, SAMPLES, KEYS, REGRESSION, st.booleans())
def test_a_verdict_in_status_is_finite_and_its_condition_and_series_agree(
    history, samples, key, regression, before
):
    item = {"run": 1001, "testType": "TCP_STREAM", "measurement": key, "result": "Done", "samples": samples}
    previous = {"run": 1000, "regressed": True, "regressedSince": 990, "measurement": key} if before else None
    s, outcome, found = _recorded(history, item, regression, previous)
    if not samples:
        assert outcome is None
        return
    json.dumps(found, allow_nan=False)  # no NaN, no infinity, anywhere
    verdict = found["regression"]
    condition = conditions.get(found["conditions"], schedule.REGRESSED)
    assert condition is not None and condition["status"] == ("True" if verdict["regressed"] else "False")
    assert condition["reason"] == verdict["reason"]
    earlier = schedule.comparable(history, item)
    if not s.pinned and not earlier:
        assert verdict["reason"] == "NewBaseline"
    if verdict["regressed"]:
        change, least = verdict["changePercent"], s.min_change_percent - 0.01
        worse = {"Decrease": -change, "Increase": change, "Either": abs(change)}[s.direction]
        assert verdict["judged"] and worse >= least
        assert verdict["pValue"] <= s.p_value
        assert verdict["regressedSince"] == (990 if before else verdict["changeRun"])
    else:
        assert "regressedSince" not in verdict
    if not verdict["judged"]:
        assert not {"mean", "baselineMean", "changePercent", "pValue"} & set(verdict)
    series = status.series({"schedule": "@hourly"}, found)["netperf_regressed"]
    run = str(verdict.get("regressedSince", "")) if verdict["regressed"] else ""
    assert series == {("TCP_STREAM", run): 1.0 if verdict["regressed"] else 0.0}


@SETTINGS
@given(RUN_SPECS, RUN_SPECS, st.booleans(), st.booleans())
def test_a_verdict_applies_while_the_schedule_and_its_measurement_do(judged_spec, spec, scheduled, regressed):
    measured = measurement.with_key(judged_spec)
    st_ = {
        "measurement": {**measured, "since": 1},
        "regression": {
            "run": 4,
            "testType": "TCP_STREAM",
            "measurement": measured["key"],
            "regressed": regressed,
        },
    }
    full = {**spec, **({"schedule": "@hourly"} if scheduled else {})}
    cleared = verdicts.settled(full, st_, generation=2, now=NOW)
    applies = scheduled and measurement.fields(schedule.run_spec(full)) == measurement.fields(judged_spec)
    assert (cleared is None) == applies
    series = status.series(full, cleared or st_)["netperf_regressed"]
    if applies:
        assert series == {("TCP_STREAM", "4" if regressed else ""): 1.0 if regressed else 0.0}
    else:
        assert series == {}
        assert cleared is not None
        condition = conditions.get(cleared["conditions"], schedule.REGRESSED)
        assert condition is not None and condition["status"] == "False"
        assert condition["reason"] == ("MeasurementChanged" if scheduled else "NotScheduled")
        assert verdicts.settled(full, cleared, generation=2, now=NOW) is None  # once


# --- a refused schedule, one pass of the operator on the fake API server ------------------------

NS, NP = "ns", "app.example.com/v1alpha1"
NP_PATH = namespaced(NS, "netperfs", "np", NP)
RANGES = (
    ("minute", 60, 99),
    ("hour", 24, 99),
    ("day of month", 32, 99),
    ("month", 13, 99),
    ("day of week", 8, 99),
)


@st.composite
def refused(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A schedule the CRD's pattern admits and the operator refuses, and the field it names."""
    if draw(st.booleans()):
        zone = draw(st.sampled_from(["Mars/Olympus_Mons", "Europe/Atlantis", "Etc/GMT+99", "Nowhere"]))
        return {"timeZone": zone}, "spec.timeZone"
    fields = ["*"] * 5
    at = draw(st.integers(0, 4))
    fields[at] = str(draw(st.integers(RANGES[at][1], RANGES[at][2])))
    if draw(st.booleans()):
        fields[at] = f"1-{fields[at]}"
    return {"schedule": " ".join(fields)}, "spec.schedule"


def _done_run() -> FakeKube:
    """A scheduled Netperf whose first run is Done, in the fake API server."""
    created = NOW - datetime.timedelta(minutes=5)
    kube = FakeKube(
        {
            "apiVersion": NP,
            "kind": "Netperf",
            "metadata": {"name": "np", "namespace": NS, "creationTimestamp": conditions.rfc3339(created)},
            "spec": {"schedule": "0 * * * *", "samples": 3},  # the fixture's
        }
    )
    p = OnePass(
        DESCRIPTION, NetperfReconciler, kube, NP_PATH, Clock(NOW - datetime.datetime.now(datetime.UTC))
    )
    p.run()
    ready = {"phase": "Running", "podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}]}
    for name, pod_status in (
        ("np-server-r1", ready),
        (
            "np-client-r1",
            {
                "phase": "Succeeded",
                "containerStatuses": [
                    {
                        "name": "netperf",
                        "state": {"terminated": {"exitCode": 0, "message": fixture("tcp_stream")}},
                    }
                ],
            },
        ),
    ):
        asyncio.run(kube.merge_patch(namespaced(NS, "pods", name) + "/status", {"status": pod_status}))
        assert isinstance(p.reconciler, NetperfReconciler)
        p.reconciler.pods.observe("MODIFIED", kube.object(namespaced(NS, "pods", name)))
        p.run()
    assert kube.object(NP_PATH)["status"]["status"] == "Done"
    return kube


DONE = _done_run()


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(refused())
def test_a_refused_schedule_never_touches_the_history_or_the_last_result(typo_and_field):
    typo, field = typo_and_field
    kube = FakeKube(DONE.object(NP_PATH))
    before = kube.object(NP_PATH)["status"]
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": typo}))
    later = NOW + datetime.timedelta(hours=3)  # due times came and went
    p = OnePass(
        DESCRIPTION, NetperfReconciler, kube, NP_PATH, Clock(later - datetime.datetime.now(datetime.UTC))
    )
    p.run()
    after = kube.object(NP_PATH)["status"]
    kept = (
        "history",
        "status",
        "run",
        "speedBitsPerSec",
        "throughputBitsPerSec",
        "regression",
        "measurement",
    )
    assert {k: after.get(k) for k in kept} == {k: before.get(k) for k in kept}
    degraded = conditions.get(after["conditions"], conditions.DEGRADED)
    assert degraded is not None and (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert field in degraded["message"]
    assert not kube.objects("pods", NS)
