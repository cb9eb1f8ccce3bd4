"""A scheduled Netperf, pass by pass on the fake API server, the clock moved by the test:
runs at due times, no overlap (counted), one catch-up after downtime, a restart mid-run, an edit
mid-run, history and a detected regression."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import pytest

from operators.netperf import desired, schedule, schema
from operators.netperf.description import DESCRIPTION
from operators.netperf.reconciler import NetperfReconciler
from shared.api import conditions
from shared.api.clock import Clock
from shared.api.correlator import Correlator
from shared.client.kube import namespaced
from tests.framework.fakekube import FakeKube
from tests.framework.netperfs import fixture, resampled, scaled
from tests.framework.passes import OnePass

NS = "ns"
NP = "app.example.com/v1alpha1"
NP_PATH = namespaced(NS, "netperfs", "np", NP)
CREATED = datetime.datetime(2026, 1, 5, 11, 55, tzinfo=datetime.UTC)
READY = {"phase": "Running", "podIP": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}]}


def at(hour: int, minute: int, second: int = 0) -> datetime.datetime:
    return datetime.datetime(2026, 1, 5, hour, minute, second, tzinfo=datetime.UTC)


def netperf(**spec: Any) -> dict[str, Any]:
    """A scheduled Netperf of ``spec``; samples 3 as the fixtures' outputs have (None: unset)."""
    full = {"schedule": "*/10 * * * *", "samples": 3, **spec}
    return {
        "apiVersion": NP,
        "kind": "Netperf",
        "metadata": {"name": "np", "namespace": NS, "creationTimestamp": conditions.rfc3339(CREATED)},
        "spec": {k: v for k, v in full.items() if v is not None},
    }


class Pass(OnePass):
    def __init__(self, kube: FakeKube, now: datetime.datetime) -> None:
        super().__init__(DESCRIPTION, NetperfReconciler, kube, NP_PATH, self.clock_at(now))
        assert isinstance(self.reconciler, NetperfReconciler)
        self.np = self.reconciler

    @staticmethod
    def clock_at(now: datetime.datetime) -> Clock:
        return Clock(now - datetime.datetime.now(datetime.UTC))

    def at(self, now: datetime.datetime) -> Pass:
        self.np.clock = self.clock_at(now)
        return self

    def kubelet(self, name: str, status: dict[str, Any]) -> None:
        asyncio.run(self.kube.merge_patch(namespaced(NS, "pods", name) + "/status", {"status": status}))
        self.np.pods.observe("MODIFIED", self.kube.object(namespaced(NS, "pods", name)))

    def finish(self, run: int, output: str) -> None:
        """The run's server gets ready, its client is created and ends with ``output``."""
        names = desired.pod_names("np", f"r{run}")
        self.kubelet(names.server, READY)
        self.run()
        self.client_ends(names.client, output)

    def client_ends(self, client: str, output: str) -> None:
        """The client pod ``client`` ends with ``output`` as its termination message; a pass."""
        terminated = {"exitCode": 0, "message": output}
        self.kubelet(
            client,
            {
                "phase": "Succeeded",
                "containerStatuses": [{"name": "netperf", "state": {"terminated": terminated}}],
            },
        )
        self.run()

    @property
    def status(self) -> dict[str, Any]:
        return self.kube.object(NP_PATH).get("status") or {}


def pods(kube: FakeKube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in kube.objects("pods", NS))


def test_nothing_runs_before_the_first_due_time_and_the_pass_wakes_exactly_then():
    kube = FakeKube(netperf())
    p = Pass(kube, at(11, 57))
    assert p.run() == pytest.approx(180.0, abs=1)  # 12:00
    assert pods(kube) == []
    assert p.status["nextRunTime"] == "2026-01-05T12:00:00Z"


