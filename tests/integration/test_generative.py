"""Generated custom resources through the whole admission -> children path.

For each CRD in ``bundle/manifests``, hypothesis draws specs from the CRD's own
``openAPIV3Schema`` (types, enums, bounds, patterns, int-or-string, maps), valid and near-valid
(bounds +-1, odd quantities, names starting with a digit, dotted or 63/64 characters long), and
sends each to the real API server with ``dryRun=All``: the schema and its CEL rules decide. For
every object accepted, the children the operator's desired-state code renders from it (pods,
Deployment, Service) are sent with ``dryRun=All`` too, and for a TDSet the HPA it would hold to
each entry's floor and cap (``autoscalers``). A child refused for an accepted object is a
hole in the schema (or a renderer bug): the test fails with the object and the refusal.

Runs with a fixed seed and a few examples per kind in ``make test``; for a longer search set
``GENERATIVE_EXAMPLES`` (examples per kind), e.g. ``GENERATIVE_EXAMPLES=2000 pytest
tests/integration/test_generative.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from operators.netperf import desired as netperf
from operators.netperf.schema import CRD as NETPERF_CRD
from operators.netperf.schema import MAX_RUNS, combination_errors
from operators.tdset import desired as tdset
from operators.tdset import schedule
from operators.webserver import desired as webserver
from shared.api.validation import SchemaValidator

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("GENERATIVE_EXAMPLES", "40"))
ODD_QUANTITIES = ["1E.5", "-1", "0", "1e3", "1e-10", "1.5Gi", "250m", ".5", "5.", "1E", "1e999", "+1", "0.1n"]
INT_SPAN = 10**6


def crd(plural: str) -> dict[str, Any]:
    for path in (REPO / "bundle" / "manifests").glob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") == "CustomResourceDefinition" and doc["spec"]["names"]["plural"] == plural:
            return doc
    raise LookupError(plural)


def integers(schema: dict[str, Any]) -> st.SearchStrategy[int]:
    lo, hi = schema.get("minimum", -INT_SPAN), schema.get("maximum", INT_SPAN)
    edges = [lo - 1, lo, hi, hi + 1]
    return st.one_of(st.integers(lo, hi), st.sampled_from(edges))


def strings(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    if "pattern" in schema:
        drawn = st.from_regex(schema["pattern"], fullmatch=True)
    else:
        drawn = st.text(min_size=schema.get("minLength", 0), max_size=20)
    limit = schema.get("maxLength")
    return drawn.filter(lambda s: limit is None or len(s) <= limit + 1)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values for a structural schema: mostly valid, sometimes just outside a bound."""
    kind = schema.get("type")
    if "enum" in schema:
        kind = "enum"
    elif schema.get("x-kubernetes-int-or-string"):
        kind = "int-or-string"
    elif kind == "object" and "additionalProperties" in schema:
        kind = "map"
    return BUILDERS.get(kind, lambda _: st.nothing())(schema)


def objects(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props, required = schema.get("properties", {}), set(schema.get("required", []))
    return st.fixed_dictionaries(
        {k: from_schema(v) for k, v in props.items() if k in required},
        optional={k: from_schema(v) for k, v in props.items() if k not in required},
    )


BUILDERS = {
    "enum": lambda s: st.sampled_from(s["enum"]),
    "int-or-string": lambda s: st.one_of(st.integers(-2, 2**40), st.sampled_from(ODD_QUANTITIES), strings(s)),
    "integer": integers,
    "number": lambda s: st.floats(allow_nan=False, allow_infinity=False),
    "boolean": lambda s: st.booleans(),
    "string": strings,
    "array": lambda s: st.lists(from_schema(s["items"]), max_size=min(s.get("maxItems", 3), 3)),
    "map": lambda s: st.dictionaries(
        st.one_of(st.sampled_from(["cpu", "memory", "ephemeral-storage"]), st.text(max_size=8)),
        from_schema(s["additionalProperties"]),
        max_size=3,
    ),
    "object": objects,
}


NAMES = st.one_of(
    st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[0-9][-a-z0-9]{0,8}[a-z0-9]", fullmatch=True),  # digit first
    st.from_regex(r"[a-z][a-z0-9]{0,5}\.[a-z][a-z0-9]{0,5}", fullmatch=True),  # dotted
    st.sampled_from(["a" * 63, "b" * 64, "1" * 63]),
)


def children(plural: str, owner: dict[str, Any]) -> list[dict[str, Any]]:
    spec = owner["spec"]
    if plural == "webservers":
        return [
            c for c in (webserver.pod_manifest(owner, spec, 0), webserver.service_manifest(owner, spec)) if c
        ]
    if plural == "tdsets":
        if "container" not in spec:  # spec.scaleTargetRef: it scales a workload, it has no children
            return []
        deployment = tdset.deployment_manifest(owner, spec, int(spec["defaultReplica"]))
        return [c for c in (deployment, tdset.service_manifest(owner, spec)) if c]
    return [netperf.server_pod(owner, spec), netperf.client_pod(owner, spec, "10.96.0.10")]


def autoscalers(owner: dict[str, Any]) -> list[dict[str, Any]]:
    """The HPA (of its own 1..3 replicas) as the TDSet would hold it while each of its entries
    decides: whatever admission accepts must give an HPA the API server
    accepts (``1 <= minReplicas <= maxReplicas``). None for a spec the controller refuses."""
    spec = owner["spec"]
    if schedule.check(spec):
        return []
    calendar, _ = schedule.calendar_from(spec)
    top = calendar.bounds
    entries = [(calendar.schedule.default, top), (calendar.holiday_replicas or 0, top)]
    entries += [(w.replicas, w.bounds.over(top)) for w in calendar.schedule.windows]
    entries += [(o.replicas, o.bounds.over(top)) for o in calendar.overrides]
    own = tdset.AutoscalerView("", "h", "t", 1, 3)
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for replicas, bounds in entries:
        held = tdset.autoscaler_bounds(replicas, bounds, own)
        patch = tdset.floor_patch(own, "u", held.floor, held.cap)["spec"]
        low, high = patch["minReplicas"], patch.get("maxReplicas", own.max_replicas)
        found[(low, high)] = {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "t"},
                "minReplicas": low,
                "maxReplicas": high,
            },
        }
    return list(found.values())


