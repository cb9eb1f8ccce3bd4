"""Alerts, the Grafana dashboard and the documentation's metrics table, from one place each.

- ``prometheus_rule``: the bundle's ``PrometheusRule`` (alerts with summary, description
  and a ``runbook_url`` into ``docs/runbook.md``);
- ``dashboard``: ``docs/grafana-dashboard.json`` (reconcile, client and domain metrics);
- ``metrics_table``: the Markdown table of every metric, made from ``shared.controller.metrics.TABLE``
  and each operator's declared metrics.

What is the same for every operator (operator down or not scraped, reconcile errors, the
controller-runtime and client panels) is written here once and repeated for each registered
operator (``operators.descriptions()``); an operator's own alerts and panels are in its
description. ``tools/generate/bundle.py`` writes the alerts and the dashboard (``make bundle``),
``tools/generate/docs.py`` the metrics table (``make docs``); their ``--check`` catches drift.
"""

from __future__ import annotations

import json
from typing import Any

from operators import descriptions
from shared.api.description import Alert, Panel
from shared.controller.metrics import TABLE

RUNBOOK = "https://github.com/k8s-operators-py/k8s-operators-py/blob/main/docs/runbook.md"
JOB = "{op}-operator-metrics"  # the ServiceMonitor's job label: the metrics Service's name
_BY_CONTROLLER = 'sum by (controller) (rate({metric}{{controller=~"{sel}"}}[5m]))'


def controllers() -> tuple[str, ...]:
    """The registered operators' controllers (the ``controller`` label), one per operator."""
    return tuple(op.controller for op in descriptions())


def _alert(
    name: str, expr: str, *, for_: str, severity: str, summary: str, description: str
) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {
            "summary": summary,
            "description": description,
            "runbook_url": f"{RUNBOOK}#{name.lower()}",
        },
    }


def alerts() -> list[dict[str, Any]]:
    ops = descriptions()
    sel = "|".join(controllers())
    errors = _BY_CONTROLLER.format(metric="controller_runtime_reconcile_errors_total", sel=sel)
    terminal = _BY_CONTROLLER.format(metric="controller_runtime_terminal_reconcile_errors_total", sel=sel)
    total = _BY_CONTROLLER.format(metric="controller_runtime_reconcile_total", sel=sel)
    jobs = "|".join(JOB.format(op=op.name) for op in ops)
    rules = [
        _alert(
            "K8sOperatorsPyOperatorDown",
            f'up{{job=~"{jobs}"}} == 0',
            for_="5m",
            severity="critical",
            summary="Operator {{ $labels.job }} is down",
            description="Prometheus has failed to scrape {{ $labels.job }} ({{ $labels.instance }}) for "
            "5 minutes: that operator pod is not running, its metrics port is unreachable, or it "
            "refuses Prometheus (401/403: Prometheus' ServiceAccount is not bound to the "
            "k8s-operators-py-metrics-reader ClusterRole). If the "
            "operator's other pod is up it leads (or takes over within about 20 s), without a standby; "
            "if none is up, its resources are not reconciled.",
        ),
        _alert(
            "K8sOperatorsPyNoLeader",
            f'max by (job) (leader_election_master_status{{job=~"{jobs}"}}) == 0',
            for_="5m",
            severity="critical",
            summary="No pod of {{ $labels.job }} leads",
            description="The pods of {{ $labels.job }} are scraped, but none has held its leader-election "
            "Lease for 5 minutes: they all stand by, so that operator's resources are not reconciled.",
        ),
    ]
    for name in (op.name for op in ops):
        rules.append(
            _alert(
                f"{name.capitalize()}OperatorNotScraped",
                f'absent(up{{job="{JOB.format(op=name)}"}})',
                for_="15m",
                severity="warning",
                summary=f"The {name} operator is not scraped",
                description=f"No scrape target for job {JOB.format(op=name)} for 15 minutes: the operator "
                "is not installed, or its ServiceMonitor does not select its metrics Service.",
            )
        )
    rules += [
        _alert(
            "K8sOperatorsPyReconcileErrorsHigh",
            # Terminal errors are a spec no retry can fix, reported on the object to its owner:
            # a tenant's invalid objects must not page whoever runs the operator.
            f"({errors} - ({terminal} or {errors} * 0)) / {total} > 0.1",
            for_="15m",
            severity="warning",
            summary="More than 10% of {{ $labels.controller }} reconciles fail",
            description="{{ $value | humanizePercentage }} of the {{ $labels.controller }} controller's "
            "reconciles ended in an error over the last 5 minutes, for 15 minutes (not counting terminal "
            "errors: invalid specs, reported on the objects themselves).",
        ),
    ]
    rules += [_declared(alert) for op in ops for alert in op.alerts]
    return rules