def test_three_runs_at_their_due_times_each_in_the_history():
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    for run, minute in ((1, 0), (2, 10), (3, 20)):
        p.at(at(12, minute, 1)).run()
        assert pods(kube) == [f"np-server-r{run}"]  # the run's own pods, by its number
        assert p.status["run"] == run and p.status["scheduledTime"] == f"2026-01-05T12:{minute:02d}:00Z"
        p.finish(run, fixture("tcp_stream"))
        assert p.status["status"] == "Done" and pods(kube) == []
    history = p.status["history"]
    assert [h["run"] for h in history] == [1, 2, 3]
    assert history[0]["samples"] == [9776460000.0, 7182820000.0, 7417150000.0]
    assert history[0]["unit"] == "bitsPerSec" and history[0]["testType"] == "TCP_STREAM"
    assert p.status.get("skippedRuns", {}) == {}
    # Runs 2 and 3 were judged against the ones before them: the same link, no regression.
    regressed = conditions.get(p.status["conditions"], "Regressed")
    assert regressed is not None and regressed["status"] == "False"


def test_a_due_time_during_a_run_is_skipped_and_counted_never_a_second_run():
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    p.run()
    p.kubelet("np-server-r1", READY)
    p.at(at(12, 10, 1)).run()  # 12:10 came while run 1 is in Test
    assert p.status["run"] == 1 and p.status["skippedRuns"] == {"overlapping": 1}
    assert pods(kube) == ["np-client-r1", "np-server-r1"]
    assert ("Normal", "RunSkipped") in [(t, r) for t, r, _ in p.events]
    assert p.status["lastScheduleTime"] == "2026-01-05T12:10:00Z"


def test_after_downtime_across_three_due_times_one_catch_up_run():
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    p.run()
    p.finish(1, fixture("tcp_stream"))
    p.at(at(12, 35)).run()  # 12:10, 12:20, 12:30 passed while the operator was down
    assert p.status["run"] == 2 and p.status["scheduledTime"] == "2026-01-05T12:30:00Z"
    assert p.status["skippedRuns"] == {"missed": 2}
    assert pods(kube) == ["np-server-r2"]


def test_with_a_starting_deadline_a_late_due_time_is_skipped():
    kube = FakeKube(netperf(startingDeadlineSeconds=60))
    p = Pass(kube, at(12, 5))
    assert p.run() == pytest.approx(300.0, abs=1)
    assert p.status["skippedRuns"] == {"missed": 1} and "run" not in p.status
    assert pods(kube) == []


def test_a_restarted_operator_continues_the_run_without_a_duplicate():
    kube = FakeKube(netperf())
    Pass(kube, at(12, 0, 1)).run()
    assert pods(kube) == ["np-server-r1"]
    p = Pass(kube, at(12, 0, 30))  # a new process: empty caches
    p.np.pods.observe("ADDED", kube.object(namespaced(NS, "pods", "np-server-r1")))
    p.finish(1, fixture("tcp_stream"))
    assert p.status["run"] == 1 and [h["run"] for h in p.status["history"]] == [1]
    assert [a.key[3] for a in kube.writes() if a.key[1] == "pods" and a.key[0] == "create"] == []


def test_an_edit_mid_run_applies_from_the_next_run():
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    p.run()
    body = kube.object(NP_PATH)
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"testType": "TCP_RR", "schedule": "*/30 * * * *"}}))
    assert kube.object(NP_PATH)["metadata"]["generation"] == body["metadata"]["generation"] + 1
    p.finish(1, fixture("tcp_stream"))  # run 1 was claimed as TCP_STREAM and ends as one
    assert p.status["status"] == "Done" and p.status["history"][0]["testType"] == "TCP_STREAM"
    assert p.status["nextRunTime"] == "2026-01-05T12:30:00Z"
    p.at(at(12, 30, 1)).run()
    assert p.status["runSpec"]["testType"] == "TCP_RR"


