"""The samples of a run: spec.samples when set, else 5 with a schedule (every result is judged for
a regression, and the detector's goal needs 5), 3 without, never more than parallel leaves room
for in the client's termination message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from operators.netperf import desired, measurement, schedule, schema
from operators.netperf.schema import CRD, MAX_PARALLEL, MAX_RUNS, MAX_SAMPLES, combination_errors
from shared.api.validation import SchemaValidator

VALIDATOR = SchemaValidator(CRD.openapi_schema())
OWNER = {
    "apiVersion": "app.example.com/v1alpha1",
    "kind": "Netperf",
    "metadata": {"name": "np", "namespace": "ns", "uid": "u1", "generation": 1},
}


def absent_or(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    """Specs over what decides the samples: parallel, samples (each set or not), a schedule (with
    or without regression settings), and the test type parallel needs."""
    spec = {
        "testType": draw(absent_or(st.sampled_from(schema.TEST_TYPES))),
        "parallel": draw(absent_or(st.integers(1, MAX_PARALLEL))),
        "samples": draw(absent_or(st.integers(1, MAX_SAMPLES))),
        "schedule": draw(absent_or(st.sampled_from(["@hourly", "*/10 * * * *"]))),
    }
    if spec["schedule"] and draw(st.booleans()):
        spec["regression"] = {"pValue": draw(st.sampled_from([0.0005, 0.01])), "minChangePercent": 10}
    return {k: v for k, v in spec.items() if v is not None}


def admitted(spec: dict[str, Any]) -> bool:
    """Whether the schema and its CEL rules admit ``spec`` (the rules through their Python twins,
    which tests/integration/test_generative.py holds to the API server's CEL)."""
    return not VALIDATOR.errors(spec) and not combination_errors(spec)


@pytest.mark.parametrize(
    ("spec", "samples"),
    [
        ({}, 3),
        ({"parallel": 8}, 3),
        ({"schedule": "@hourly"}, 5),
        ({"schedule": "@hourly", "regression": {"pValue": 0.001}}, 5),
        *(
            ({"schedule": "@hourly", "parallel": p}, n)
            for p, n in ((2, 5), (4, 5), (5, 4), (6, 4), (7, 3), (8, 3))
        ),
        ({"schedule": "@hourly", "samples": 3}, 3),
        ({"schedule": "@hourly", "samples": 10}, 10),
        ({"samples": 1}, 1),
    ],
)
def test_the_default_follows_the_schedule_and_parallel_and_an_explicit_value_wins(spec, samples):
    assert schema.samples(spec) == samples
    assert desired.effective(spec)["samples"] == samples
    assert desired.client_pod(OWNER, spec, "10.0.0.5")["spec"]["containers"][0]["command"][4] == str(samples)


def test_the_schema_has_no_default_for_samples_so_unset_stays_unset():
    """A schema default would be persisted into every new object: the controller could not tell
    unset from 3."""
    props = CRD.openapi_schema()["properties"]["spec"]["properties"]
    assert "default" not in props["samples"]
    assert "samples" not in schema.DEFAULTS


@given(specs())
def test_whatever_is_admitted_runs_samples_that_fit_and_the_controller_agrees(spec):
    if not admitted(spec):
        # Refused at admission only for an explicit value that does not fit (or parallel with an RR type).
        assert spec.get("samples") is not None or spec.get("testType") not in (None, *schema.STREAM_TYPES)
        return
    full = desired.effective(spec)
    n, parallel = int(full["samples"]), int(full["parallel"])
    assert 1 <= n <= MAX_SAMPLES and parallel * n <= MAX_RUNS
    if spec.get("samples") is not None:
        assert n == spec["samples"]
    elif spec.get("schedule"):
        assert n == min(schema.DETECTION_SAMPLES, MAX_RUNS // parallel)
    else:
        assert n == schema.DEFAULT_SAMPLES
    # The child carries it, and a scheduled run's spec as claimed (status.runSpec) keeps it.
    pod = desired.client_pod(OWNER, spec, "10.0.0.5")
    container = pod["spec"]["containers"][0]
    assert container["command"][3:5] == ["netperf-samples", str(n)]
    assert {"name": "NETPERF_STREAMS", "value": str(parallel)} in container["env"]
    claimed = schedule.run_spec(full)
    assert desired.effective(claimed)["samples"] == n and not VALIDATOR.errors(claimed)
    assert desired.timeout_seconds(spec) == spec.get("timeoutSeconds", 60 + n * (int(full["duration"]) + 15))


@given(specs(), st.integers(1, MAX_SAMPLES), st.integers(1, MAX_SAMPLES))
def test_the_measurement_key_does_not_depend_on_the_samples(spec, a, b):
    """An object whose samples change (a stored 3, a new default 5) keeps its baseline."""
    one = measurement.with_key(desired.effective({**spec, "samples": a}))
    other = measurement.with_key(desired.effective({**spec, "samples": b}))
    assert one["key"] == other["key"] and (one["samples"], other["samples"]) == (a, b)
    unset = {k: v for k, v in spec.items() if k != "samples"}
    assert measurement.with_key(desired.effective(unset))["key"] == one["key"]
