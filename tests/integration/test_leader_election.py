"""Two instances of an operator, one Lease: who writes, and what happens when the leader goes.

Each instance is a process with leader election on (``LEADER_ELECT``; the Lease in the test's
namespace, the first one watched), running as a ServiceAccount of its own that holds the CSV's
rules, so the API server's audit log (``localcluster.cluster.AUDIT_POLICY``) tells their
requests apart, kopf's own (Events, watches) included. ``POD_NAME`` makes each holder identity
start with the instance's name. The durations are controller-runtime's defaults (15/10/2 s),
as deployed.
"""

from __future__ import annotations

import datetime
import json
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from localcluster.cluster import AUDITED_NAMESPACE
from operators.webserver import desired as webserver_desired
from shared.api import leases
from shared.client import leader
from tests.framework import netperfs, tdsets, webservers
from tests.framework.cluster import Cluster
from tests.framework.namespaces import hold_pods_at
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for

OPERATORS = ("netperf", "tdset", "webserver")
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass
class Instance:
    """- both start at once: exactly one leads (Lease holder and ``leader_election_master_status``),
      the other is ready and writes nothing (every operator);
    - the leader SIGKILLed in the middle of a scale-up: the standby takes over once the Lease
      expires and converges with no pod created twice;
    - the leader frozen (SIGSTOP) past its lease: the standby takes over; the old leader, resumed,
      sends no write after the new leader's first (audit log) and exits with status 1;
    - the leader stopped cleanly (SIGTERM): it releases the Lease (seen in the Lease's own history)
      and the standby takes it without waiting for it to expire (every operator).

    Failover times are printed (``pytest -s``); ``tools/bench/failover.py`` measures them over many
    trials. Nothing here asserts how fast anything is.
    """

    name: str  # the start of its holder identity (POD_NAME)
    account: str  # its ServiceAccount
    process: OperatorProcess
    lease: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{AUDITED_NAMESPACE}:{self.account}"

    def leads(self) -> bool:
        return self.process.metric("leader_election_master_status", name=self.lease) == 1


Start = Callable[..., list[Instance]]


