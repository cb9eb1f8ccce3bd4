"""A scheduled Netperf against the real control plane, the operator's clock shifted
(``OPERATOR_CLOCK_OFFSET``) to each due time of an hourly schedule instead of waiting hours.

kwok runs the pods; the test finishes each client pod with output captured from real netperf
(the third run's throughput halved: the link got slower). A run's deadline is on the shifted
clock too, so each restart shifts it by less than that. Proves "three runs, history of
three, no overlap, a kill mid-run" and a detected regression, on the API server's own record
(the audit log) rather than the operator's Events; and that an operator started after the
regression (the first one killed), and a standby after the leader is killed, export its
``netperf_regressed`` series from the status.
``NETPERF_SCHEDULE_DUMP`` (a path): the final object is written there as YAML
(docs/operators/netperf.md shows it).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from shared.api import leases
from shared.api.clock import OFFSET_ENV
from tests.framework import audit
from tests.framework.cluster import Cluster
from tests.framework.netperfs import (
    create,
    finish_client,
    fixture,
    get,
    in_test,
    no_pods_left,
    pod,
    reasons,
    resampled,
    scaled,
    st,
)
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for

UTC = datetime.UTC
Start = Callable[..., OperatorProcess]


@pytest.fixture
def start_operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[Start]:
    """Start a Netperf operator watching ``namespace`` whose clock reads ``at`` now (``env``: more
    of its environment, e.g. leader election)."""
    started: list[OperatorProcess] = []

    def start(at: datetime.datetime, **env: str) -> OperatorProcess:
        offset = (at - datetime.datetime.now(UTC)).total_seconds()
        op = OperatorProcess(
            "operators.netperf",
            cluster.operator_kubeconfig("netperf"),
            tmp_path / f"operator-{len(started)}.log",
            namespaces=namespace,
            env={OFFSET_ENV: f"{offset:.6f}", **env},
        )
        started.append(op)
        return op.start()

    yield start
    for op in started:
        op.stop()


def test_three_scheduled_runs_no_overlap_a_kill_mid_run_and_a_regression(cluster, namespace, start_operator):
    # Due at minutes m and m+1 of every hour: a pair close enough that the second comes during a
    # run (within its 135 s deadline). m is the minute two minutes from now, so no due time lies
    # between the creation and the first one (a fixed :00 and :01 had two there when the test
    # ran at minute 59 or 0, and the operator caught up on the latest). ``hour`` is that first
    # due time; the next pair comes an hour later.
    hour = (datetime.datetime.now(UTC) + datetime.timedelta(minutes=2)).replace(second=0, microsecond=0)
    minutes = f"{hour.minute},{(hour.minute + 1) % 60}"
    spec = {
        "schedule": f"{minutes} * * * *",
        "samples": 3,
        "serverNode": "kwok-node-0",
        "clientNode": "kwok-node-1",
        # Three runs are too few for a measured baseline at the default pValue: a pinned one,
        # run means of this link (the fixture's mean is 8.125e9 bits/s).
        "regression": {"baseline": [8.10e9, 8.15e9, 8.05e9, 8.12e9, 8.13e9, 8.10e9]},
    }
    create(cluster, namespace, "nightly", spec)
    second = datetime.timedelta(seconds=1)

    def rfc3339(t: datetime.datetime) -> str:
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")

    def done(run: int) -> dict:
        s = wait_for(
            lambda: (
                (x := st(cluster, namespace, "nightly")).get("status") == "Done" and x.get("run") == run and x
            ),
            60,
            f"run {run} Done",
        )
        no_pods_left(cluster, namespace)
        return s

    # Run 1 at hour. hour + 1 min comes while it is in Test: skipped and counted, no second run.
    op = start_operator(hour - 3 * second)
    s = in_test(cluster, namespace, "nightly")
    assert (s["run"], s["clientPod"], s["scheduledTime"]) == (1, "nightly-client-r1", rfc3339(hour))
    op.stop()
    op = start_operator(hour + 61 * second)
    wait_for(
        lambda: (st(cluster, namespace, "nightly").get("skippedRuns") or {}).get("overlapping") == 1,
        60,
        "the due time of hour + 1 min skipped as overlapping",
    )
    finish_client(cluster, namespace, "nightly-client-r1", fixture("tcp_stream"))
    s = done(1)
    assert s["nextRunTime"] == rfc3339(hour + 3600 * second)
    op.stop()

    # Run 2 an hour later, the operator killed mid-run: the client finishes while it is down.
    op = start_operator(hour + 3597 * second)
    s = in_test(cluster, namespace, "nightly")
    assert s["run"] == 2
    started = s["startedAt"]
    op.kill()
    finish_client(cluster, namespace, "nightly-client-r2", scaled(fixture("tcp_stream"), 1.02))
    op = start_operator(hour + 3620 * second)
    s = done(2)
    assert s["startedAt"] == started and s["history"][-1]["run"] == 2  # the same run, continued
    op.stop()

    # Run 3 a minute after that, on a link at half the speed: a regression.
    op = start_operator(hour + 3657 * second)
    s = in_test(cluster, namespace, "nightly")
    assert (s["run"], s["scheduledTime"]) == (3, rfc3339(hour + 3660 * second))
    finish_client(cluster, namespace, "nightly-client-r3", scaled(fixture("tcp_stream"), 0.5))
    s = done(3)

    assert [h["run"] for h in s["history"]] == [1, 2, 3]
    assert [h["result"] for h in s["history"]] == ["Done"] * 3
    assert s["skippedRuns"] == {"overlapping": 1}
    regressed = next(c for c in s["conditions"] if c["type"] == "Regressed")
    assert (regressed["status"], regressed["reason"]) == ("True", "Regressed")
    assert s["regression"]["run"] == 3 and s["regression"]["changePercent"] == pytest.approx(-50.0, abs=1)
    assert (s["regression"]["changeRun"], s["regression"]["baselineRuns"]) == (3, 6)
    regressed_series = {"namespace": namespace, "name": "nightly", "test_type": "TCP_STREAM", "run": "3"}
    wait_for(lambda: op.metric("netperf_regressed", **regressed_series) == 1, 60, "netperf_regressed 1")
    # A new operator process (a restart, a failover, an upgrade), killed hard before it: its
    # first pass exports the verdict the object records; the series is the same, the alert too.
    op.kill()
    op = start_operator(hour + 3700 * second)
    wait_for(
        lambda: op.metric("netperf_regressed", **regressed_series) == 1,
        60,
        "the restarted operator's netperf_regressed from status",
    )
    lines = [line for line in op.metrics().splitlines() if line.startswith("netperf_regressed{")]
    assert [line for line in lines if 'name="nightly"' in line] == [
        f'netperf_regressed{{name="nightly",namespace="{namespace}",run="3",test_type="TCP_STREAM"}} 1.0'
    ]
    assert st(cluster, namespace, "nightly")["history"] == s["history"]  # it only read
    # A failover: two instances electing a leader on a Lease. The leader exports the verdict; the
    # standby reconciles nothing until the leader is killed and it takes the Lease over, and then
    # its first pass exports the same series.
    op.stop()
    pair = [start_operator(hour + 3710 * second, LEADER_ELECT="true", POD_NAME=n) for n in ("a", "b")]
    lease = leases.lease_name("netperf")
    first = wait_for(
        lambda: next((p for p in pair if p.metric("leader_election_master_status", name=lease) == 1), None),
        60,
        "a leader",
    )
    standby = pair[1] if first is pair[0] else pair[0]
    wait_for(lambda: first.metric("netperf_regressed", **regressed_series) == 1, 60, "the leader's series")
    assert standby.metric("netperf_regressed", **regressed_series) == 0  # absent: no pass yet
    first.kill()
    wait_for(
        lambda: standby.metric("netperf_regressed", **regressed_series) == 1,
        90,
        "the new leader's netperf_regressed from status",
    )
    assert standby.metric("leader_election_master_status", name=lease) == 1
    # The API server's record: each run's two pods created once, none for the skipped due time.
    assert audit.created(cluster, namespace, "pods") == [
        f"nightly-{c}-r{n}" for n in (1, 2, 3) for c in ("server", "client")
    ]
    if dump := os.environ.get("NETPERF_SCHEDULE_DUMP"):
        body = get(cluster, namespace, "nightly")
        for key in ("managedFields", "uid", "resourceVersion"):
            body["metadata"].pop(key, None)
        Path(dump).write_text(yaml.safe_dump(body, sort_keys=False))


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ({"timeZone": "Europe/Berlin"}, ["spec.timeZone", "timeZone needs spec.schedule"]),
        ({"historyLimit": 5}, ["spec.historyLimit", "historyLimit needs spec.schedule"]),
        (
            {"schedule": "@daily", "window": {"startHour": 3, "endHour": 3}},
            ["spec.window", "startHour and endHour must differ"],
        ),
        ({"schedule": "0 * * *"}, ["spec.schedule", "should match"]),
        ({"schedule": "@daily", "historyLimit": 101}, ["spec.historyLimit", "less than or equal to 100"]),
        (
            {"schedule": "@daily", "regression": {"baseline": [1.0]}},
            ["spec.regression.baseline", "at least 2"],
        ),
        (
            {"schedule": "@daily", "regression": {"baseline": [1.0, 2.0], "acknowledgedRun": 3}},
            ["spec.regression.acknowledgedRun", "acknowledgedRun and baseline are exclusive"],
        ),
        (
            {"schedule": "@daily", "regression": {"direction": "Down"}},
            ["spec.regression.direction", "Unsupported value"],
        ),
        ({"schedule": "@daily", "regression": {"acknowledgedRun": 0}}, ["spec.regression.acknowledgedRun"]),
    ],
)
def test_invalid_schedules_are_rejected_with_the_field(cluster, namespace, spec, fragments):
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "bad", spec)
    assert err.value.status == 422
    for fragment in fragments:
        assert fragment in err.value.body


def test_a_bad_cron_expression_past_the_schema_is_degraded_with_the_field(cluster, namespace, start_operator):
    """An error of the spec belongs to no run: Degraded and an Event, no run, no history entry."""
    start_operator(datetime.datetime.now(UTC))
    create(cluster, namespace, "np", {"schedule": "61 * * * *"})

    def degraded() -> dict | None:
        conds = st(cluster, namespace, "np").get("conditions") or []
        return next((c for c in conds if c["type"] == "Degraded" and c["status"] == "True"), None)

    found = wait_for(degraded, 60, "Degraded")
    assert (
        found["reason"] == "InvalidSpec" and "spec.schedule: minute: 61 is outside 0-59" in found["message"]
    )
    s = st(cluster, namespace, "np")
    assert "status" not in s and "history" not in s and "nextRunTime" not in s
    assert wait_for(lambda: "InvalidSpec" in reasons(cluster, namespace, "np"), 60, "the InvalidSpec Event")


def test_a_scheduled_netperf_without_samples_runs_five_and_a_stored_samples_is_kept(
    cluster, namespace, start_operator
):
    """samples has no schema default: left out, the API server stores none and the operator runs
    5 samples a run (every scheduled result is judged for a regression); an object that carries
    samples (e.g. the 3 an earlier release's schema default stored) keeps it."""
    due = (datetime.datetime.now(UTC) + datetime.timedelta(minutes=2)).replace(second=0, microsecond=0)
    base = {
        "schedule": f"{due.minute} * * * *",
        "serverNode": "kwok-node-0",
        "clientNode": "kwok-node-1",
        # A pinned baseline of this link's run means (the fixture's mean is 8.125e9 bits/s): the
        # first result is judged.
        "regression": {"baseline": [8.10e9, 8.15e9, 8.05e9, 8.12e9, 8.13e9, 8.10e9]},
    }
    create(cluster, namespace, "fresh", base)
    create(cluster, namespace, "stored", {**base, "samples": 3})
    assert "samples" not in get(cluster, namespace, "fresh")["spec"]
    start_operator(due - datetime.timedelta(seconds=3))
    for name, samples in (("fresh", 5), ("stored", 3)):
        s = in_test(cluster, namespace, name)
        assert s["runSpec"]["samples"] == samples
        command = pod(cluster, namespace, s["clientPod"]).spec.containers[0].command
        assert command[3:5] == ["netperf-samples", str(samples)]
        finish_client(cluster, namespace, s["clientPod"], resampled(fixture("tcp_stream"), samples))
    for name, samples in (("fresh", 5), ("stored", 3)):
        s = wait_for(
            lambda n=name: (
                (x := st(cluster, namespace, n)).get("status") == "Done" and x.get("regression") and x
            ),
            60,
            f"{name}: run 1 Done and judged",
        )
        assert len(s["history"][-1]["samples"]) == samples and s["measurement"]["samples"] == samples
        assert s["regression"]["reason"] == "WithinBaseline"
        regressed = next(c for c in s["conditions"] if c["type"] == "Regressed")
        assert ("not promised" in regressed["message"]) == (samples < 5)
    # Samples are no part of the measurement: both measure the same thing.
    assert (
        st(cluster, namespace, "fresh")["measurement"]["key"]
        == st(cluster, namespace, "stored")["measurement"]["key"]
    )


@pytest.mark.parametrize(
    ("spec", "accepted"),
    [
        ({"schedule": "@daily", "parallel": 8}, True),  # unset: the operator's default fits (3)
        ({"parallel": 8}, True),
        ({"schedule": "@daily", "parallel": 8, "samples": 3}, True),
        ({"schedule": "@daily", "parallel": 5, "samples": 5}, False),  # 25 > 24
    ],
)
def test_the_samples_x_parallel_rule_holds_for_explicit_samples_only(cluster, namespace, spec, accepted):
    if accepted:
        create(cluster, namespace, "fits", spec)
        assert "samples" not in spec or get(cluster, namespace, "fits")["spec"]["samples"] == spec["samples"]
        return
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, "bad", spec)
    assert err.value.status == 422 and "samples x parallel must be at most 24" in err.value.body
