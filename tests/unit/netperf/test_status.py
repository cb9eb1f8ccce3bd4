"""Netperf status through a run: the phase conditions and the readiness ones GitOps tools read."""

import datetime
from pathlib import Path

from operators.netperf import parse, status
from operators.netperf.desired import pod_names
from shared.api import conditions

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def readiness(st):
    return {
        t: (c["status"], c["reason"])
        for t in (conditions.RECONCILING, conditions.STALLED, conditions.READY)
        if (c := conditions.get(st["conditions"], t)) is not None
    }


def run():
    started = status.started(current={}, generation=2, names=pod_names("np", 2), now=NOW)
    server = status.phase(
        current=started, phase="Server", summary="waiting for server pod np-server-2", now=NOW
    )
    test = status.phase(current=server, phase="Test", summary="client pod running", now=NOW)
    return started, server, test


def test_reconciling_while_the_run_is_pending_or_running():
    for st in run():
        phase = st["status"]
        assert readiness(st) == {
            "Reconciling": ("True", phase),
            "Stalled": ("False", phase),
            "Ready": ("False", phase),
        }, phase
        assert st["observedGeneration"] == 2
    assert conditions.get(run()[1]["conditions"], conditions.RECONCILING)["message"] == (
        "waiting for server pod np-server-2"
    )


def test_ready_once_done():
    result = parse.Result("TCP_STREAM", throughput_bits=parse.stats([9e9, 9.2e9]))
    done = status.done(current=run()[2], result=result, now=NOW)
    assert readiness(done) == {
        "Reconciling": ("False", "Completed"),
        "Stalled": ("False", "Completed"),
        "Ready": ("True", "Completed"),
    }
    assert conditions.get(done["conditions"], conditions.READY)["observedGeneration"] == 2


def test_a_failed_run_stalls_with_its_reason():
    failed = status.error(current=run()[2], reason="ClientTimeout", message="did not finish", now=NOW)
    assert readiness(failed) == {
        "Reconciling": ("False", "ClientTimeout"),
        "Stalled": ("True", "ClientTimeout"),
        "Ready": ("False", "ClientTimeout"),
    }
    assert conditions.get(failed["conditions"], conditions.STALLED)["message"] == "did not finish"


def test_an_invalid_spec_stalls_at_the_new_generation_and_a_new_run_clears_it():
    invalid = status.error(
        current={}, reason="InvalidSpec", message="spec.samples: bad", now=NOW, generation=3
    )
    assert invalid["observedGeneration"] == 3
    assert readiness(invalid)["Stalled"] == ("True", "InvalidSpec")
    rerun = status.started(current=invalid, generation=4, names=pod_names("np", 4), now=NOW)
    assert readiness(rerun) == {
        "Reconciling": ("True", "Initial"),
        "Stalled": ("False", "Initial"),
        "Ready": ("False", "Initial"),
    }


def test_the_headline_is_the_figure_of_the_test_type():
    fixtures = Path(__file__).parent / "fixtures"

    def headline(name: str, test_type: str, parallel: int = 1) -> str:
        text = (fixtures / f"{name}.txt").read_text()
        return status.headline(parse.parse(text, test_type, 3, parallel))

    assert headline("tcp_stream", "TCP_STREAM").endswith(" Gbit/s")
    assert headline("tcp_stream_parallel", "TCP_STREAM", 4).endswith(" Gbit/s (4 streams)")
    assert headline("tcp_rr", "TCP_RR").endswith(" trans/s, p99 86us")  # (175 + 42 + 40) / 3 us
    crr = parse.parse((fixtures / "tcp_crr.txt").read_text(), "TCP_CRR", 3)
    assert crr.transactions is not None
    assert (
        status.headline(crr)
        == f"{crr.transactions.mean:.0f} conn/s, p99 {crr.latency_seconds['p99'] * 1e6:.0f}us"
    )
    assert "trans/s, p99 " in headline("udp_rr", "UDP_RR")
