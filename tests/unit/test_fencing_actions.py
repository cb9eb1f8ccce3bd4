"""Leader fencing on the fake API server: two operator processes, each with a leader elector on
a client of its own and the operator's writes on a fenced client, all of one
``tests.framework.fakekube.FakeKube`` server. Only the leader's writes reach it; a leader
past its renew deadline sends nothing more.
"""

from __future__ import annotations

import pytest

from shared.api.errors import NotLeaderError
from shared.client.kube import namespaced
from shared.client.leader import ElectionConfig, LeaderElector
from tests.framework.fakekube import FakeKube, fail

NS = "ns"
CM = namespaced(NS, "configmaps")
CONFIG = {"namespace": "operators", "name": "webserver-operator"}


def configmap(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


class Process:
    """One operator process: its elector's own client, and the operator's client it fences."""

    def __init__(self, server: FakeKube, identity: str, now: list[float]) -> None:
        self.lost: list[str] = []
        self.lease_client = server.client()
        self.elector = LeaderElector(
            ElectionConfig(identity=identity, **CONFIG),
            self.lease_client,
            clock=lambda: now[0],
            on_lost=self.lost.append,
        )
        self.kube = server.client()
        self.kube.fence = self.elector.fence


async def test_only_the_leaders_writes_reach_the_api_server():
    server, now = FakeKube(), [0.0]
    a, b = Process(server, "a", now), Process(server, "b", now)

    assert await a.elector.try_acquire_or_renew()
    assert not await b.elector.try_acquire_or_renew()
    assert a.lease_client.keys() == [("create", "leases", "operators", "webserver-operator", "")]
    assert b.lease_client.keys() == []  # it read the Lease, held by a

    await a.kube.create(CM, configmap("from-a"))
    with pytest.raises(NotLeaderError):
        await b.kube.create(CM, configmap("from-b"))
    assert b.kube.actions == []  # refused before it was sent
    assert [c["metadata"]["name"] for c in server.objects("configmaps")] == ["from-a"]

    # a stops renewing (frozen): past its renew deadline its writes are refused, and it has lost.
    now[0] += a.elector.config.renew_deadline + 1
    with pytest.raises(NotLeaderError):
        await a.kube.create(CM, configmap("late"))
    assert a.lost and a.kube.keys() == [("create", "configmaps", NS, "from-a", "")]

    # b takes over a lease duration after it last saw the record change, and may write.
    now[0] += a.elector.config.lease_duration
    assert await b.elector.try_acquire_or_renew()
    assert b.lease_client.keys() == [("update", "leases", "operators", "webserver-operator", "")]
    await b.kube.create(CM, configmap("from-b"))
    assert [c["metadata"]["name"] for c in server.objects("configmaps")] == ["from-a", "from-b"]


async def test_candidates_acting_on_stale_reads_never_take_a_held_lease():
    server, now = FakeKube(), [0.0]
    a, b = Process(server, "a", now), Process(server, "b", now)
    lease = ("leases", "operators", "webserver-operator")

    # b read before a created the Lease: its create is refused (AlreadyExists), a leads.
    b.lease_client.prepend_reactor("get", "leases", fail(404), times=1)
    assert await a.elector.try_acquire_or_renew()
    assert not await b.elector.try_acquire_or_renew()
    assert b.lease_client.keys() == [("create", *lease, "")]

    # b's reads are stale from now on (the record it sees never changes), while a renews: once
    # a lease duration has passed b tries to take the Lease, with the resourceVersion it read.
    stale = server.object(a.elector.path)
    b.lease_client.prepend_reactor("get", "leases", lambda action: stale)
    b.lease_client.clear_actions()
    config = a.elector.config
    while now[0] <= config.lease_duration + config.retry_period:
        now[0] += config.retry_period
        assert await a.elector.try_acquire_or_renew()
        assert not await b.elector.try_acquire_or_renew()
    assert b.lease_client.keys() == [("update", *lease, "")]  # refused: Conflict
    assert server.object(a.elector.path)["spec"]["holderIdentity"] == "a"
    assert a.elector.is_leader() and not b.elector.is_leader() and not a.lost