def dry_run_child(api: client.ApiClient, namespace: str, child: dict[str, Any]) -> None:
    kind = child["kind"]
    if kind == "Pod":
        client.CoreV1Api(api).create_namespaced_pod(namespace, child, dry_run="All")
    elif kind == "Service":
        client.CoreV1Api(api).create_namespaced_service(namespace, child, dry_run="All")
    elif kind == "Deployment":
        client.AppsV1Api(api).create_namespaced_deployment(namespace, child, dry_run="All")
    elif kind == "HorizontalPodAutoscaler":
        client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(
            namespace, child, dry_run="All"
        )
    else:
        raise AssertionError(f"no dry run for {kind}")


def specs(plural: str, schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Specs from the schema; a TDSet's also as its CEL rule wants them half the time (exactly one
    of container and scaleTargetRef; service only with container), or most would be refused."""
    if plural != "tdsets":
        return from_schema(schema)
    props = schema["properties"]

    def variant(keep: str, drop: tuple[str, ...]) -> dict[str, Any]:
        kept = {k: v for k, v in props.items() if k not in drop}
        return {**schema, "properties": kept, "required": [*schema.get("required", []), keep]}

    own = variant("container", ("scaleTargetRef",))
    target = variant("scaleTargetRef", ("container", "service"))
    return st.one_of(from_schema(own), from_schema(target), from_schema(schema))


@pytest.mark.parametrize("plural", ["webservers", "tdsets", "netperfs"])
def test_every_accepted_object_has_children_the_api_server_accepts(cluster, namespace, plural):
    definition = crd(plural)
    group = definition["spec"]["group"]
    (version,) = definition["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    objects = client.CustomObjectsApi(cluster.api)
    tally = {"accepted": 0, "refused": 0}

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(name=NAMES, spec=specs(plural, schema))
    def check(name: str, spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": f"{group}/{version['name']}",
            "kind": definition["spec"]["names"]["kind"],
            "metadata": {"name": name},
            "spec": spec,
        }
        try:
            owner = objects.create_namespaced_custom_object(
                group, version["name"], namespace, plural, body, dry_run="All"
            )
        except ApiException as exc:
            assert exc.status in (400, 422), exc.body  # refused, as the schema says
            tally["refused"] += 1
            return
        tally["accepted"] += 1
        owner["metadata"].setdefault("generation", 1)
        for child in children(plural, owner) + (autoscalers(owner) if plural == "tdsets" else []):
            try:
                dry_run_child(cluster.api, namespace, child)
            except ApiException as exc:
                pytest.fail(
                    f"{plural} {name} accepted with spec {spec}, "
                    f"but its {child['kind']} was refused: {exc.body}"
                )

    check()
    # Both sides of the schema were exercised, or the generator is not testing anything.
    assert tally["accepted"] > 0 and tally["refused"] > 0, tally


@st.composite
def netperf_samples_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Netperf specs over what decides a run's samples: parallel and samples (each set or not,
    up to one past their bounds), a schedule with or without regression settings, the test type."""
    spec = {
        "testType": draw(st.one_of(st.none(), st.sampled_from(["TCP_STREAM", "UDP_STREAM", "TCP_RR"]))),
        "parallel": draw(st.one_of(st.none(), st.integers(1, 9))),
        "samples": draw(st.one_of(st.none(), st.integers(1, 11))),
        "schedule": draw(st.one_of(st.none(), st.just("@hourly"))),
    }
    if spec["schedule"] and draw(st.booleans()):
        spec["regression"] = {"pValue": 0.001}
    return {k: v for k, v in spec.items() if v is not None}


def test_netperf_samples_admitted_by_the_cel_rules_run_and_their_pods_are_accepted(cluster, namespace):
    """What the schema and its CEL rules admit is what the controller's Python twins admit, and
    runs samples within samples x parallel whose pods the API server accepts; a spec without
    samples is never refused for them."""
    objects = client.CustomObjectsApi(cluster.api)
    validator = SchemaValidator(NETPERF_CRD.openapi_schema())
    tally = {"accepted": 0, "refused": 0}

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None)
    @given(spec=netperf_samples_specs())
    def check(spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": "app.example.com/v1alpha1",
            "kind": "Netperf",
            "metadata": {"name": "s"},
            "spec": spec,
        }
        twins = validator.errors(spec) + combination_errors(spec)
        try:
            owner = objects.create_namespaced_custom_object(
                "app.example.com", "v1alpha1", namespace, "netperfs", body, dry_run="All"
            )
        except ApiException as exc:
            assert exc.status == 422 and twins, (spec, exc.body)
            assert "samples" in spec or "samples x parallel" not in exc.body, (spec, exc.body)
            tally["refused"] += 1
            return
        assert not twins, (spec, twins)
        tally["accepted"] += 1
        assert "samples" not in owner["spec"] or owner["spec"]["samples"] == spec["samples"]
        full = netperf.effective(owner["spec"])
        assert full["samples"] >= 1 and full["samples"] * full["parallel"] <= MAX_RUNS
        owner["metadata"].setdefault("generation", 1)
        for child in children("netperfs", owner):
            dry_run_child(cluster.api, namespace, child)

    check()
    assert tally["accepted"] > 0 and tally["refused"] > 0, tally