def test_suspended_due_times_pass_counted_and_are_not_caught_up():
    kube = FakeKube(netperf(suspend=True))
    p = Pass(kube, at(12, 0, 1))
    p.run()
    assert pods(kube) == [] and p.status["skippedRuns"] == {"suspended": 1}
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"suspend": False}}))
    p.at(at(12, 5)).run()
    assert pods(kube) == []  # 12:00 is not run late
    p.at(at(12, 10, 1)).run()
    assert pods(kube) == ["np-server-r1"]


def test_outside_the_quiet_window_no_run_starts():
    kube = FakeKube(netperf(window={"startHour": 22, "endHour": 6}))
    p = Pass(kube, at(12, 0, 1))
    p.run()
    assert pods(kube) == [] and p.status["skippedRuns"] == {"outsideWindow": 1}


def test_a_halved_throughput_is_a_regression_with_its_figures_an_event_and_a_metric():
    kube = FakeKube(netperf(regression={"baselineRuns": 10}))
    p = Pass(kube, at(12, 0, 1))
    # Five runs' Events within a real second: more than client-go's spam filter lets through.
    p.operator.events.correlator = Correlator(burst=1000)
    scales = (1.0, 1.005, 0.995, 1.0)
    for run, scale in enumerate(scales, 1):
        p.at(at(12, 0, 1) + datetime.timedelta(minutes=10 * (run - 1))).run()
        p.finish(run, scaled(fixture("tcp_stream"), scale))
    p.at(at(12, 40, 1)).run()
    p.finish(5, scaled(fixture("tcp_stream"), 0.5))
    st = p.status
    regressed = conditions.get(st["conditions"], "Regressed")
    assert regressed is not None and regressed["status"] == "True" and regressed["reason"] == "Regressed"
    assert st["regression"]["regressed"] and st["regression"]["run"] == 5
    assert st["regression"]["changePercent"] == pytest.approx(-50.0, abs=0.1)
    assert st["regression"]["pValue"] < schedule.DEFAULT_P_VALUE
    assert st["regression"]["baselineRuns"] == 4 and st["regression"]["changeRun"] == 5
    assert ("Warning", "Regressed") in [(t, r) for t, r, _ in p.events]
    exposition = p.operator.runtime.metrics.exposition().decode()
    assert 'netperf_regressed{name="np",namespace="ns",run="5",test_type="TCP_STREAM"} 1.0' in exposition
    assert (
        'netperf_result_throughput_bytes_per_second{name="np",namespace="ns",test_type="TCP_STREAM"}'
        in exposition
    )
    # Back to the old level: cleared.
    p.at(at(12, 50, 1)).run()
    p.finish(6, fixture("tcp_stream"))
    regressed = conditions.get(p.status["conditions"], "Regressed")
    assert regressed is not None and regressed["status"] == "False"


@pytest.mark.slow  # 105 scheduled runs, each a full pass
def test_the_history_is_bounded_and_the_object_stays_small_at_the_maximum():
    kube = FakeKube(netperf(historyLimit=100, samples=None))  # the default: 5 samples per run
    p = Pass(kube, at(12, 0, 1))
    output = resampled(fixture("tcp_stream"), 5)
    for run in range(1, 106):
        p.at(at(12, 0, 1) + datetime.timedelta(minutes=run * 10 - 10)).run()
        p.finish(run, output)
    history = p.status["history"]
    assert len(history) == 100 and history[0]["run"] == 6 and history[-1]["run"] == 105
    size = len(json.dumps(kube.object(NP_PATH)))
    # docs/operators/netperf.md quotes the figures: 39 KB (JSON) with the default 5 samples per result; the
    # history alone at the maximum 10 samples per result is some 45 KB. etcd's limit: 1.5 MiB.
    assert size < 64 * 1024, size
    widest = {**history[-1], "samples": [9_776_460_000.123456] * 10}
    assert len(json.dumps([widest] * 100)) < 64 * 1024


