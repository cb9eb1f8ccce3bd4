"""The elector's state transitions on a fake clock and an in-memory Lease; kopf's write fence.

The real API server (optimistic concurrency, RBAC, two processes, SIGKILL/SIGSTOP/SIGTERM) is
tests/integration/test_leader_election.py's.
"""

import copy
import datetime
import re

import aiohttp
import pytest

from shared.api.errors import ApiError, NotLeaderError
from shared.client import leader
from shared.client.leader import ElectionConfig, LeaderElector

T0 = datetime.datetime(2025, 3, 1, 12, 0, tzinfo=datetime.UTC)


class Clock:
    """Monotonic seconds and the wall clock, moved together by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime.datetime:
        return T0 + datetime.timedelta(seconds=self.now - 1000.0)

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


class Leases:
    """One Lease with resourceVersion semantics, as the API server keeps it."""

    def __init__(self) -> None:
        self.lease: dict | None = None
        self.version = 0
        self.calls: list[str] = []
        self.failing = False

    def _check(self, method: str) -> None:
        self.calls.append(method)
        if self.failing:
            raise aiohttp.ClientConnectionError("unreachable")

    def _store(self, body: dict) -> dict:
        self.version += 1
        self.lease = copy.deepcopy(
            {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        )
        return copy.deepcopy(self.lease)

    async def get_if_exists(self, path: str) -> dict | None:
        self._check("GET")
        return copy.deepcopy(self.lease)

    async def create(self, path: str, body: dict) -> dict:
        self._check("POST")
        if self.lease is not None:
            raise ApiError(409, "AlreadyExists", "exists")
        return self._store(body)

    async def replace(self, path: str, body: dict) -> dict:
        self._check("PUT")
        if (
            self.lease is None
            or body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]
        ):
            raise ApiError(409, "Conflict", "the object has been modified")
        return self._store(body)

    @property
    def spec(self) -> dict:
        assert self.lease is not None
        return self.lease["spec"]


class Gauge:
    def __init__(self) -> None:
        self.value: float | None = None

    def set(self, value: float) -> None:
        self.value = value


def elector(identity: str, leases: Leases, clock: Clock, lost: list[str] | None = None, **durations):
    lost = [] if lost is None else lost
    return LeaderElector(
        ElectionConfig("ns", "web-leader", identity, **durations),
        leases,  # type: ignore[arg-type]
        on_lost=lost.append,
        status=Gauge(),
        clock=clock,
        wall=clock.wall,
        sleep=clock.sleep,
        jitter=lambda: 0.0,
    )


async def test_the_first_candidate_creates_the_lease_and_leads():
    clock, leases = Clock(), Leases()
    a = elector("a_1", leases, clock)
    assert a._status.value == 0
    assert await a.try_acquire_or_renew() and a.is_leader()
    assert leases.calls == ["GET", "POST"]
    assert leases.spec == {
        "holderIdentity": "a_1",
        "leaseDurationSeconds": 15,
        "acquireTime": "2025-03-01T12:00:00.000000Z",
        "renewTime": "2025-03-01T12:00:00.000000Z",
        "leaseTransitions": 0,
    }
    assert a._status.value == 1
    clock.now += 2
    assert await a.try_acquire_or_renew()
    assert leases.spec["renewTime"] == "2025-03-01T12:00:02.000000Z"
    assert (
        leases.spec["acquireTime"] == "2025-03-01T12:00:00.000000Z" and leases.spec["leaseTransitions"] == 0
    )


async def test_a_standby_takes_over_a_full_lease_duration_after_it_last_saw_the_record_change():
    clock, leases = Clock(), Leases()
    a, b = elector("a_1", leases, clock), elector("b_2", leases, clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.now += 2
    assert await a.try_acquire_or_renew()  # a renewal: b counts from when it sees this
    clock.now += 1
    assert not await b.try_acquire_or_renew()
    seen = clock.now
    # a is gone (killed): the record stops changing; b's own clock decides, not renewTime.
    clock.now = seen + 14.9
    assert not await b.try_acquire_or_renew()
    assert leases.calls[-1] == "GET"  # no write while the lease is valid
    clock.now = seen + 15
    assert await b.try_acquire_or_renew() and b.is_leader()
    assert leases.spec["holderIdentity"] == "b_2" and leases.spec["leaseTransitions"] == 1
    assert leases.spec["acquireTime"] == leases.spec["renewTime"]


async def test_a_leader_past_its_renew_deadline_sends_nothing_and_has_lost():
    """SIGSTOP past the deadline, then SIGCONT: the monotonic clock jumped; no write may follow."""
    clock, leases, lost = Clock(), Leases(), []
    a = elector("a_1", leases, clock, lost)
    assert await a.try_acquire_or_renew()
    clock.now += 9.99
    a.fence("POST", "/api/v1/namespaces/ns/pods")  # still within the deadline
    clock.now += 0.01
    with pytest.raises(NotLeaderError):
        a.fence("POST", "/api/v1/namespaces/ns/pods")
    assert len(lost) == 1 and "refused POST /api/v1/namespaces/ns/pods" in lost[0]
    assert a._status.value == 0 and not a.is_leader()
    # Lost for good (in production the process has exited): the Lease still names it, but it
    # neither takes it back nor releases it; it sends nothing at all.
    calls = list(leases.calls)
    assert not await a.try_acquire_or_renew()
    assert not await a.release()
    await a.run()
    assert leases.calls == calls and len(lost) == 1
    with pytest.raises(NotLeaderError):
        a.fence("DELETE", "/x")
    assert len(lost) == 1


async def test_renewal_never_writes_after_the_deadline():
    clock, leases, lost = Clock(), Leases(), []
    a = elector("a_1", leases, clock, lost)
    assert await a.try_acquire_or_renew()
    clock.now += 10
    calls = list(leases.calls)
    assert not await a.try_acquire_or_renew()
    assert leases.calls == calls  # not even a read
    assert len(lost) == 1 and "no successful renewal for 10.0s" in lost[0]


async def test_a_standby_refuses_writes_without_giving_anything_up():
    clock, leases, lost = Clock(), Leases(), []
    a, b = elector("a_1", leases, clock), elector("b_2", leases, clock, lost)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    with pytest.raises(NotLeaderError):
        b.fence("PATCH", "/x")
    assert lost == []


async def test_a_leader_that_finds_another_holder_stops_at_once():
    clock, leases, lost = Clock(), Leases(), []
    a = elector("a_1", leases, clock, lost)
    assert await a.try_acquire_or_renew()
    leases._store({**leases.lease, "spec": {**leases.spec, "holderIdentity": "intruder"}})
    clock.now += 2
    assert not await a.try_acquire_or_renew()
    assert lost == ["the lease is held by intruder"] and not a.is_leader()
    assert leases.spec["holderIdentity"] == "intruder"


async def test_release_hands_the_lease_over_at_once():
    clock, leases = Clock(), Leases()
    a, b = elector("a_1", leases, clock), elector("b_2", leases, clock)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock.now += 1
    assert await a.release()
    assert leases.spec["holderIdentity"] == "" and leases.spec["leaseDurationSeconds"] == 1
    assert not a.is_leader() and a._status.value == 0
    with pytest.raises(NotLeaderError):
        a.fence("PATCH", "/x")  # refused, and no exit: a clean shutdown is not a loss
    # b does not wait out a's 15 s.
    assert await b.try_acquire_or_renew()
    assert leases.spec["holderIdentity"] == "b_2" and leases.spec["leaseTransitions"] == 1


async def test_release_never_takes_a_lease_that_is_no_longer_ours():
    clock, leases = Clock(), Leases()
    a = elector("a_1", leases, clock)
    assert await a.try_acquire_or_renew()
    leases._store({**leases.lease, "spec": {**leases.spec, "holderIdentity": "b_2"}})
    assert not await a.release()
    assert leases.spec["holderIdentity"] == "b_2"
    # And a process that does not lead sends nothing at all.
    c, calls = elector("c_3", leases, clock), len(leases.calls)
    assert not await c.release()
    assert len(leases.calls) == calls


async def test_a_create_race_has_one_winner():
    clock, leases = Clock(), Leases()
    a, b = elector("a_1", leases, clock), elector("b_2", leases, clock)
    real_get = leases.get_if_exists

    async def both_saw_nothing(path):  # both read before either created: both try to create
        await real_get(path)

    leases.get_if_exists = both_saw_nothing  # type: ignore[method-assign]
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()  # 409 AlreadyExists: not an error, just not elected
    assert leases.spec["holderIdentity"] == "a_1"


async def test_the_run_loop_renews_every_retry_period_and_loses_after_the_renew_deadline():
    clock, leases, lost = Clock(), Leases(), []
    a = elector("a_1", leases, clock, lost)
    renewals: list[float] = []
    real_replace = leases.replace

    async def replace(path, body):
        renewals.append(clock.now)
        if len(renewals) == 3:
            leases.failing = True  # the API server goes away
        return await real_replace(path, body)

    leases.replace = replace  # type: ignore[method-assign]
    await a.run()  # returns once lost (in production on_lost exits)
    assert renewals[:3] == [1002.0, 1004.0, 1006.0]
    assert len(lost) == 1 and "no successful renewal" in lost[0]
    # The last good renewal was sent at 1004: nothing was sent at or after 1014.
    assert clock.now == pytest.approx(1014.0)


async def test_a_campaign_retries_with_jitter_until_the_lease_expires():
    clock, leases = Clock(), Leases()
    a = elector("a_1", leases, clock)
    assert await a.try_acquire_or_renew()
    b = LeaderElector(
        ElectionConfig("ns", "web-leader", "b_2"),
        leases,  # type: ignore[arg-type]
        on_lost=pytest.fail,
        clock=clock,
        wall=clock.wall,
        sleep=clock.sleep,
        jitter=lambda: 1.0,  # the longest wait: 2 s * (1 + 1.2)
    )
    tried: list[float] = []
    real_get = leases.get_if_exists

    async def get(path):
        tried.append(clock.now)
        return await real_get(path)

    leases.get_if_exists = get  # type: ignore[method-assign]

    async def run_until_leading() -> None:
        while not b.is_leader():
            await b._attempt(10)
            if not b.is_leader():
                await clock.sleep(b.config.retry_period * (1 + leader.JITTER_FACTOR))

    await run_until_leading()
    assert [round(t - 1000, 1) for t in tried] == [0, 4.4, 8.8, 13.2, 17.6]


@pytest.mark.parametrize(
    ("durations", "fragment"),
    [
        ((15, 10, 2), None),
        ((10, 10, 2), "must exceed the renew deadline"),
        ((15, 2.4, 2), "must exceed 1.2 x the retry period"),
        ((15, 10, 0), "must be positive"),
    ],
)
def test_durations_follow_client_go(durations, fragment):
    errors = leader.duration_errors(*durations)
    assert (fragment is None and errors == []) or any(fragment in e for e in errors), errors
    if fragment:
        with pytest.raises(ValueError, match=re.escape(fragment)):
            ElectionConfig("ns", "n", "id", *durations)


def test_identity_is_the_pod_and_unique_per_process():
    a, b = leader.new_identity({"POD_NAME": "web-7d9"}), leader.new_identity({"POD_NAME": "web-7d9"})
    assert a.startswith("web-7d9_") and b.startswith("web-7d9_") and a != b
    assert re.fullmatch(r"web-7d9_[0-9a-f-]{36}", a)


def test_micro_time_is_utc_with_microseconds():
    when = datetime.datetime(2025, 3, 1, 13, 0, 0, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=1)))
    assert leader.micro_time(when) == "2025-03-01T12:00:00.000005Z"
