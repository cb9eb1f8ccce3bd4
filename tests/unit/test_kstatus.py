"""What kstatus (Flux health checks, Helm 4 ``--wait``, kpt, Config Sync) makes of our statuses.

Each state's status is computed by the operators' own pure status modules and judged by the
real library (``tests/kstatus.py``): work pending is ``InProgress``, what only a human can fix
is ``Failed``, and ``Current`` means done. Before the ``Reconciling``/``Stalled``/``Ready``
conditions every one of these was ``Current`` (#22.10).
"""

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
from shared.validation import FieldError
from tests import kstatus

NOW = datetime.datetime(2026, 3, 2, 10, 30, tzinfo=datetime.UTC)
LATER = NOW + datetime.timedelta(minutes=1)


def obj(schema: Any, status: dict, generation: int) -> dict:
    return {
        "apiVersion": f"{schema.GROUP}/{schema.VERSION}",
        "kind": schema.KIND,
        "metadata": {"name": "x", "namespace": "ns", "generation": generation},
        "status": status,
    }


def judged(cases: dict[str, dict]) -> dict[str, str]:
    results = kstatus.compute(*cases.values())
    return {name: r["status"] for name, r in zip(cases, results, strict=True)}


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


def test_webserver_is_current_only_with_every_pod_ready_on_the_current_template():
    ready = ws(ws_pods(5))
    invalid = webserver.invalid(
        errors=[FieldError("spec.replicas", "must be at least 0")], generation=5, current=ready, now=LATER
    )
    cases = {
        "no pods yet": obj(webserver_schema, ws([], Plan(create_slots=[0, 1, 2, 3, 4])), 4),
        "1 of 5 ready": obj(webserver_schema, ws(ws_pods(5, ready=1)), 4),
        "rolling out": obj(
            webserver_schema, ws(ws_pods(3) + ws_pods(2, thash="old", first=3), Plan(delete=["p3"])), 4
        ),
        "scaling down": obj(webserver_schema, ws(ws_pods(6), Plan(delete=["p5"])), 4),
        "create failing": obj(
            webserver_schema,
            ws(ws_pods(4), Plan(create_slots=[4]), failure=("FailedCreate", "exceeded quota")),
            4,
        ),
        "service name taken": obj(
            webserver_schema, ws(ws_pods(5), failure=("ServiceConflict", "Service x is not ours")), 4
        ),
        "Degraded, invalid spec": obj(webserver_schema, invalid, 5),
        "fixed after invalid": obj(webserver_schema, ws(ws_pods(5), current=invalid, generation=6), 6),
        "new spec not yet seen": obj(webserver_schema, ready, 5),
        "all ready": obj(webserver_schema, ready, 4),
    }
    assert judged(cases) == {
        "no pods yet": "InProgress",
        "1 of 5 ready": "InProgress",
        "rolling out": "InProgress",
        "scaling down": "InProgress",
        "create failing": "InProgress",
        "service name taken": "Failed",
        "Degraded, invalid spec": "Failed",
        "fixed after invalid": "Current",
        "new spec not yet seen": "InProgress",
        "all ready": "Current",
    }


def test_kstatus_reports_why_a_webserver_is_in_progress_or_failed():
    (waiting,) = kstatus.compute(obj(webserver_schema, ws(ws_pods(5, ready=1)), 4))
    assert waiting["message"] == "1/5 pods ready"
    invalid = webserver.invalid(
        errors=[FieldError("spec.replicas", "bad")], generation=5, current=None, now=NOW
    )
    (failed,) = kstatus.compute(obj(webserver_schema, invalid, 5))
    assert failed["message"] == "spec.replicas: bad"


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


def test_tdset_is_current_once_its_deployment_has_the_replicas_rolled_out_and_ready():
    invalid = tdset.invalid(
        errors=[FieldError("spec.timeZone", "unknown time zone 'Mars/Olympus'")],
        generation=3,
        current=td(dep()),
        now=LATER,
    )
    cases = {
        "no Deployment yet": obj(tdset_schema, td(None), 2),
        "scaling 3 -> 5": obj(tdset_schema, td(dep(replicas=3, ready=3, updated=3, status_replicas=3)), 2),
        "rolling out": obj(tdset_schema, td(dep(rolled_out=False)), 2),
        "old pods left": obj(tdset_schema, td(dep(updated=3)), 2),
        "4 of 5 ready": obj(tdset_schema, td(dep(ready=4)), 2),
        "write failing": obj(tdset_schema, td(dep(), failure=("FailedUpdate", "etcd timeout")), 2),
        "name taken": obj(tdset_schema, td(dep(), failure=("DeploymentConflict", "not ours")), 2),
        "invalid spec": obj(tdset_schema, invalid, 3),
        "settled": obj(tdset_schema, td(dep()), 2),
        "suspended, settled at 9": obj(
            tdset_schema,
            td(dep(replicas=9, ready=9, updated=9, status_replicas=9), desired=9, suspended=True),
            2,
        ),
        "suspended, 7 of 9 ready": obj(
            tdset_schema,
            td(dep(replicas=9, ready=7, updated=9, status_replicas=9), desired=9, suspended=True),
            2,
        ),
        "autoscaled to 8, settled": obj(
            tdset_schema, td(dep(replicas=8, ready=8, updated=8, status_replicas=8), autoscaler="h"), 2
        ),
    }
    assert judged(cases) == {
        "no Deployment yet": "InProgress",
        "scaling 3 -> 5": "InProgress",
        "rolling out": "InProgress",
        "old pods left": "InProgress",
        "4 of 5 ready": "InProgress",
        "write failing": "InProgress",
        "name taken": "Failed",
        "invalid spec": "Failed",
        "settled": "Current",
        "suspended, settled at 9": "Current",
        "suspended, 7 of 9 ready": "InProgress",
        "autoscaled to 8, settled": "Current",
    }


# --- Netperf: a one-off benchmark --------------------------------------------------------------
def test_netperf_is_current_when_done_and_failed_when_its_run_failed():
    started = netperf.started(current={}, generation=1, names=pod_names("x", 1), now=NOW)
    server = netperf.phase(current=started, phase="Server", summary="waiting for server pod", now=NOW)
    running = netperf.phase(current=server, phase="Test", summary="client pod running", now=NOW)
    result = parse.Result("TCP_STREAM", throughput_bits=parse.stats([9.1e9, 9.3e9]))
    done = netperf.done(current=running, result=result, now=LATER)
    failed = netperf.error(current=running, reason="ClientTimeout", message="did not finish", now=LATER)
    invalid = netperf.error(
        current=done, reason="InvalidSpec", message="spec.samples: must be >= 1", now=LATER, generation=2
    )
    cases = {
        "pending (claimed)": obj(netperf_schema, started, 1),
        "pending (server pod)": obj(netperf_schema, server, 1),
        "running": obj(netperf_schema, running, 1),
        "done": obj(netperf_schema, done, 1),
        "failed": obj(netperf_schema, failed, 1),
        "invalid spec": obj(netperf_schema, invalid, 2),
        "done, new spec not yet claimed": obj(netperf_schema, done, 2),
        "rerun after a failure": obj(
            netperf_schema,
            netperf.started(current=failed, generation=2, names=pod_names("x", 2), now=LATER),
            2,
        ),
    }
    assert judged(cases) == {
        "pending (claimed)": "InProgress",
        "pending (server pod)": "InProgress",
        "running": "InProgress",
        "done": "Current",
        "failed": "Failed",
        "invalid spec": "Failed",
        "done, new spec not yet claimed": "InProgress",
        "rerun after a failure": "InProgress",
    }