def test_a_schedule_removed_runs_once_as_a_one_off_keeping_the_history():
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    p.run()
    p.finish(1, fixture("tcp_stream"))
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"schedule": None}}))
    assert "schedule" not in kube.object(NP_PATH)["spec"]
    p.at(at(12, 3)).run()
    assert pods(kube) == ["np-server-2"]  # generation 2's one-off run
    assert "scheduledTime" not in p.status and "runSpec" not in p.status
    names = desired.pod_names("np", 2)
    p.kubelet(names.server, READY)
    p.run()
    p.client_ends(names.client, fixture("tcp_stream"))
    assert p.status["status"] == "Done" and [h["run"] for h in p.status["history"]] == [1]


def test_a_scheduled_compare_run_measures_each_path_and_keeps_the_first_paths_figure_in_history():
    """compare with a schedule: one run per due time measures every path in turn; history and
    regression detection take the first path's figure (docs/operators/netperf.md)."""
    kube = FakeKube(netperf(compare=["pod", "host"], samples=3))
    p = Pass(kube, at(12, 0, 1))
    pod_path, host_path = fixture("tcp_stream"), scaled(fixture("tcp_stream"), 2)
    for run, minute in ((1, 0), (2, 10), (3, 20)):
        p.at(at(12, minute, 1)).run()
        for path, output in (("pod", pod_path), ("host", host_path)):
            names = desired.pod_names("np", f"r{run}-{path}")
            assert pods(kube) == [names.server] and p.status["path"] == path
            p.kubelet(names.server, READY)
            p.run()
            p.client_ends(names.client, output)
            if path == "pod":
                assert p.status["status"] == "Initial" and pods(kube) == []
                p.run()  # the next pass starts the host path
        assert p.status["status"] == "Done" and p.status["run"] == run
        assert p.status["ratios"]["podToHost"] == pytest.approx(0.5, rel=1e-3)
    history = p.status["history"]
    assert [h["run"] for h in history] == [1, 2, 3]
    assert history[0]["samples"] == [9776460000.0, 7182820000.0, 7417150000.0]  # the pod path's
    regressed = conditions.get(p.status["conditions"], "Regressed")
    assert regressed is not None and regressed["status"] == "False"


# --- verdicts that last as long as the object says so, and no longer -----------------------------


def netperf_series(p: Pass) -> list[str]:
    """The object's per-object series in the operator's exposition, as `name{labels} value`."""
    text = p.operator.runtime.metrics.exposition().decode()
    return sorted(line for line in text.splitlines() if line.startswith("netperf_") and 'name="np"' in line)


def regressed_at_run_4(**spec: Any) -> tuple[FakeKube, Pass]:
    """Three runs on the same link, then a fourth at half the throughput: Regressed (at a pValue
    that three runs can reach: the default wants a longer history)."""
    kube = FakeKube(netperf(regression={"baselineRuns": 3, "pValue": 0.05}, **spec))
    p = Pass(kube, at(12, 0, 1))
    for run, factor in enumerate((1.0, 1.02, 0.98, 0.5), 1):
        p.at(at(12, (run - 1) * 10, 1)).run()
        p.finish(run, scaled(fixture("tcp_stream"), factor))
    regressed = conditions.get(p.status["conditions"], "Regressed")
    assert regressed is not None and regressed["status"] == "True"
    return kube, p


def test_a_restarted_operators_first_pass_exports_the_regression_its_status_records():
    kube, before = regressed_at_run_4()
    exported = netperf_series(before)
    assert 'netperf_regressed{name="np",namespace="ns",run="4",test_type="TCP_STREAM"} 1.0' in exported
    # A new process (restart, failover, upgrade): empty caches, no series, one pass.
    after = Pass(kube, at(12, 35))
    assert netperf_series(after) == []
    after.run()
    assert after.kube.writes() == []  # nothing to write: the series come from the status as it is
    assert netperf_series(after) == exported
    # A restart in the middle of the next run: the latest result is the history's, still exported.
    after.at(at(12, 40, 1)).run()
    assert after.status["status"] in ("Initial", "Server") and after.status["run"] == 5
    again = Pass(kube, at(12, 40, 5))
    again.run()
    assert netperf_series(again) == exported


