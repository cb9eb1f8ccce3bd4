"""The TDSet pass around the pure parts: failures that must not delay a boundary.

The reconciler is built as the operator builds it, with its clock injected and its API calls
replaced by fakes of our own client's methods (never of the Kubernetes API): the caches are
filled as the watches would fill them.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from operators.tdset import desired
from operators.tdset.description import DESCRIPTION
from operators.tdset.desired import AutoscalerView
from operators.tdset.reconciler import TDSetReconciler
from shared.api.clock import Clock
from shared.api.errors import ReconcileError
from shared.controller.builder import Operator

UTC = datetime.UTC


def tdset(name: str, uid: str, hour: int) -> dict[str, Any]:
    spec = {
        "container": {"image": "nginx:1.27", "port": 80},
        "schedulingConfig": [{"startTime": hour, "endTime": (hour + 1) % 24, "replica": 5}],
        "defaultReplica": 1,
    }
    return {
        "apiVersion": "schedule.rs/v1",
        "kind": "TDSet",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": 1, "resourceVersion": "1"},
        "spec": spec,
    }


@pytest.mark.slow  # two seconds of real time
def test_a_status_write_that_hangs_is_cut_at_the_next_boundary(monkeypatch):
    """A throttled status write (429s, Retry-After) once backed off for up to 1000 s outside the
    code whose retries stop at the next boundary: the next flip was late. Two seconds before a
    window opens, a status write that never answers must end the pass by the boundary, with a
    retry due then."""
    real = datetime.datetime.now(UTC)
    boundary = (real + datetime.timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    clock = Clock(boundary - datetime.timedelta(seconds=2) - real)
    reconciler = Operator(DESCRIPTION, TDSetReconciler, clock=clock).reconciler
    assert isinstance(reconciler, TDSetReconciler)
    body = tdset("shop", "u-hang", boundary.hour)
    deployment = desired.deployment_manifest(body, body["spec"], 1)  # what the schedule wants now
    deployment["metadata"].update(uid="d1", generation=1)
    reconciler.deployments.observe("ADDED", deployment)
    never = asyncio.Event()

    async def hanging_write(*_: Any) -> bool:
        await never.wait()
        return True

    monkeypatch.setattr(reconciler.api.status, "write", hanging_write)

    async def run() -> None:
        with pytest.raises(ReconcileError) as failed:
            await asyncio.wait_for(reconciler.reconcile(body), timeout=60)
        assert failed.value.not_after is not None and failed.value.not_after <= 2.1
        assert "status" in str(failed.value)

    asyncio.run(run())


def test_one_hpa_failing_to_restore_does_not_end_the_floor_sweep(monkeypatch):
    """A non-API error on one HPA (before: only ApiError was caught) killed the sweep task
    silently, and no later HPA got its minReplicas back."""
    views = [
        AutoscalerView("ns", name, "gone", 4, 10, floor_owner=f"deleted-{name}", original_min=1, uid=name)
        for name in ("a-hpa", "b-hpa")
    ]
    reconciler = Operator(DESCRIPTION, TDSetReconciler).reconciler
    assert isinstance(reconciler, TDSetReconciler)
    reconciler.autoscalers.update({(v.namespace, v.name): v for v in views})
    monkeypatch.setattr(reconciler.floor_sweeps, "_active", lambda: True)
    restored: list[str] = []

    async def patch_autoscaler(namespace: str, name: str, patch: dict[str, Any]) -> None:
        if name == "a-hpa":
            raise RuntimeError("connection reset")
        restored.append(name)

    monkeypatch.setattr(reconciler.api, "patch_autoscaler", patch_autoscaler)

    async def run() -> None:
        reconciler.floor_sweeps.request()
        await asyncio.wait_for(reconciler.floor_sweeps.wait(), timeout=60)

    asyncio.run(run())
    assert restored == ["b-hpa"]
