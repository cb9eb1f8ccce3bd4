"""Each kind's states as full objects, their status computed by the operators' pure status
modules, with the readiness GitOps tools must see: kstatus' ``InProgress`` (work pending),
``Failed`` (only a human can fix it) or ``Current`` (done). Shared by the kstatus and the
Argo CD health-check tests."""

from __future__ import annotations

import datetime
from typing import Any

from operators.netperf import parse
from operators.netperf import schema as netperf_schema
from operators.netperf import status as netperf
from operators.netperf.desired import pod_names
from operators.tdset import schedule
from operators.tdset import schema as tdset_schema
from operators.tdset import status as tdset
from operators.tdset.desired import DeploymentView
from operators.webserver import desired as webserver_desired
from operators.webserver import schema as webserver_schema
from operators.webserver import status as webserver
from operators.webserver.desired import Plan, PodView
from shared.api.validation import FieldError

NOW = datetime.datetime(2026, 3, 2, 10, 30, tzinfo=datetime.UTC)
LATER = NOW + datetime.timedelta(minutes=1)
Cases = dict[str, tuple[dict[str, Any], str]]  # state -> (object, kstatus' status)


def obj(schema: Any, status: dict | None, generation: int) -> dict:
    body: dict[str, Any] = {
        "apiVersion": f"{schema.GROUP}/{schema.VERSION}",
        "kind": schema.KIND,
        "metadata": {"name": "x", "namespace": "ns", "generation": generation},
    }
    if status is not None:
        body["status"] = status
    return body


# --- WebServer: 5 replicas ---------------------------------------------------------------------
WS_SPEC = {"replicas": 5, "image": "nginx:1"}
WS_HASH = webserver_desired.template_hash(WS_SPEC)


def ws_pods(n: int, ready: int | None = None, thash: str = WS_HASH, first: int = 0) -> list[PodView]:
    ready = n if ready is None else ready
    return [PodView(f"p{first + i}", thash, "t", "Running", True, i < ready) for i in range(n)]


def ws(pods: list[PodView], plan: Plan | None = None, failure=None, current=None, generation=4) -> dict:
    return webserver.compute(
        name="x",
        spec=WS_SPEC,
        generation=generation,
        pods=pods,
        plan=plan or Plan(),
        failure=failure,
        current=current,
        now=NOW,
    )


def webserver_invalid(current: dict | None, generation: int = 5, message: str = "must be at least 0") -> dict:
    errors = [FieldError("spec.replicas", message)]
    return webserver.invalid(errors=errors, generation=generation, current=current, now=LATER)


def webserver_cases() -> Cases:
    ready = ws(ws_pods(5))
    invalid = webserver_invalid(ready)
    return {
        "no pods yet": (obj(webserver_schema, ws([], Plan(create_slots=[0, 1, 2, 3, 4])), 4), "InProgress"),
        "1 of 5 ready": (obj(webserver_schema, ws(ws_pods(5, ready=1)), 4), "InProgress"),
        "rolling out": (
            obj(webserver_schema, ws(ws_pods(3) + ws_pods(2, thash="old", first=3), Plan(delete=["p3"])), 4),
            "InProgress",
        ),
        "scaling down": (obj(webserver_schema, ws(ws_pods(6), Plan(delete=["p5"])), 4), "InProgress"),
        "create failing": (
            obj(
                webserver_schema,
                ws(ws_pods(4), Plan(create_slots=[4]), failure=("FailedCreate", "exceeded quota")),
                4,
            ),
            "InProgress",
        ),
        "service name taken": (
            obj(webserver_schema, ws(ws_pods(5), failure=("ServiceConflict", "Service x is not ours")), 4),
            "Failed",
        ),
        "Degraded, invalid spec": (obj(webserver_schema, invalid, 5), "Failed"),
        "fixed after invalid": (
            obj(webserver_schema, ws(ws_pods(5), current=invalid, generation=6), 6),
            "Current",
        ),
        "new spec not yet seen": (obj(webserver_schema, ready, 5), "InProgress"),
        "all ready": (obj(webserver_schema, ready, 4), "Current"),
    }


# --- TDSet: the schedule runs 5 ----------------------------------------------------------------
TD_SPEC = {
    "container": {"image": "nginx", "port": 80},
    "defaultReplica": 3,
    "schedulingConfig": [{"startTime": 9, "endTime": 17, "replica": 5}],
}


