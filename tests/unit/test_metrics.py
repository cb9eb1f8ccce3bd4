import prometheus_client
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge

from operators import description
from shared.controller.metrics import (
    RECONCILE_BUCKETS,
    RESULTS,
    Metrics,
    ObjectGauge,
)
from tests.framework.properties import examples


def test_all_results_initialised_to_zero():
    m = Metrics()
    m.init_controllers(["a", "b"], 6)
    for c in ("a", "b"):
        for result in RESULTS:
            assert (
                m.registry.get_sample_value(
                    "controller_runtime_reconcile_total", {"controller": c, "result": result}
                )
                == 0.0
            )
        assert (
            m.registry.get_sample_value("controller_runtime_max_concurrent_reconciles", {"controller": c})
            == 6
        )


def test_exposition_has_no_created_series_and_standard_buckets():
    m = Metrics()
    m.init_controllers(["a"], 6)
    m.reconcile_time.labels("a").observe(0.2)
    text = m.exposition().decode()
    assert "_created" not in text
    assert 'le="0.005"' in text and 'le="60.0"' in text
    assert len(RECONCILE_BUCKETS) == 40


def test_registries_are_private():
    a, b = Metrics(), Metrics()
    a.init_controllers(["x"], 1)
    a.reconcile_total.labels("x", "success").inc()
    assert (
        b.registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "x", "result": "success"}
        )
        is None
    )


def test_a_deleted_objects_series_go_also_where_they_have_more_labels_than_namespace_and_name():
    m = Metrics(domain=description("netperf").metrics)
    m.gauge("netperf_failed").labels("ns", "np").set(1)
    m.gauge("netperf_regressed").labels("ns", "np", "TCP_STREAM", "3").set(1)
    m.gauge("netperf_result_latency_seconds").labels("ns", "np", "TCP_RR", "p99").set(0.001)
    m.gauge("netperf_regressed").labels("ns", "other", "TCP_STREAM", "").set(0)
    m.forget_object("ns", "np")
    text = m.exposition().decode()
    assert 'name="np"' not in text
    assert 'netperf_regressed{name="other",namespace="ns",run="",test_type="TCP_STREAM"} 0.0' in text


def test_an_objects_series_set_whole_keep_those_that_stay_and_drop_the_others():
    m = Metrics(domain=description("netperf").metrics)
    gauge = m.gauge("netperf_result_latency_seconds")
    assert isinstance(gauge, ObjectGauge)
    gauge.labels("ns", "np", "TCP_RR", "p99").set(0.002)
    gauge.labels("ns", "np", "TCP_RR", "p50").set(0.001)
    gauge.labels("ns", "other", "TCP_RR", "p99").set(0.003)
    gauge.set_object("ns", "np", {("TCP_RR", "p99"): 0.004, ("TCP_CRR", "p99"): 0.005})
    assert gauge.values == {
        ("ns", "np", "TCP_RR", "p99"): 0.004,
        ("ns", "np", "TCP_CRR", "p99"): 0.005,
        ("ns", "other", "TCP_RR", "p99"): 0.003,
    }
    gauge.set_object("ns", "np", {})
    assert gauge.values == {("ns", "other", "TCP_RR", "p99"): 0.003}


def test_per_object_series_scrape_as_prometheus_clients_own_would():
    """The dict-backed per-object families give the exposition prometheus_client's Gauge and
    Counter give for the same calls (names, HELP, TYPE, labels, values, order)."""
    own = description("webserver").metrics
    compact = Metrics(domain=own)
    assert all(not isinstance(m, Gauge | Counter) for m in (compact.gauge(own[0].name),))
    plain = CollectorRegistry(auto_describe=True)
    made = {
        s.name: (Counter if s.kind == "counter" else Gauge)(s.name, s.help, s.labels, registry=plain)
        for s in own
    }
    for metrics in (compact._made, made):
        metrics["webserver_desired_replicas"].labels("ns", "a").set(3)
        metrics["webserver_desired_replicas"].labels(namespace="ns", name="b").set(1)
        metrics["webserver_ready_replicas"].labels("ns", "a").set(2)
        metrics["webserver_rollbacks_total"].labels("ns", "a")
        metrics["webserver_rollbacks_total"].labels("ns", "b").inc()
        metrics["webserver_rollbacks_total"].labels("ns", "b").inc(2)
        metrics["webserver_ready_replicas"].labels("ns", "c").set(0)
        metrics["webserver_ready_replicas"].remove("ns", "c")
    text = compact.exposition().decode()
    assert prometheus_client.generate_latest(plain).decode() in text
    assert 'webserver_rollbacks_total{name="b",namespace="ns"} 3.0' in text
    compact.forget_object("ns", "a")
    assert 'name="a"' not in compact.exposition().decode()
    with pytest.raises(KeyError):
        compact.gauge("webserver_ready_replicas").remove("ns", "a")
    with pytest.raises(ValueError):
        compact.counter("webserver_rollbacks_total").labels("ns", "b").inc(-1)


def test_a_per_object_series_costs_a_dict_entry_not_a_child_with_a_lock():
    m = Metrics(domain=description("webserver").metrics)
    gauge = m.gauge("webserver_desired_replicas")
    assert isinstance(gauge, ObjectGauge)
    gauge.labels("ns", "a").set(1)
    assert gauge.values == {("ns", "a"): 1.0}


OBJECTS = st.sampled_from([("ns", "a"), ("ns", "b"), ("other", "a")])
RESTS = st.sampled_from([("TCP_RR", "p50"), ("TCP_RR", "p99"), ("TCP_CRR", "p99")])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), OBJECTS, RESTS, st.floats(0, 1)),
        st.tuples(st.just("remove"), OBJECTS, RESTS),
        st.tuples(st.just("forget"), OBJECTS),
        st.tuples(st.just("set_object"), OBJECTS, st.dictionaries(RESTS, st.floats(0, 1), max_size=3)),
        st.tuples(st.just("clear")),
    ),
    max_size=40,
)


@settings(max_examples=examples(300))
@given(OPS)
def test_an_object_familys_index_agrees_with_its_series_whatever_the_calls(ops):
    """Set, remove, forget, set whole and clear, in any order: the same series as a plain dict."""
    gauge = Metrics(domain=description("netperf").metrics).gauge("netperf_result_latency_seconds")
    assert isinstance(gauge, ObjectGauge)
    model: dict[tuple[str, ...], float] = {}
    for op, *args in ops:
        if op == "set":
            (obj, rest, value) = args
            gauge.labels(*obj, *rest).set(value)
            model[(*obj, *rest)] = value
        elif op == "remove":
            (obj, rest) = args
            if (*obj, *rest) in model:
                gauge.remove(*obj, *rest)
                del model[(*obj, *rest)]
        elif op == "forget":
            (obj,) = args
            gauge.remove_by_labels({"namespace": obj[0], "name": obj[1]})
            model = {k: v for k, v in model.items() if k[:2] != obj}
        elif op == "set_object":
            (obj, series) = args
            gauge.set_object(*obj, series)
            model = {k: v for k, v in model.items() if k[:2] != obj}
            model.update({(*obj, *rest): v for rest, v in series.items()})
        else:
            gauge.clear()
            model = {}
        assert gauge.values == model
        assert gauge._objects == {o: {k for k in model if k[:2] == o} for o in {k[:2] for k in model}}
