"""The bundle's alerts with promtool: syntax (check rules) and behaviour (test rules).

Every alert gets a scenario where it fires (with exactly the labels and annotations a user will
see) and one where it does not. The rules come from the bundle's PrometheusRule manifest, the
same file OLM installs.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from operators import PACKAGES, descriptions
from shared.controller.metrics import TABLE
from tools.generate import monitoring

REPO = Path(__file__).resolve().parents[2]
RULE = REPO / "bundle" / "manifests" / "k8s-operators-py_monitoring.coreos.com_v1_prometheusrule.yaml"
RUNBOOK = REPO / "docs" / "runbook.md"
ALERTS = {r["alert"]: r for g in yaml.safe_load(RULE.read_text())["spec"]["groups"] for r in g["rules"]}


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is installed by make system-deps (Debian's prometheus package)"
    return path


def expected(alert: str, labels: dict[str, str], value: str = "") -> dict:
    """The alert as Alertmanager would get it: its labels and rendered annotations."""
    rule = ALERTS[alert]

    def render(text: str) -> str:
        text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)
        return text.replace("{{ $value | humanizePercentage }}", value)

    return {
        "exp_labels": {**labels, **rule["labels"]},
        "exp_annotations": {k: render(v) for k, v in rule["annotations"].items()},
    }


def up(job: str, value: int) -> dict:
    return {"series": f'up{{job="{job}", instance="10.0.0.1:8080"}}', "values": f"{value}x30"}


UP_ALL = [up(f"{op}-operator-metrics", 1) for op in PACKAGES]
WEB_DOWN = [up("webserver-operator-metrics", 0)]
WEB_LABELS = {"job": "webserver-operator-metrics", "instance": "10.0.0.1:8080"}


def series(selector: str, values: str) -> dict:
    return {"series": selector, "values": values}


def reconciles(errors_per_min: int, terminal_per_min: int | None = None) -> list[dict]:
    """TDSet reconciles: 60 a minute succeed, ``errors_per_min`` fail, of which ``terminal_per_min``
    are terminal (an invalid spec; None: the series is not exported at all)."""
    ok, err = 'controller="tdset", result="success"', 'controller="tdset", result="error"'
    out = [
        series(f"controller_runtime_reconcile_total{{{ok}}}", "0+60x40"),
        series(f"controller_runtime_reconcile_total{{{err}}}", f"0+{errors_per_min}x40"),
        series('controller_runtime_reconcile_errors_total{controller="tdset"}', f"0+{errors_per_min}x40"),
    ]
    if terminal_per_min is not None:
        terminal = 'controller_runtime_terminal_reconcile_errors_total{controller="tdset"}'
        out.append(series(terminal, f"0+{terminal_per_min}x40"))
    return out


def leaders(*status: str) -> list[dict]:
    """``leader_election_master_status`` of the WebServer operator's pods, one series each."""
    lease = 'name="webserver-leader", job="webserver-operator-metrics"'
    return [
        series(f'leader_election_master_status{{{lease}, instance="10.0.0.{i}:8080"}}', v)
        for i, v in enumerate(status, 1)
    ]