def dep(*, replicas=5, ready=5, updated=5, status_replicas=5, rolled_out=True) -> DeploymentView:
    return DeploymentView(
        "x", replicas, "nginx", 80, status_replicas, ready, updated, ready >= replicas, rolled_out
    )


def td(deployment, *, desired=5, autoscaler=None, suspended=False, failure=None) -> dict:
    observed = tdset.Observed(
        decision=schedule.decide(TD_SPEC, NOW),
        desired=desired,
        deployment=deployment,
        autoscaler=autoscaler,
        suspended=suspended,
        warnings=[],
        failure=failure,
    )
    return tdset.compute(observed=observed, generation=2, current=None, now=NOW)


def tdset_cases() -> Cases:
    invalid = tdset.invalid(
        errors=[FieldError("spec.timeZone", "unknown time zone 'Mars/Olympus'")],
        generation=3,
        current=td(dep()),
        now=LATER,
    )
    nine = {"replicas": 9, "updated": 9, "status_replicas": 9}
    return {
        "no Deployment yet": (obj(tdset_schema, td(None), 2), "InProgress"),
        "scaling 3 -> 5": (
            obj(tdset_schema, td(dep(replicas=3, ready=3, updated=3, status_replicas=3)), 2),
            "InProgress",
        ),
        "rolling out": (obj(tdset_schema, td(dep(rolled_out=False)), 2), "InProgress"),
        "old pods left": (obj(tdset_schema, td(dep(updated=3)), 2), "InProgress"),
        "4 of 5 ready": (obj(tdset_schema, td(dep(ready=4)), 2), "InProgress"),
        "write failing": (
            obj(tdset_schema, td(dep(), failure=("FailedUpdate", "etcd timeout")), 2),
            "InProgress",
        ),
        "name taken": (obj(tdset_schema, td(dep(), failure=("DeploymentConflict", "not ours")), 2), "Failed"),
        "invalid spec": (obj(tdset_schema, invalid, 3), "Failed"),
        "settled": (obj(tdset_schema, td(dep()), 2), "Current"),
        "suspended, settled at 9": (
            obj(tdset_schema, td(dep(ready=9, **nine), desired=9, suspended=True), 2),
            "Current",
        ),
        "suspended, 7 of 9 ready": (
            obj(tdset_schema, td(dep(ready=7, **nine), desired=9, suspended=True), 2),
            "InProgress",
        ),
        "autoscaled to 8, settled": (
            obj(tdset_schema, td(dep(replicas=8, ready=8, updated=8, status_replicas=8), autoscaler="h"), 2),
            "Current",
        ),
    }


# --- Netperf: a one-off benchmark --------------------------------------------------------------
def netperf_cases() -> Cases:
    started = netperf.started(current={}, generation=1, names=pod_names("x", 1), now=NOW)
    server = netperf.phase(current=started, phase="Server", summary="waiting for server pod", now=NOW)
    running = netperf.phase(current=server, phase="Test", summary="client pod running", now=NOW)
    result = parse.Result("TCP_STREAM", throughput_bits=parse.stats([9.1e9, 9.3e9]))
    done = netperf.done(current=running, result=result, now=LATER)
    failed = netperf.error(current=running, reason="ClientTimeout", message="did not finish", now=LATER)
    invalid = netperf.error(
        current=done, reason="InvalidSpec", message="spec.samples: must be >= 1", now=LATER, generation=2
    )
    rerun = netperf.started(current=failed, generation=2, names=pod_names("x", 2), now=LATER)
    return {
        "pending (claimed)": (obj(netperf_schema, started, 1), "InProgress"),
        "pending (server pod)": (obj(netperf_schema, server, 1), "InProgress"),
        "running": (obj(netperf_schema, running, 1), "InProgress"),
        "done": (obj(netperf_schema, done, 1), "Current"),
        "failed": (obj(netperf_schema, failed, 1), "Failed"),
        "invalid spec": (obj(netperf_schema, invalid, 2), "Failed"),
        "done, new spec not yet claimed": (obj(netperf_schema, done, 2), "InProgress"),
        "rerun after a failure": (obj(netperf_schema, rerun, 2), "InProgress"),
    }


ALL = {"WebServer": webserver_cases, "TDSet": tdset_cases, "Netperf": netperf_cases}
