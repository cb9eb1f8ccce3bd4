"""The Netperf operator as data: what the tools, the entry point and the builder read.

See ``shared.api.description``; the API itself stays in ``.schema``, the logic in
``.reconciler``.
"""

from __future__ import annotations

from operators.netperf import access, schema
from shared.api.description import NAMESPACED, Alert, Image, MetricSpec, OperatorDescription, Panel, Resource

OBJECT = "{{namespace}}/{{name}}"  # Grafana legend of a per-object series
RESULT = (*NAMESPACED, "test_type")  # the labels of a per-result series

DESCRIPTION = OperatorDescription(
    name="netperf",
    app=schema.APP,
    crd=schema.CRD,
    access=access.POLICIES,
    # create/delete the server and client pods; get after AlreadyExists and for the client's
    # output (the log is read from the pod's termination message); patch adopts an orphan.
    resources=(
        Resource("Pod", "v1", "pods", verbs=("create", "delete", "get", "patch")),
        # The service path's Service per run: create, get after AlreadyExists (whose is it?), delete.
        Resource("Service", "v1", "services", verbs=("create", "delete", "get")),
    ),
    # The host path: a namespace's Pod Security enforce label, read before a hostNetwork run so a
    # namespace that forbids it gets a clear reason instead of pods the API server refuses.
    extra_cluster_rules=({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},),
    display="Netperf",
    summary="A one-step pod-to-pod network benchmark: a netserver pod, a netperf client pod, results in "
    "status.",
    tagline="Netperf benchmarks",
    keywords=("netperf", "network benchmark"),
    catalog_text="""\
## Netperf
Create a `Netperf` and the operator runs a netperf server pod and a client pod against it,
records throughput per sample (bits/s) with mean, standard deviation and 95% confidence
interval (TCP_RR, UDP_RR: transactions/s and latency percentiles; TCP_CRR: connections/s;
`parallel`: the sum of concurrent streams and each stream's) in the status, and deletes the pods.

```yaml
apiVersion: app.example.com/v1alpha1
kind: Netperf
metadata: {name: np}
spec: {serverNode: node-a, clientNode: node-b, testType: TCP_STREAM, samples: 3}
```
""",
    example="examples/netperf.yaml",
    metrics=(
        MetricSpec(
            "netperf_throughput_bytes_per_second",
            "gauge",
            "Mean throughput of the latest finished STREAM test of a Netperf, in bytes per second",
            NAMESPACED,
        ),
        MetricSpec(
            "netperf_failed", "gauge", "1 when a Netperf's latest test ended in Error, else 0", NAMESPACED
        ),
        MetricSpec(
            "netperf_tests_total", "counter", "Finished Netperf tests by result (done or error)", ("result",)
        ),
        MetricSpec(
            "netperf_result_throughput_bytes_per_second",
            "gauge",
            "Mean throughput of a Netperf's latest result (STREAM tests), by test type, in bytes per second",
            RESULT,
        ),
        MetricSpec(
            "netperf_result_transactions_per_second",
            "gauge",
            "Mean transactions per second of a Netperf's latest result (RR types; TCP_CRR: connections)",
            RESULT,
        ),
        MetricSpec(
            "netperf_result_latency_seconds",
            "gauge",
            "Latency percentiles of a Netperf's latest result (RR types), in seconds; percentile is "
            "p50, p90 or p99 (not quantile: a gauge, not a summary)",
            (*RESULT, "percentile"),
        ),
        MetricSpec(
            "netperf_regressed",
            "gauge",
            "1 when a scheduled Netperf's latest result is a regression against the earlier results of "
            "its measurement, else 0; run: the first run of the regression (empty when 0). From "
            "status.regression on every pass; gone when the schedule or the measurement changes",
            (*RESULT, "run"),
        ),
    ),
    alerts=(
        Alert(
            "NetperfTestFailed",
            "netperf_failed == 1",
            for_="0m",
            severity="warning",
            summary="Netperf {{ $labels.namespace }}/{{ $labels.name }} ended in Error",
            description="The latest test of Netperf {{ $labels.namespace }}/{{ $labels.name }} failed; "
            "status.reason and status.message say why.",
        ),
        Alert(
            "NetperfRegressed",
            "netperf_regressed == 1",
            for_="0m",
            severity="warning",
            summary="Netperf {{ $labels.namespace }}/{{ $labels.name }} ({{ $labels.test_type }}) regressed "
            "at run {{ $labels.run }}",
            description="The scheduled results of Netperf {{ $labels.namespace }}/{{ $labels.name }} "
            "are significantly below the baseline of their measurement since run {{ $labels.run }} "
            "(status.history has it); its Regressed condition and status.regression give the latest "
            "run's means, change and p-value.",
        ),
    ),
    panels=(
        Panel("Netperf throughput", (("netperf_throughput_bytes_per_second", OBJECT),), "Bps"),
        Panel(
            "Netperf results (trend)",
            (
                ("netperf_result_throughput_bytes_per_second", OBJECT + " {{test_type}}"),
                ("netperf_result_transactions_per_second", OBJECT + " {{test_type}} /s"),
            ),
            "short",
        ),
        Panel(
            "Netperf regressions",
            (("netperf_regressed == 1", OBJECT + " {{test_type}} since run {{run}}"),),
            "short",
        ),
        Panel(
            "Netperf tests by result",
            (("sum by (result) (increase(netperf_tests_total[1h]))", "{{result}}"),),
            "short",
        ),
    ),
    images=(Image("netperf", schema.DEFAULT_IMAGE, "netperf-benchmark", "netperf/netserver"),),
)