NP = 'netperf_failed{namespace="lab", name="np"}'
TD = 'tdset_degraded{namespace="shop", name="web"}'
NR = 'netperf_regressed{namespace="lab", name="np", test_type="TCP_RR", run="7"}'
NR0 = 'netperf_regressed{namespace="lab", name="np", test_type="TCP_RR"}'  # run="": not regressed
WR = 'webserver_rollbacks_total{namespace="shop", name="web"}'
SCENARIOS = [
    # (alert, input series, eval time, labels when it fires or None when it must not, $value)
    ("K8sOperatorsPyOperatorDown", WEB_DOWN, "6m", WEB_LABELS, ""),
    ("K8sOperatorsPyOperatorDown", UP_ALL, "6m", None, ""),
    ("K8sOperatorsPyOperatorDown", WEB_DOWN, "4m", None, ""),  # not down for 5m yet
    ("K8sOperatorsPyNoLeader", leaders("0x30", "0x30"), "6m", {"job": "webserver-operator-metrics"}, ""),
    ("K8sOperatorsPyNoLeader", leaders("1x30", "0x30"), "6m", None, ""),
    ("K8sOperatorsPyNoLeader", leaders("1x2 0x28", "0x3 1x27"), "6m", None, ""),  # handed over
    *[
        (
            f"{op.capitalize()}OperatorNotScraped",
            [s for s in UP_ALL if op not in s["series"]],
            "16m",
            {"job": f"{op}-operator-metrics"},
            "",
        )
        for op in PACKAGES
    ],
    *[(f"{op.capitalize()}OperatorNotScraped", UP_ALL, "16m", None, "") for op in PACKAGES],
    ("K8sOperatorsPyReconcileErrorsHigh", reconciles(60), "25m", {"controller": "tdset"}, "50%"),
    ("K8sOperatorsPyReconcileErrorsHigh", reconciles(3), "25m", None, ""),  # ~5%: below 10%
    # A tenant's invalid specs (terminal errors) do not page; other errors beside them still do.
    ("K8sOperatorsPyReconcileErrorsHigh", reconciles(60, 60), "25m", None, ""),
    ("K8sOperatorsPyReconcileErrorsHigh", reconciles(60, 0), "25m", {"controller": "tdset"}, "50%"),
    ("NetperfTestFailed", [series(NP, "1x5")], "1m", {"namespace": "lab", "name": "np"}, ""),
    ("NetperfTestFailed", [series(NP, "0x5")], "1m", None, ""),
    (
        "NetperfRegressed",
        [series(NR, "1x5")],
        "1m",
        {"namespace": "lab", "name": "np", "test_type": "TCP_RR", "run": "7"},
        "",
    ),
    # A later result within the baseline: the run's series goes, the object's 0 comes.
    ("NetperfRegressed", [series(NR, "1x2 stale"), series(NR0, "_x3 0x2")], "4m", None, ""),
    ("WebServerRolledBack", [series(WR, "0x3 1x10")], "5m", {"namespace": "shop", "name": "web"}, ""),
    ("WebServerRolledBack", [series(WR, "0x70")], "65m", None, ""),
    ("WebServerRolledBack", [series(WR, "0x3 1x70")], "68m", None, ""),  # an hour after it, quiet again
    ("TDSetDegraded", [series(TD, "1x20")], "11m", {"namespace": "shop", "name": "web"}, ""),
    ("TDSetDegraded", [series(TD, "1x5 0x15")], "11m", None, ""),  # recovered before 10 min
]
IDS = [f"{s[0]}-{'fires' if s[3] else 'quiet'}-{i}" for i, s in enumerate(SCENARIOS)]


def test_every_alert_has_firing_and_quiet_scenarios_and_a_runbook_section():
    firing = {a for a, *_, labels, _ in SCENARIOS if labels}
    quiet = {a for a, *_, labels, _ in SCENARIOS if labels is None}
    assert firing == quiet == set(ALERTS)
    headings = set(re.findall(r"^## (\S+)$", RUNBOOK.read_text(), re.M))
    for name, rule in ALERTS.items():
        assert {"summary", "description", "runbook_url"} <= set(rule["annotations"]), name
        assert rule["annotations"]["runbook_url"].endswith(f"runbook.md#{name.lower()}")
        assert name.lower() in headings, f"docs/runbook.md lacks a section for {name}"


def test_rules_and_dashboard_use_only_metrics_the_operators_export():
    specs = [*TABLE, *(m for op in descriptions() for m in op.metrics)]
    exported = {m.name for m in specs} | {"up"}
    histograms = {f"{m.name}_bucket" for m in specs if m.kind == "histogram"}
    exprs = [r["expr"] for r in ALERTS.values()]
    exprs += [t["expr"] for p in monitoring.dashboard()["panels"] for t in p["targets"]]
    for expr in exprs:
        for name in re.findall(
            r"\b([a-z_]+(?:_total|_seconds|_bucket|_replicas|_second|_failed|_degraded|up))\b", expr
        ):
            assert name in exported | histograms or name.startswith("process_"), (name, expr)


def test_promtool_check_rules(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(yaml.safe_load(RULE.read_text())["spec"]))
    proc = subprocess.run(
        [promtool(), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in proc.stdout


@pytest.mark.parametrize(
    "index",
    range(len(SCENARIOS)),
    ids=[f"{s[0]}-{'fires' if s[3] else 'quiet'}-{i}" for i, s in enumerate(SCENARIOS)],
)
def test_promtool_test_rules(tmp_path, index):
    alert, inputs, at, labels, value = SCENARIOS[index]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(yaml.safe_load(RULE.read_text())["spec"]))
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": alert,
                        "exp_alerts": [expected(alert, labels, value)] if labels else [],
                    }
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = subprocess.run(
        [promtool(), "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