def test_a_regression_goes_on_under_the_run_it_started_at():
    _, p = regressed_at_run_4()
    p.at(at(12, 40, 1)).run()
    p.finish(5, scaled(fixture("tcp_stream"), 0.5))  # runs 4 and 5 against runs 2 and 3: still well below
    st = p.status
    assert st["regression"]["run"] == 5 and st["regression"]["regressedSince"] == 4
    assert st["regression"]["changeRun"] == 4
    assert "since run 4" in conditions.get(st["conditions"], "Regressed")["message"]
    assert 'netperf_regressed{name="np",namespace="ns",run="4",test_type="TCP_STREAM"} 1.0' in netperf_series(
        p
    )


def test_a_new_test_type_clears_the_verdict_and_its_series_and_its_results_replace_the_old_ones():
    kube, _ = regressed_at_run_4()
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"testType": "TCP_RR"}}))
    p = Pass(kube, at(12, 35))  # a process of its own: the first's Events met their spam filter
    p.run()
    st = p.status
    regressed = conditions.get(st["conditions"], "Regressed")
    assert (regressed["status"], regressed["reason"]) == ("False", "MeasurementChanged")
    assert (
        "testType TCP_STREAM -> TCP_RR" in regressed["message"]
        and "run 4 was regressed" in regressed["message"]
    )
    assert "regression" not in st and [h["run"] for h in st["history"]] == [1, 2, 3, 4]
    assert ("Normal", "RegressionCleared") in [(t, r) for t, r, _ in p.events]
    assert not [s for s in netperf_series(p) if s.startswith("netperf_regressed")]
    # The latest result is still run 4's (TCP_STREAM) until a TCP_RR run is done; then only TCP_RR.
    assert any('test_type="TCP_STREAM"' in s for s in netperf_series(p))
    p.at(at(12, 40, 1)).run()
    p.finish(5, fixture("tcp_rr"))
    st = p.status
    assert st["regression"]["reason"] == "NewBaseline" and st["regression"]["judged"] is False
    assert st["measurement"]["testType"] == "TCP_RR" and st["measurement"]["since"] == 5
    series = netperf_series(p)
    assert not any('test_type="TCP_STREAM"' in s for s in series), series
    assert 'netperf_regressed{name="np",namespace="ns",run="",test_type="TCP_RR"} 0.0' in series
    assert any(s.startswith("netperf_result_transactions_per_second") for s in series)


def test_removing_the_schedule_clears_the_verdict_and_its_series_and_keeps_the_history():
    kube, p = regressed_at_run_4()
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"schedule": None, "regression": None}}))
    p.at(at(12, 35)).run()
    st = p.status
    regressed = conditions.get(st["conditions"], "Regressed")
    assert (regressed["status"], regressed["reason"]) == ("False", "NotScheduled")
    assert "regression" not in st and [h["run"] for h in st["history"]] == [1, 2, 3, 4]
    assert not [s for s in netperf_series(p) if s.startswith("netperf_regressed")]
    # A restarted operator agrees: nothing to clear, nothing regressed.
    again = Pass(kube, at(12, 36))
    again.run()
    assert not [s for s in netperf_series(again) if s.startswith("netperf_regressed")]