def _declared(alert: Alert) -> dict[str, Any]:
    return _alert(
        alert.name,
        alert.expr,
        for_=alert.for_,
        severity=alert.severity,
        summary=alert.summary,
        description=alert.description,
    )


def prometheus_rule() -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "k8s-operators-py", "labels": {"app.kubernetes.io/part-of": "k8s-operators-py"}},
        "spec": {"groups": [{"name": "k8s-operators-py.rules", "rules": alerts()}]},
    }


def _panel(
    panel_id: int, title: str, exprs: list[tuple[str, str]], unit: str, grid: tuple[int, int]
) -> dict[str, Any]:
    x, y = grid
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": 12, "h": 8},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def dashboard() -> dict[str, Any]:
    sel = "$controller"
    errors = _BY_CONTROLLER.format(metric="controller_runtime_reconcile_errors_total", sel=sel)
    total = _BY_CONTROLLER.format(metric="controller_runtime_reconcile_total", sel=sel)
    by_result = (
        f'sum by (controller, result) (rate(controller_runtime_reconcile_total{{controller=~"{sel}"}}[5m]))'
    )
    buckets = (
        "sum by (controller, le) "
        f'(rate(controller_runtime_reconcile_time_seconds_bucket{{controller=~"{sel}"}}[5m]))'
    )
    request_buckets = "sum by (job, le) (rate(rest_client_request_duration_seconds_bucket[5m]))"
    panels: list[tuple[str, list[tuple[str, str]], str]] = [
        ("Reconciles per second by result", [(by_result, "{{controller}} {{result}}")], "ops"),
        ("Reconcile error ratio", [(f"{errors} / {total}", "{{controller}}")], "percentunit"),
        (
            "Reconcile duration p50 / p99",
            [
                (f"histogram_quantile({q}, {buckets})", f"{{{{controller}}}} p{int(q * 100)}")
                for q in (0.5, 0.99)
            ],
            "s",
        ),
        (
            "Active workers",
            [(f'controller_runtime_active_workers{{controller=~"{sel}"}}', "{{controller}}")],
            "short",
        ),
        (
            # Due passes waiting for a slot: a namespace flooding the operator shows here first.
            "Work queue depth",
            [(f'workqueue_depth{{controller=~"{sel}"}}', "{{controller}}")],
            "short",
        ),
        (
            "API requests per second by code",
            [("sum by (job, code) (rate(rest_client_requests_total[5m]))", "{{job}} {{code}}")],
            "reqps",
        ),
        ("API request duration p99", [(f"histogram_quantile(0.99, {request_buckets})", "{{job}}")], "s"),
        *[(p.title, list(p.exprs), p.unit) for p in _declared_panels()],
        # 1 on the leading pod, 0 on its standby; a job with no 1 reconciles nothing.
        ("Leader per operator", [("leader_election_master_status", "{{job}} {{instance}}")], "short"),
        ("Operator memory (RSS)", [("process_resident_memory_bytes", "{{job}}")], "bytes"),
        ("Operator CPU", [("rate(process_cpu_seconds_total[5m])", "{{job}}")], "short"),
    ]
    return {
        "title": "k8s-operators-py",
        "uid": "k8s-operators-py",
        "tags": ["kubernetes", "operators", "kopf"],
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
                {
                    "name": "controller",
                    "type": "custom",
                    "label": "Controller",
                    "query": ",".join(controllers()),
                    "multi": True,
                    "includeAll": True,
                    "allValue": "|".join(controllers()),
                    "current": {"text": "All", "value": "$__all"},
                },
            ]
        },
        "panels": [
            _panel(i + 1, title, exprs, unit, ((i % 2) * 12, (i // 2) * 8))
            for i, (title, exprs, unit) in enumerate(panels)
        ],
    }


def _declared_panels() -> list[Panel]:
    return [panel for op in descriptions() for panel in op.panels]


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def metrics_table() -> str:
    rows = ["| metric | type | labels | operator | help |", "| --- | --- | --- | --- | --- |"]
    owned = [("all", m) for m in TABLE] + [(op.name, m) for op in descriptions() for m in op.metrics]
    for operator, m in owned:
        labels = ", ".join(f"`{label}`" for label in m.labels)
        rows.append(f"| `{m.name}` | {m.kind} | {labels} | {operator} | {m.help} |")
    return "\n".join(rows) + "\n"
