"""What a pass raises without reporting it (a bug, an input nobody foresaw) ends, for every
operator the same way, in ``Degraded``/``ReconcileFailed`` in the object's status and one
Warning Event, not in a log line alone (``shared.controller.builder.report_unexpected``).

Each operator is built as it runs (``shared.controller.builder.Operator``) on the fake
API server; its pass is made to raise, and the builder's wrapper, which the work queue calls,
is run twice: the condition is written, the Event posted once (not per retry).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from operators.netperf.description import DESCRIPTION as NETPERF
from operators.netperf.reconciler import NetperfReconciler
from operators.tdset.description import DESCRIPTION as TDSET
from operators.tdset.reconciler import TDSetReconciler
from operators.webserver.description import DESCRIPTION as WEBSERVER
from operators.webserver.reconciler import WebServerReconciler
from shared.api import conditions
from shared.api.errors import ReconcileError
from shared.client.kube import namespaced
from shared.controller.builder import UNEXPECTED, Operator
from tests.framework.fakekube import FakeKube

CASES = [
    (
        TDSET,
        TDSetReconciler,
        "schedule.rs/v1",
        "TDSet",
        "tdsets",
        {"defaultReplica": 1, "schedulingConfig": []},
    ),
    (NETPERF, NetperfReconciler, "app.example.com/v1alpha1", "Netperf", "netperfs", {}),
    (WEBSERVER, WebServerReconciler, "demo.k8s.io/v1alpha1", "WebServer", "webservers", {"replicas": 1}),
]


@pytest.mark.parametrize("case", CASES, ids=["tdset", "netperf", "webserver"])
def test_an_exception_a_pass_did_not_report_is_a_condition_and_one_event(monkeypatch, case):
    description, reconciler, api_version, kind, plural, spec = case
    body = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": spec,
    }
    kube = FakeKube(body)
    operator = Operator(description, reconciler, kube=kube)

    async def broken(_: Any) -> float | None:
        raise KeyError("spec.something")

    monkeypatch.setattr(operator.reconciler, "reconcile", broken)
    path = namespaced("ns", plural, "x", api_version)

    async def run() -> list[str]:
        reasons = []
        for _ in range(2):
            with pytest.raises(ReconcileError) as failed:
                await operator._reconcile(kube.object(path) or {})
            reasons.append(failed.value.reason)
            await operator.events.flush()
        return reasons

    assert asyncio.run(run()) == [UNEXPECTED, UNEXPECTED]
    st = kube.object(path)["status"]
    degraded = conditions.get(st["conditions"], conditions.DEGRADED)
    assert degraded["status"] == "True" and degraded["reason"] == UNEXPECTED
    assert "KeyError" in degraded["message"] and "spec.something" in degraded["message"]
    assert conditions.get(st["conditions"], conditions.READY)["status"] == "False"
    assert [(k, r) for k, r, _ in kube.events()] == [("Warning", UNEXPECTED)]


def test_a_failure_the_pass_reported_itself_is_passed_on_untouched(monkeypatch):
    body = {
        "apiVersion": "schedule.rs/v1",
        "kind": "TDSet",
        "metadata": {"name": "x", "namespace": "ns"},
        "spec": {},
    }
    kube = FakeKube(body)
    operator = Operator(TDSET, TDSetReconciler, kube=kube)

    async def reported(_: Any) -> float | None:
        raise ReconcileError("FailedUpdate", "already in the status")

    monkeypatch.setattr(operator.reconciler, "reconcile", reported)

    async def run() -> None:
        with pytest.raises(ReconcileError, match="FailedUpdate"):
            await operator._reconcile(kube.object(namespaced("ns", "tdsets", "x", "schedule.rs/v1")) or {})
        await operator.events.flush()

    asyncio.run(run())
    assert kube.events() == [] and not kube.writes()