def test_fewer_streams_start_a_new_baseline_instead_of_a_regression():
    """parallel 4 -> 1: the single stream's lower figure is another measurement, not a drop."""
    kube = FakeKube(netperf(parallel=4, regression={"baselineRuns": 3}))
    p = Pass(kube, at(12, 0, 1))
    for run in (1, 2, 3):
        p.at(at(12, (run - 1) * 10, 1)).run()
        p.finish(run, fixture("tcp_stream_parallel"))
    assert p.status["regression"]["reason"] == "WithinBaseline"
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"parallel": 1}}))
    p.at(at(12, 30, 1)).run()
    p.finish(4, scaled(fixture("tcp_stream"), 0.3))  # far below the 4 streams' sum
    st = p.status
    regressed = conditions.get(st["conditions"], "Regressed")
    assert (regressed["status"], regressed["reason"]) == ("False", "NewBaseline")
    assert "the measurement changed (parallel 4 -> 1)" in regressed["message"]
    assert st["regression"] == {
        "run": 4,
        "testType": "TCP_STREAM",
        "measurement": st["history"][-1]["measurement"],
        "judged": False,
        "regressed": False,
        "reason": "NewBaseline",
    }
    assert st["measurement"]["parallel"] == 1 and st["measurement"]["since"] == 4
    assert st["history"][-1]["measurement"] != st["history"][0]["measurement"]
    assert ("Warning", "Regressed") not in [(t, r) for t, r, _ in p.events]
    # The next single-stream runs are judged with the single-stream runs only: one is no baseline
    # the detector can test against, two are.
    p.at(at(12, 40, 1)).run()
    p.finish(5, scaled(fixture("tcp_stream"), 0.3))
    assert p.status["regression"]["reason"] == "TooFewSamples"
    p.at(at(12, 50, 1)).run()
    p.finish(6, scaled(fixture("tcp_stream"), 0.3))
    assert p.status["regression"]["reason"] == "WithinBaseline"
    assert p.status["regression"]["baselineRuns"] == 2


def test_a_single_sample_is_judged_by_the_run_means_and_no_figure_is_nan():
    """samples: 1 is judged: the detector's values are run means."""
    kube = FakeKube(netperf(samples=1))
    p = Pass(kube, at(12, 0, 1))
    one = "\n".join(fixture("tcp_stream").split("SAMPLE=")[1:2])
    for run, factor in ((1, 1.0), (2, 1.02), (3, 1.01)):
        p.at(at(12, (run - 1) * 10, 1)).run()
        p.finish(run, scaled("SAMPLE=" + one, factor))
    st = p.status
    assert [len(h["samples"]) for h in st["history"]] == [1, 1, 1]
    assert (st["regression"]["judged"], st["regression"]["reason"]) == (True, "WithinBaseline")
    assert st["regression"]["baselineRuns"] == 2
    regressed = conditions.get(st["conditions"], "Regressed")
    assert (regressed["status"], regressed["reason"]) == ("False", "WithinBaseline")
    json.dumps(st, allow_nan=False)  # raises on a NaN or an infinity anywhere


@pytest.mark.parametrize(
    ("typo", "field"),
    [({"schedule": "61 * * * *"}, "spec.schedule"), ({"timeZone": "Mars/Olympus_Mons"}, "spec.timeZone")],
)
def test_a_typo_in_the_schedule_leaves_the_last_result_and_the_history_alone(typo, field):
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    p.run()
    p.finish(1, fixture("tcp_stream"))
    before = p.status
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": typo}))
    p.at(at(12, 5)).run()
    st = p.status
    assert st["history"] == before["history"] and st["status"] == "Done"
    assert {k: st.get(k) for k in ("speedBitsPerSec", "run", "regression", "measurement")} == {
        k: before.get(k) for k in ("speedBitsPerSec", "run", "regression", "measurement")
    }
    degraded = conditions.get(st["conditions"], "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec") and field in degraded[
        "message"
    ]
    assert conditions.get(st["conditions"], "Stalled")["status"] == "True"
    assert "nextRunTime" not in st and st["observedGeneration"] == 2
    assert [(t, r) for t, r, _ in p.events] == [("Warning", "InvalidSpec")]
    # Fixed before the next due time: Degraded goes, the last result is Ready, the schedule goes on.
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"schedule": "*/10 * * * *", "timeZone": None}}))
    p.at(at(12, 6)).run()
    st = p.status
    assert conditions.get(st["conditions"], "Degraded")["status"] == "False"
    assert conditions.get(st["conditions"], "Ready")["status"] == "True"
    assert st["nextRunTime"] == "2026-01-05T12:10:00Z" and st["history"] == before["history"]