@pytest.fixture
def instances(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[Start]:
    """Start instances of one operator (``names``; all at once with ``together``), stopped after."""
    started: list[Instance] = []

    def start(operator: str, names: tuple[str, ...] = ("a",), together: bool = False) -> list[Instance]:
        made = []
        for name in names:
            account = f"le-{operator}-{name}-{namespace[-6:]}"
            process = OperatorProcess(
                f"operators.{operator}",
                cluster.operator_kubeconfig(operator, account=account),
                tmp_path / f"{operator}-{name}.log",
                namespaces=namespace,
                env={"LEADER_ELECT": "true", "POD_NAME": name},
            )
            made.append(Instance(name, account, process, leases.lease_name(operator)))
            started.append(made[-1])
            process.launch()
            if not together:
                process.wait_ready()
        for inst in made:
            inst.process.wait_ready()
        return made

    yield start
    for inst in started:
        inst.process.stop()


def lease(cluster: Cluster, namespace: str, operator: str) -> client.V1Lease:
    return client.CoordinationV1Api(cluster.api).read_namespaced_lease(leases.lease_name(operator), namespace)


def holder(cluster: Cluster, namespace: str, operator: str) -> str:
    """Whose name the Lease's holder identity starts with ("" when released or absent)."""
    try:
        identity = lease(cluster, namespace, operator).spec.holder_identity or ""
    except client.exceptions.ApiException as exc:
        if exc.status == 404:
            return ""
        raise
    return identity.split("_", 1)[0]


def leading(cluster: Cluster, namespace: str, operator: str, inst: Instance) -> bool:
    return holder(cluster, namespace, operator) == inst.name and inst.leads()


def when(event: dict[str, Any]) -> datetime.datetime:
    return datetime.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def audited(cluster: Cluster, inst: Instance) -> list[dict[str, Any]]:
    """Every request of ``inst`` the API server recorded, in the order it received them."""
    events = []
    for line in cluster.need_local().audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") == inst.user and event.get("objectRef"):
            events.append(event)
    return sorted(events, key=when)


def writes(cluster: Cluster, inst: Instance) -> list[dict[str, Any]]:
    """Every write ``inst`` sent, answered or refused."""
    return [e for e in audited(cluster, inst) if e["verb"] in WRITES]


def code(event: dict[str, Any]) -> int:
    return int((event.get("responseStatus") or {}).get("code") or 0)


def is_lease(event: dict[str, Any]) -> bool:
    return event["objectRef"]["resource"] == "leases"


def pod_creates(cluster: Cluster, inst: Instance) -> list[tuple[str, int]]:
    """(pod name, answer) of every pod create ``inst`` sent, in order."""
    return [
        (e["objectRef"].get("name", ""), code(e))
        for e in writes(cluster, inst)
        if e["verb"] == "create" and e["objectRef"]["resource"] == "pods"
    ]


def describe(events: list[dict[str, Any]]) -> list[tuple[str, str, str, int]]:
    return [(e["requestReceivedTimestamp"], e["verb"], e["objectRef"]["resource"], code(e)) for e in events]


def netperf_work(cluster: Cluster, namespace: str) -> None:
    netperfs.create(cluster, namespace, "work", {})
    wait_for(lambda: netperfs.st(cluster, namespace, "work").get("status"), 60, "the Netperf's status")


def tdset_work(cluster: Cluster, namespace: str) -> None:
    tdsets.create(cluster, namespace, "work", tdsets.steady(1))
    tdsets.replicas_become(cluster, namespace, "work", 1, "the TDSet's Deployment")


def webserver_work(cluster: Cluster, namespace: str) -> None:
    webservers.create(cluster, namespace, "work", {"replicas": 2})
    webservers.converged(cluster, namespace, "work", 2)


# Something for each operator to do, and how the test knows it was done.
WORK: dict[str, Callable[[Cluster, str], None]] = {
    "netperf": netperf_work,
    "tdset": tdset_work,
    "webserver": webserver_work,
}


@pytest.mark.parametrize("operator", OPERATORS)
def test_of_two_instances_one_leads_and_the_other_stands_by_ready_and_silent(
    cluster, namespace, instances, operator
):
    a, b = instances(operator, ("a", "b"), together=True)
    # Both ready (caches listed); exactly one leads, and the Lease and the metric agree.
    (first,) = wait_for(
        lambda: (
            [i for i in (a, b) if leading(cluster, namespace, operator, i)]
            if a.leads() + b.leads() == 1
            else None
        ),
        60,
        "exactly one leader",
    )
    standby = b if first is a else a
    WORK[operator](cluster, namespace)
    assert first.leads() and not standby.leads()
    assert standby.process.get(standby.process.probe_port, "/readyz")[0] == 200
    assert any(not is_lease(e) for e in writes(cluster, first)), "the leader did the work"
    # The standby sent no write at all, beyond losing the race to create the Lease (409).
    sent = writes(cluster, standby)
    assert all(is_lease(e) and e["verb"] == "create" and code(e) == 409 for e in sent), describe(sent)
    # Not one reconcile pass ran there, whatever its outcome.
    passes = [
        standby.process.metric("controller_runtime_reconcile_total", controller=operator, result=r)
        for r in ("success", "error", "requeue", "requeue_after")
    ]
    assert passes == [0, 0, 0, 0]


def test_the_leader_killed_mid_scale_up_the_standby_converges_without_duplicates(
    cluster, namespace, instances
):
    core = client.CoreV1Api(cluster.api)
    (a,) = instances("webserver", ("a",))
    wait_for(lambda: leading(cluster, namespace, "webserver", a), 60, "a leading")
    (b,) = instances("webserver", ("b",))
    hold_pods_at(core, namespace, 5)  # the scale-up stops at 5 of 30 until the quota goes
    webservers.create(cluster, namespace, "web", {"replicas": 30})
    wait_for(lambda: len(webservers.active_pods(cluster, namespace, "web")) == 5, 60, "5 of 30")
    killed = datetime.datetime.now(datetime.UTC)
    a.process.kill()  # SIGKILL: no release, the Lease has to expire
    core.delete_namespaced_resource_quota("hold", namespace)

    wait_for(lambda: leading(cluster, namespace, "webserver", b), 60, "b leading")
    ws = webservers.converged(cluster, namespace, "web", 30, timeout=180)
    converged = datetime.datetime.now(datetime.UTC)
    thash = webserver_desired.template_hash(ws["spec"])
    names = sorted(p.metadata.name for p in webservers.active_pods(cluster, namespace, "web"))
    assert names == sorted(webserver_desired.pod_name("web", thash, i) for i in range(30))
    # Every pod was created once: a's 5, b's 25.
    attempts = {inst.name: pod_creates(cluster, inst) for inst in (a, b)}
    created = {name: [n for n, c in tried if c == 201] for name, tried in attempts.items()}
    assert sorted(created["a"] + created["b"]) == names, created
    assert len(created["a"]) == 5
    # b's warm cache knew a's pods: it never tried one of their names. (A name b had just
    # created itself can be tried once more by a pass planning from a watch a moment behind:
    # AlreadyExists, then claimed as ours. Once, never in a loop.)
    refused = [(n, c) for n, c in attempts["b"] if c != 201]
    assert all(c == 409 and n in created["b"] for n, c in refused), refused
    assert len(refused) == len({n for n, _ in refused}), refused
    first_write = next(when(e) for e in writes(cluster, b) if not is_lease(e))
    print(
        f"\nfailover after SIGKILL: first write {(first_write - killed).total_seconds():.2f}s, "
        f"converged {(converged - killed).total_seconds():.2f}s"
    )


def test_a_leader_frozen_past_its_lease_writes_nothing_when_resumed_and_exits(cluster, namespace, instances):
    core = client.CoreV1Api(cluster.api)
    (a,) = instances("webserver", ("a",))
    wait_for(lambda: leading(cluster, namespace, "webserver", a), 60, "a leading")
    (b,) = instances("webserver", ("b",))
    # Frozen with work pending: creates refused by the quota, retried with backoff.
    hold_pods_at(core, namespace, 5)
    webservers.create(cluster, namespace, "web", {"replicas": 30})
    wait_for(lambda: len(webservers.active_pods(cluster, namespace, "web")) == 5, 60, "5 of 30")
    frozen_at = time.time()
    a.process.freeze()  # SIGSTOP: a VM paused, a node stalled; its monotonic clock runs on
    core.delete_namespaced_resource_quota("hold", namespace)

    wait_for(lambda: leading(cluster, namespace, "webserver", b), 60, "b leading")
    ws = webservers.converged(cluster, namespace, "web", 30, timeout=180)
    a.process.resume()
    # It wakes up past its renew deadline: controller-runtime's "leader election lost", exit 1.
    assert a.process.wait_exit(60) == leader.EXIT_CODE, a.process.log_tail()
    assert "leader election lost" in a.process.log_path.read_text()

    thash = webserver_desired.template_hash(ws["spec"])
    names = sorted(p.metadata.name for p in webservers.active_pods(cluster, namespace, "web"))
    assert names == sorted(webserver_desired.pod_name("web", thash, i) for i in range(30))
    # Once frozen, a started no write: no pod, no status, no Event, no renewal; not even one the
    # API server would have refused. Its fence let nothing through after the freeze...
    allowed = fence_passes(a.process.log_path)
    assert allowed, "no fence decision in a's log"
    assert [w for w in allowed if w[2] >= frozen_at] == []
    # ...so what reached the API server after b took over (a request the freeze caught between
    # a's fence and its bytes leaving: the case shared.client.leader leaves to the margin, as
    # controller-runtime does) had passed the fence before the freeze.
    takeover = min(when(e) for e in writes(cluster, b) if code(e) < 400)
    late = [e for e in writes(cluster, a) if when(e) >= takeover]
    for event in late:
        method, path = METHODS[event["verb"]], urllib.parse.urlsplit(event["requestURI"]).path
        assert any(w[:2] == (method, path) for w in allowed), (describe([event]), allowed[-5:])
    assert any(when(e) < takeover for e in writes(cluster, a))  # a did write while it led


METHODS = {"create": "POST", "update": "PUT", "patch": "PATCH", "delete": "DELETE"}
FENCE_PASS = re.compile(r"fence: (\w+) (\S+) allowed at ([0-9.]+)")


def fence_passes(log: Path) -> list[tuple[str, str, float]]:
    """(method, path, wall-clock time of the check) of every write the fence let through."""
    found = FENCE_PASS.findall(log.read_text(errors="replace"))
    return [(m.upper(), urllib.parse.urlsplit(p).path, float(t)) for m, p, t in found]


@pytest.mark.parametrize("operator", OPERATORS)
def test_a_clean_shutdown_releases_the_lease_and_the_standby_takes_it_at_once(
    cluster, namespace, instances, operator
):
    (a,) = instances(operator, ("a",))
    wait_for(lambda: leading(cluster, namespace, operator, a), 60, "a leading")
    (b,) = instances(operator, ("b",))
    start = lease(cluster, namespace, operator)
    history: list[client.V1LeaseSpec] = [start.spec]

    def record() -> None:
        """Every version of the Lease from here on: the released one lasts only until b's try."""
        stream = watch.Watch()
        for event in stream.stream(
            client.CoordinationV1Api(cluster.api).list_namespaced_lease,
            namespace,
            field_selector=f"metadata.name={leases.lease_name(operator)}",
            resource_version=start.metadata.resource_version,
            timeout_seconds=120,
        ):
            history.append(event["object"].spec)
            if (event["object"].spec.holder_identity or "").startswith("b_"):
                stream.stop()

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    a.process.stop()  # SIGTERM
    assert a.process.proc is not None and a.process.proc.returncode == 0, a.process.log_tail()
    wait_for(lambda: leading(cluster, namespace, operator, b), 60, "b leading")
    recorder.join(60)
    holders = [(s.holder_identity or "").split("_", 1)[0] for s in history]
    # a renewing, then released by a (no holder, 1 s), then b: nobody else in between.
    assert holders[0] == "a" and holders[-1] == "b" and "" in holders, holders
    released = holders.index("")
    assert set(holders[:released]) == {"a"} and set(holders[released:-1]) == {""}, holders
    assert history[released].lease_duration_seconds == 1
    assert history[-1].lease_transitions == history[0].lease_transitions + 1
    # b did not wait for a's last renewal to expire: it could not have before a full lease
    # duration after seeing that renewal.
    last_renewal = history[released - 1].renew_time
    waited = history[-1].acquire_time - last_renewal
    assert waited < datetime.timedelta(seconds=leader.LEASE_DURATION), (last_renewal, history[-1])
    print(f"\nhandover after SIGTERM ({operator}): {waited.total_seconds():.2f}s after a's last renewal")