def test_no_due_time_is_met_while_the_spec_is_refused_and_the_latest_runs_once_fixed():
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    p.run()
    p.finish(1, fixture("tcp_stream"))
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"timeZone": "Mars/Olympus_Mons"}}))
    for minute in (5, 10, 20):
        p.at(at(12, minute, 1)).run()
        assert pods(kube) == [] and p.status["run"] == 1
    # As after the operator was down: the latest due time missed runs at once, once.
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"timeZone": None}}))
    p.at(at(12, 25)).run()
    st = p.status
    assert (st["run"], st["scheduledTime"]) == (2, "2026-01-05T12:20:00Z")
    assert st["skippedRuns"] == {"missed": 1}
    assert conditions.get(st["conditions"], "Degraded")["status"] == "False"


def test_a_typo_during_a_run_lets_that_run_finish_into_the_history():
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    p.run()
    p.finish(1, fixture("tcp_stream"))
    p.at(at(12, 10, 1)).run()
    assert p.status["run"] == 2 and p.status["status"] in ("Initial", "Server")
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"schedule": "61 * * * *"}}))
    p.finish(2, fixture("tcp_stream"))  # claimed with a valid spec (status.runSpec): it ends
    st = p.status
    assert st["status"] == "Done" and [h["run"] for h in st["history"]] == [1, 2]
    assert [h["result"] for h in st["history"]] == ["Done", "Done"]
    assert conditions.get(st["conditions"], "Degraded")["reason"] == "InvalidSpec"
    assert pods(kube) == []


def test_a_one_off_spec_error_after_a_schedule_is_its_own_run_and_not_in_the_history():
    kube = FakeKube(netperf())
    p = Pass(kube, at(12, 0, 1))
    p.run()
    p.finish(1, fixture("tcp_stream"))
    history = p.status["history"]
    # No schedule, and a combination the CEL rules refuse (an object that reached us without them).
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"schedule": None, "testType": "TCP_RR", "parallel": 2}}))
    p.at(at(12, 5)).run()
    st = p.status
    assert (st["status"], st["reason"]) == ("Error", "InvalidSpec")
    assert st["history"] == history and "scheduledTime" not in st


def test_a_one_off_run_under_way_when_a_refused_schedule_is_added_finishes_as_a_one_off():
    body = netperf()
    del body["spec"]["schedule"]
    kube = FakeKube(body)
    p = Pass(kube, at(12, 0, 1))
    p.run()
    names = desired.pod_names("np", "1")
    assert pods(kube) == [names.server]
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"schedule": "61 * * * *"}}))
    p.kubelet(names.server, READY)
    p.run()
    assert pods(kube) == sorted([names.client, names.server])  # not deleted: the run goes on
    p.client_ends(names.client, fixture("tcp_stream"))
    st = p.status
    assert st["status"] == "Done" and "history" not in st and pods(kube) == []
    assert conditions.get(st["conditions"], "Degraded")["reason"] == "InvalidSpec"


def client_command(kube: FakeKube, run: str) -> list[str]:
    """The command of the run's client pod, as the fake API server holds it."""
    pod = kube.object(namespaced(NS, "pods", desired.pod_names("np", run).client))
    return list(pod["spec"]["containers"][0]["command"])


def started(p: Pass) -> str:
    [message] = [m for _, reason, m in p.events if reason == "TestStarted"]
    return message


def test_a_scheduled_netperf_without_samples_runs_five_and_says_so():
    """Every scheduled result is judged for a regression: 5 samples per run, the detector's goal."""
    kube = FakeKube(netperf(samples=None))
    p = Pass(kube, at(12, 0, 1))
    p.run()
    assert "samples" not in kube.object(NP_PATH)["spec"]
    assert p.status["runSpec"]["samples"] == 5 and "5 x 10s" in started(p)
    assert "not promised" not in started(p)
    names = desired.pod_names("np", "r1")
    p.kubelet(names.server, READY)
    p.run()
    assert client_command(kube, "r1")[3:5] == ["netperf-samples", "5"]
    p.client_ends(names.client, resampled(fixture("tcp_stream"), 5))
    st = p.status
    assert st["status"] == "Done" and len(st["history"][-1]["samples"]) == 5
    assert st["measurement"]["samples"] == 5
    regressed = conditions.get(st["conditions"], "Regressed")
    assert regressed is not None and "not promised" not in regressed["message"]


@pytest.mark.parametrize(("parallel", "samples"), [(2, 5), (4, 5), (5, 4), (6, 4), (7, 3), (8, 3)])
def test_parallel_streams_leave_room_for_fewer_samples_and_the_event_says_the_goal_is_not_promised(
    parallel, samples
):
    kube = FakeKube(netperf(samples=None, parallel=parallel))
    p = Pass(kube, at(12, 0, 1))
    p.run()
    assert p.status["runSpec"]["samples"] == samples
    assert ("not promised" in started(p)) == (samples < schema.DETECTION_SAMPLES)
    p.kubelet(desired.pod_names("np", "r1").server, READY)
    p.run()
    command = client_command(kube, "r1")
    assert command[3:5] == ["netperf-samples", str(samples)] and parallel * samples <= schema.MAX_RUNS
    pod = kube.object(namespaced(NS, "pods", desired.pod_names("np", "r1").client))
    assert {"name": "NETPERF_STREAMS", "value": str(parallel)} in pod["spec"]["containers"][0]["env"]


def test_an_explicit_samples_is_kept_and_a_regressed_condition_says_the_goal_is_not_promised():
    kube = FakeKube(netperf())  # samples: 3, set
    p = Pass(kube, at(12, 0, 1))
    for run in (1, 2, 3):
        p.at(at(12, (run - 1) * 10, 1)).run()
        assert p.status["runSpec"]["samples"] == 3
        p.kubelet(desired.pod_names("np", f"r{run}").server, READY)
        p.run()
        assert client_command(kube, f"r{run}")[3:5] == ["netperf-samples", "3"]
        p.client_ends(desired.pod_names("np", f"r{run}").client, fixture("tcp_stream"))
    assert p.status["measurement"]["samples"] == 3
    regressed = conditions.get(p.status["conditions"], "Regressed")
    assert regressed is not None and "3 samples per run" in regressed["message"]
    assert "not promised" in regressed["message"]


def test_a_netperf_without_a_schedule_runs_three_samples():
    kube = FakeKube({**netperf(), "spec": {}})
    p = Pass(kube, at(12, 0, 1))
    p.run()
    names = desired.pod_names("np", kube.object(NP_PATH)["metadata"]["generation"])
    p.kubelet(names.server, READY)
    p.run()
    assert client_command(kube, str(kube.object(NP_PATH)["metadata"]["generation"]))[3:5] == [
        "netperf-samples",
        "3",
    ]


def test_a_schedule_added_during_a_one_off_run_leaves_that_runs_samples_alone():
    """The one-off run was started with 3 samples; adding a schedule (default 5) must not make
    its 3-sample result unreadable: it ends as the one-off it was."""
    kube = FakeKube({**netperf(), "spec": {}})
    p = Pass(kube, at(12, 0, 1))
    p.run()
    generation = kube.object(NP_PATH)["metadata"]["generation"]
    names = desired.pod_names("np", generation)
    p.kubelet(names.server, READY)
    p.run()
    assert client_command(kube, str(generation))[3:5] == ["netperf-samples", "3"]
    asyncio.run(kube.merge_patch(NP_PATH, {"spec": {"schedule": "*/10 * * * *"}}))
    p.at(at(12, 0, 30)).run()
    p.client_ends(names.client, fixture("tcp_stream"))
    st = p.status
    assert st["status"] == "Done" and len(st["throughputBitsPerSec"]["samples"]) == 3
    # The next run is the schedule's: 5 samples.
    p.at(at(12, 10, 1)).run()
    assert p.status["runSpec"]["samples"] == 5
