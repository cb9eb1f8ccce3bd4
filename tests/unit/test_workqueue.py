import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from shared.api.errors import RetryError
from shared.controller.caches import OwnerCache
from shared.controller.loop import Triggers, reconcile_loop
from shared.controller.retry import Backoff
from shared.controller.slots import FairSlots
from shared.controller.workqueue import Controller


async def _until(predicate, timeout=10):
    async def poll():
        while not predicate():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), timeout)


async def test_kicks_coalesce_into_one_more_pass():
    triggers, passes, release = Triggers(), [], asyncio.Event()
    stop = False

    async def reconcile():
        passes.append(len(passes))
        if len(passes) == 1:
            await release.wait()  # kicks arrive while the first pass runs

    task = asyncio.create_task(reconcile_loop("k", reconcile, triggers, lambda: stop))
    await _until(lambda: passes)
    for _ in range(5):
        assert triggers.kick("k")
    release.set()
    await _until(lambda: len(passes) == 2)
    await asyncio.sleep(0.05)
    assert len(passes) == 2  # five kicks during pass 1 -> exactly one more pass
    stop = True
    triggers.kick("k")
    await asyncio.wait_for(task, 5)
    assert "k" not in triggers and not triggers.kick("k")


async def test_requeue_after_wakes_without_kick():
    triggers, passes = Triggers(), []

    async def reconcile():
        passes.append(1)
        return 0.01

    task = asyncio.create_task(reconcile_loop("k", reconcile, triggers, lambda: len(passes) >= 3))
    await asyncio.wait_for(task, 10)
    assert len(passes) == 3


async def test_failures_back_off_and_success_resets():
    triggers, outcomes = Triggers(), iter([ValueError("a"), ValueError("b"), None, ValueError("c")])
    delays = []
    original_wait_for = asyncio.wait_for
    seen = []

    async def reconcile():
        outcome = next(outcomes)
        seen.append(outcome)
        if outcome is not None:
            raise outcome
        return 0.0

    async def recording_wait_for(aw, timeout):
        delays.append(timeout)
        return await original_wait_for(aw, timeout)

    asyncio.wait_for = recording_wait_for  # type: ignore[assignment]
    try:
        await reconcile_loop(
            "k", reconcile, triggers, lambda: len(seen) >= 4, backoff=Backoff(base=0.001, jitter=0)
        )
    finally:
        asyncio.wait_for = original_wait_for  # type: ignore[assignment]
    assert delays == [0.001, 0.002, 0.0, 0.001]


async def test_max_idle_bounds_sleep():
    triggers, passes = Triggers(), []

    async def reconcile():
        passes.append(1)

    await reconcile_loop("k", reconcile, triggers, lambda: len(passes) >= 2, max_idle=0.01)
    assert len(passes) == 2


async def test_passes_are_recorded_as_reconciles():
    from shared.controller.metrics import Metrics

    m = Metrics()
    m.init_controllers(["c"], 1)
    outcomes = iter([None, 0.001, KeyError("bug")])
    seen = []

    async def reconcile():
        seen.append(1)
        o = next(outcomes)
        if isinstance(o, Exception):
            raise o
        return o

    await reconcile_loop(
        "k",
        reconcile,
        Triggers(),
        lambda: len(seen) >= 3,
        backoff=Backoff(base=0.001),
        metrics=m,
        controller="c",
        max_idle=0.01,
    )

    def total(result):
        return m.registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "c", "result": result}
        )

    assert (total("success"), total("requeue_after"), total("error")) == (1, 1, 1)
    assert m.registry.get_sample_value("controller_runtime_reconcile_panics_total", {"controller": "c"}) == 1
    assert m.registry.get_sample_value("controller_runtime_active_workers", {"controller": "c"}) == 0


async def test_controller_runs_one_task_per_object_and_stops_on_delete():
    from shared.controller.workqueue import Controller

    seen: list[tuple[str, str]] = []

    async def reconcile(body):
        seen.append((body["metadata"]["uid"], body["spec"]["v"]))

    ctl = Controller("c", reconcile)
    body = {"metadata": {"uid": "u1", "name": "a"}, "spec": {"v": "1"}}
    ctl.observe(None, body)  # initial listing starts the loop
    await _until(lambda: seen == [("u1", "1")])
    ctl.observe("MODIFIED", {**body, "spec": {"v": "2"}})  # latest body, one more pass
    await _until(lambda: seen[-1] == ("u1", "2"))
    ctl.kick("", "a")
    await _until(lambda: len(seen) == 3)
    assert ctl.body("", "a")["spec"] == {"v": "2"}
    ctl.observe("DELETED", body)
    assert ctl.body("", "a") is None
    ctl.kick("", "a")  # no loop any more: nothing runs
    await asyncio.sleep(0.05)
    assert len(seen) == 3
    ctl.observe("ADDED", {"metadata": {"name": "no-uid"}})  # ignored
    await ctl.shutdown()


async def test_controller_waits_for_its_gate():
    from shared.controller.workqueue import Controller

    open_gate, seen = False, []

    async def reconcile(body):
        seen.append(1)

    ctl = Controller("c", reconcile, gate=lambda: open_gate)
    ctl.observe("ADDED", {"metadata": {"uid": "u"}})
    await asyncio.sleep(0.3)
    assert seen == []  # no pass from a half-filled cache
    open_gate = True
    await _until(lambda: seen == [1])
    await ctl.shutdown()


async def test_loops_behind_a_closed_gate_share_one_poll():
    """A restart over N objects starts N loops before every watch has listed, and a standby
    (leader election) waits with every object it watches: one poll for all of them, not one each
    (3000 loops polling every 0.1 s took 39 s to ready), and an object deleted meanwhile leaves the
    others waiting."""
    open_gate, seen = False, []

    async def reconcile(body):
        seen.append(body["metadata"]["uid"])

    ctl = Controller("c", reconcile, gate=lambda: open_gate)
    for i in range(50):
        ctl.observe("ADDED", {"metadata": {"uid": f"u{i}", "name": f"o{i}"}})
    await asyncio.sleep(0.05)
    polls = [t for t in asyncio.all_tasks() if t.get_name() == "c/gate" and not t.done()]
    assert len(polls) == 1 and seen == []
    assert not ctl._tasks  # a standby holds no task per object it watches
    ctl.observe("DELETED", {"metadata": {"uid": "u0", "name": "o0"}})
    await asyncio.sleep(0.05)
    assert not polls[0].done()
    open_gate = True
    await _until(lambda: len(seen) == 49)
    assert "u0" not in seen
    await ctl.shutdown()


async def test_a_failed_pass_with_a_deadline_runs_again_by_then_whatever_the_backoff():
    """A long backoff (here 100 s) must not push a pass past the deadline it names."""
    triggers, passes = Triggers(), []
    stop = False

    async def reconcile():
        passes.append(len(passes))
        raise RetryError("the optional Service failed", not_after=0.05)

    task = asyncio.create_task(
        reconcile_loop("k", reconcile, triggers, lambda: stop, backoff=Backoff(base=100.0))
    )
    await _until(lambda: len(passes) >= 3, timeout=5)
    stop = True
    triggers.kick("k")
    await asyncio.wait_for(task, 5)


async def test_a_kick_by_name_wakes_the_object_now_holding_that_name():
    woken: list[str] = []

    async def reconcile(body):
        woken.append(body["metadata"]["uid"])

    controller = Controller("c", reconcile)
    old = {"metadata": {"namespace": "ns", "name": "web", "uid": "old"}}
    new = {"metadata": {"namespace": "ns", "name": "web", "uid": "new"}}
    controller.observe("ADDED", old)
    await _until(lambda: woken == ["old"])
    controller.observe("DELETED", old)
    controller.observe("ADDED", new)
    await _until(lambda: woken == ["old", "new"])
    controller.observe("DELETED", old)  # a late duplicate of the old one's deletion: no effect
    controller.kick("ns", "web")
    await _until(lambda: woken == ["old", "new", "new"])
    controller.kick("ns", "other")  # nothing of that name: nothing to wake
    await controller.shutdown()


async def test_an_object_being_deleted_is_not_reconciled():
    seen: list[str] = []

    async def reconcile(body):
        seen.append(body["metadata"].get("deletionTimestamp") or "live")

    controller = Controller("c", reconcile)
    live = {"metadata": {"namespace": "ns", "name": "web", "uid": "u"}}
    controller.observe("ADDED", live)
    await _until(lambda: seen == ["live"])
    controller.observe(
        "MODIFIED", {"metadata": {**live["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    )
    controller.kick("ns", "web")
    await asyncio.sleep(0.05)
    assert seen == ["live"]
    await controller.shutdown()


async def test_no_more_than_max_concurrent_reconciles_passes_run_at_once():
    """20 objects, a limit of 3: at most 3 passes run (and are counted as active workers) at a
    time, the others wait their turn, and all 20 finish once the first ones are released."""
    from shared.controller.metrics import Metrics

    limit, objects = 3, 20
    metrics = Metrics()
    metrics.init_controllers(["c"], 1)  # the controller reports its own limit
    release = asyncio.Event()
    running, most, most_active, done = 0, 0, 0.0, set()

    def active() -> float:
        return metrics.registry.get_sample_value("controller_runtime_active_workers", {"controller": "c"})

    async def reconcile(body):
        nonlocal running, most, most_active
        running += 1
        most = max(most, running)
        most_active = max(most_active, active())
        try:
            await release.wait()
        finally:
            running -= 1
        done.add(body["metadata"]["uid"])

    ctl = Controller("c", reconcile, metrics=metrics, max_concurrent_reconciles=limit)
    assert (
        metrics.registry.get_sample_value("controller_runtime_max_concurrent_reconciles", {"controller": "c"})
        == limit
    )
    for i in range(objects):  # in several namespaces: one alone gets all slots but one
        ctl.observe("ADDED", {"metadata": {"uid": f"u{i}", "namespace": f"ns{i % 4}", "name": f"o{i}"}})
    await _until(lambda: running >= limit)
    await asyncio.sleep(0.05)  # time for any pass over the limit to start
    assert (running, most) == (limit, limit)
    assert active() == limit  # passes waiting for a slot are not active workers
    labels = {"name": "c", "controller": "c"}
    assert metrics.registry.get_sample_value("workqueue_depth", labels) == objects - limit == ctl.queued
    release.set()
    await _until(lambda: len(done) == objects)
    assert most == limit and most_active == limit
    assert active() == 0
    assert metrics.registry.get_sample_value("workqueue_depth", labels) == 0
    # Every pass waited in the queue once, the first ones for no time.
    assert metrics.registry.get_sample_value("workqueue_queue_duration_seconds_count", labels) == objects
    await ctl.shutdown()


async def test_an_idle_object_holds_no_reconcile_slot():
    """With a limit of 1, an object whose pass has finished (its loop waiting for a kick) does
    not keep another object from being reconciled."""
    seen: list[str] = []

    async def reconcile(body):
        seen.append(body["metadata"]["uid"])

    ctl = Controller("c", reconcile, max_concurrent_reconciles=1)
    ctl.observe("ADDED", {"metadata": {"uid": "a", "name": "a"}})
    await _until(lambda: seen == ["a"])
    ctl.observe("ADDED", {"metadata": {"uid": "b", "name": "b"}})
    await _until(lambda: seen == ["a", "b"])
    ctl.kick("", "a")
    await _until(lambda: seen == ["a", "b", "a"])
    await ctl.shutdown()


async def test_the_limit_is_positive_and_fixed_once_objects_are_observed():
    async def reconcile(body):
        return None

    with pytest.raises(ValueError):
        Controller("c", reconcile, max_concurrent_reconciles=0)
    ctl = Controller("c", reconcile)
    ctl.max_concurrent_reconciles = 2
    ctl.observe("ADDED", {"metadata": {"uid": "u", "name": "a"}})
    with pytest.raises(RuntimeError):
        ctl.max_concurrent_reconciles = 4  # running loops would keep the old slots
    await ctl.shutdown()
    ctl.max_concurrent_reconciles = 4


async def test_a_flooded_namespace_does_not_starve_another():
    """With one slot, 100 objects queued in namespace a, then one in b: b's pass is the
    second to run, not the 101st (one first-come-first-served line made a change in a quiet
    namespace wait for every pass of a busy one)."""
    release, order = asyncio.Event(), []

    async def reconcile(body):
        order.append(body["metadata"]["namespace"])
        await release.wait()

    ctl = Controller("c", reconcile, max_concurrent_reconciles=1)
    for i in range(100):
        ctl.observe("ADDED", {"metadata": {"uid": f"a{i}", "namespace": "a", "name": f"o{i}"}})
    await _until(lambda: order == ["a"] and ctl.queued == 99)
    ctl.observe("ADDED", {"metadata": {"uid": "b", "namespace": "b", "name": "o"}})
    await _until(lambda: ctl.queued == 100)
    release.set()
    await _until(lambda: len(order) == 101)
    assert order.index("b") == 1
    assert ctl.queued == 0
    await ctl.shutdown()


async def test_fair_slots_go_round_robin_over_groups_first_come_first_served_within_each():
    slots, order = FairSlots(1), []

    async def holder(group: str, name: str) -> None:
        async with slots.slot(group):
            order.append(name)
            await asyncio.sleep(0)

    await slots.acquire("x")  # held: everyone below waits
    tasks = [
        asyncio.create_task(holder(group, f"{group}{i}"))
        for group, count in (("a", 3), ("b", 2), ("c", 1))
        for i in range(count)
    ]
    await _until(lambda: slots.waiting == 6)
    assert slots.held == 1
    slots.release("x")
    await asyncio.gather(*tasks)
    assert order == ["a0", "b0", "c0", "a1", "b1", "a2"]
    assert (slots.held, slots.waiting) == (0, 0)


async def test_a_group_that_gives_a_slot_back_goes_to_the_end_of_the_round():
    """Slots held by a and b, a queue in a and then one in b: the first slot a gives back goes
    to b, although a queued first."""
    slots, order = FairSlots(3), []
    for group in ("a", "a", "b"):
        await slots.acquire(group)

    async def holder(group: str, name: str) -> None:
        await slots.acquire(group)
        order.append(name)

    tasks = [asyncio.create_task(holder("a", f"a{i}")) for i in range(2)]
    tasks.append(asyncio.create_task(holder("b", "b0")))
    await _until(lambda: slots.waiting == 3)
    slots.release("a")
    await _until(lambda: order == ["b0"])
    assert (slots.held, slots.waiting) == (3, 2)
    slots.release("b")
    await _until(lambda: order == ["b0", "a0"])
    for group in ("a", "a", "b"):
        slots.release(group)
    await asyncio.gather(*tasks)
    assert order == ["b0", "a0", "a1"]
    slots.release("a")
    assert (slots.held, slots.waiting) == (0, 0)
    with pytest.raises(ValueError):
        FairSlots(0)


async def test_one_group_never_holds_the_last_slot():
    """A namespace whose passes are slow (a WebServer creating 100 pods at the client's
    rate) would hold every slot; the last one is left for the others, who find it free."""
    slots, order = FairSlots(4), []

    async def holder(group: str, name: str) -> None:
        await slots.acquire(group)
        order.append(name)

    busy = [asyncio.create_task(holder("a", f"a{i}")) for i in range(10)]
    await _until(lambda: len(order) == 3 and slots.waiting == 7)
    assert (slots.held, slots.held_by("a")) == (3, 3)  # the last slot stays free ...
    await holder("b", "b0")  # ... and b takes it at once
    assert (slots.held, slots.held_by("b")) == (4, 1)
    slots.release("b")  # free again, and a still waits: it holds all but one
    assert (slots.held, slots.waiting) == (3, 7)
    slots.release("a")
    await _until(lambda: len(order) == 5)
    assert (slots.held, slots.held_by("a"), slots.waiting) == (3, 3, 6)
    for _ in range(9):
        slots.release("a")
        await asyncio.sleep(0)
    await asyncio.gather(*busy)
    assert (slots.held, slots.waiting) == (0, 0)
    lone = FairSlots(1)  # nothing to keep
    await lone.acquire("a")
    assert lone.held_by("a") == 1


async def test_a_cancelled_waiter_gives_up_its_place_and_keeps_no_slot():
    slots = FairSlots(1)
    await slots.acquire("a")
    gone = asyncio.create_task(slots.acquire("b"))
    stays = asyncio.create_task(slots.acquire("c"))
    await _until(lambda: slots.waiting == 2)
    gone.cancel()  # an object deleted while its pass waited
    await asyncio.gather(gone, return_exceptions=True)
    assert (slots.held, slots.waiting) == (1, 1)
    slots.release("a")
    await stays  # the slot went past the cancelled waiter
    assert (slots.held, slots.waiting) == (1, 0)

    handed = asyncio.create_task(slots.acquire("d"))
    after = asyncio.create_task(slots.acquire("e"))
    await _until(lambda: slots.waiting == 2)
    slots.release("c")  # hands the slot to d ...
    handed.cancel()  # ... which is cancelled before it runs: the slot goes on to e
    await asyncio.gather(handed, return_exceptions=True)
    await after
    assert (slots.held, slots.waiting) == (1, 0)
    slots.release("e")
    assert slots.held == 0


def _obj(uid: str, name: str = "web", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "uid": uid}, **extra}


class _Recorder:
    """A reconcile that records the UID each pass saw, and can be held inside a pass."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.finished: list[str] = []
        self.hold: asyncio.Event | None = None

    async def __call__(self, body: Mapping[str, Any]) -> float | None:
        uid = body["metadata"]["uid"]
        self.seen.append(uid)
        if self.hold is not None:
            await self.hold.wait()
        self.finished.append(uid)
        return None


@pytest.mark.parametrize("order", ["deleted-first", "added-first"])
async def test_a_same_name_delete_and_re_create_during_a_pass_is_one_loop(order):
    """The old object's pass is cut short, the same loop (one task, never two) runs the next
    pass with the new UID, whichever of the two events kopf hands over first (it does not
    order the events of different UIDs; a relist reports the new object before the old one's
    DELETED)."""
    rec = _Recorder()
    ctl = Controller("c", rec)
    rec.hold = asyncio.Event()
    ctl.observe("ADDED", _obj("old"))
    await _until(lambda: rec.seen == ["old"])  # the pass is running, held
    loop_task = ctl._tasks[("ns", "web")]
    events = [("DELETED", _obj("old")), ("ADDED", _obj("new"))]
    for event_type, body in events if order == "deleted-first" else events[::-1]:
        ctl.observe(event_type, body)
    await _until(lambda: rec.seen == ["old", "new"])  # the new pass is running, held
    assert list(ctl._tasks) == [("ns", "web")] and ctl._tasks[("ns", "web")] is loop_task
    rec.hold.set()
    await _until(lambda: rec.finished == ["new"])  # the old pass never finished
    await asyncio.wait_for(loop_task, 5)  # idle: the loop parks
    assert not ctl._tasks
    assert ctl.body("ns", "web")["metadata"]["uid"] == "new"
    ctl.kick("ns", "web")
    await _until(lambda: rec.seen == ["old", "new", "new"])
    await ctl.shutdown()


async def test_late_events_of_a_replaced_object_change_nothing():
    rec = _Recorder()
    ctl = Controller("c", rec)
    ctl.observe(None, _obj("old"))
    await _until(lambda: rec.seen == ["old"])
    ctl.observe(None, _obj("new"))  # a relist: the name holds a new object
    await _until(lambda: rec.seen == ["old", "new"])
    ctl.observe("MODIFIED", _obj("old", spec={"late": True}))  # the old UID's worker lagging
    ctl.observe("DELETED", _obj("old"))  # ... and its deletion, reported after the new object
    ctl.kick("ns", "web")
    await _until(lambda: len(rec.seen) == 3)
    assert rec.seen == ["old", "new", "new"]
    assert ctl.body("ns", "web")["metadata"]["uid"] == "new" and ctl.uids() == {"new"}
    await ctl.shutdown()


async def test_a_deleted_event_ends_the_loop():
    rec = _Recorder()
    ctl = Controller("c", rec)
    ctl.observe("ADDED", _obj("u"))
    await _until(lambda: rec.seen == ["u"])
    await _until(lambda: not ctl._tasks)  # idle: parked, no task
    ctl.observe("DELETED", _obj("u"))  # the parked loop is not started again
    assert ("ns", "web") not in ctl.triggers and ctl.body("ns", "web") is None and not ctl.uids()
    assert not ctl._tasks  # no finished loop kept for a free name
    ctl.kick("ns", "web")  # no loop any more: nothing runs
    await asyncio.sleep(0.05)
    assert rec.seen == ["u"]
    # A DELETED during a pass cuts the pass short and ends the loop too.
    rec.hold = asyncio.Event()
    ctl.observe("ADDED", _obj("v"))
    await _until(lambda: rec.seen == ["u", "v"])
    task = ctl._tasks[("ns", "web")]
    ctl.observe("DELETED", _obj("v"))
    await asyncio.wait_for(task, 5)
    assert rec.finished == ["u"]
    await ctl.shutdown()


async def test_a_child_event_wakes_the_request_of_its_controller():
    """The child's controller reference names the owner's UID; the store maps it to the
    owner's namespace/name, whose loop runs. A child of a replaced owner wakes the object now
    holding the name (it may be waiting for that child's name)."""
    rec = _Recorder()
    ctl = Controller("c", rec)
    pods = OwnerCache(lambda body: body["metadata"]["name"])

    def pod(name: str, owner_uid: str, owner_name: str) -> dict[str, Any]:
        ref = {"kind": "WebServer", "name": owner_name, "uid": owner_uid, "controller": True}
        return {"metadata": {"namespace": "ns", "name": name, "uid": f"p-{name}", "ownerReferences": [ref]}}

    ctl.observe("ADDED", _obj("a-uid", name="a"))
    ctl.observe("ADDED", _obj("b-uid", name="b"))
    await _until(lambda: sorted(rec.seen) == ["a-uid", "b-uid"])
    ctl.child_changed(pods, "ADDED", pod("b-0", "b-uid", "b"))  # no instance label: by UID only
    await _until(lambda: len(rec.seen) == 3)
    assert rec.seen[2] == "b-uid" and pods.children("ns", "b-uid") == ["b-0"]
    ctl.child_changed(pods, "ADDED", pod("x-0", "someone-else", "x"))  # no object of ours: nobody
    ctl.observe("ADDED", _obj("b2-uid", name="b"))  # b replaced under its name
    await _until(lambda: len(rec.seen) == 4)
    ctl.child_changed(pods, "DELETED", pod("b-0", "b-uid", "b"))  # the predecessor's child goes
    await _until(lambda: len(rec.seen) == 5)
    await asyncio.sleep(0.05)
    assert rec.seen[3:] == ["b2-uid", "b2-uid"]
    await ctl.shutdown()


async def test_per_uid_state_is_forgotten_when_the_uid_leaves_its_name():
    """The UID hooks run for a replaced UID at once (once, though its DELETED comes later) and
    for a deleted one; the name hooks only when a deletion leaves the name free."""
    uids: list[str] = []
    names: list[tuple[str, str]] = []
    ctl = Controller("c", _Recorder())
    ctl.on_forget(uid=uids.append, name=lambda ns, name: names.append((ns, name)))
    ctl.observe("ADDED", _obj("old"))
    ctl.observe("ADDED", _obj("new"))  # re-created while the old one's DELETED is still on its way
    assert (uids, names) == (["old"], [])
    ctl.observe("DELETED", _obj("old"))
    assert (uids, names) == (["old"], [])  # the name is still held, by the new object
    ctl.observe("DELETED", _obj("new"))
    assert (uids, names) == (["old", "new"], [("ns", "web")])
    ctl.observe("DELETED", _obj("never-seen", name="other"))  # nothing stored: its state only
    assert (uids, names) == (["old", "new", "never-seen"], [("ns", "web")])
    await ctl.shutdown()


async def test_a_pass_cut_short_counts_as_requeue():
    from shared.controller.metrics import Metrics

    metrics = Metrics()
    metrics.init_controllers(["c"], 1)
    rec = _Recorder()
    rec.hold = asyncio.Event()
    ctl = Controller("c", rec, metrics=metrics)
    ctl.observe("ADDED", _obj("old"))
    await _until(lambda: rec.seen == ["old"])
    ctl.observe("ADDED", _obj("new"))
    rec.hold.set()
    await _until(lambda: rec.finished == ["new"])

    def total(result: str) -> float | None:
        return metrics.registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "c", "result": result}
        )

    await _until(lambda: total("success") == 1)
    assert (total("requeue"), total("error")) == (1, 0)
    await ctl.shutdown()


async def test_an_earlier_object_first_seen_after_its_successor_is_not_stored():
    """kopf may hand over the new object's ADDED before the first event of the old one (each UID
    has its own worker). Every event of the earlier object of a name has a smaller
    resourceVersion than the later one's, so the old body never replaces the new one."""
    rec = _Recorder()
    ctl = Controller("c", rec)
    forgotten: list[str] = []
    ctl.on_forget(uid=forgotten.append)

    def at(uid: str, rv: str) -> dict[str, Any]:
        body = _obj(uid)
        body["metadata"]["resourceVersion"] = rv
        return body

    ctl.observe("ADDED", at("new", "20"))
    await _until(lambda: rec.seen == ["new"])
    ctl.observe("ADDED", at("old", "9"))  # never seen before, but earlier: not stored
    ctl.observe("MODIFIED", at("old", "10"))
    ctl.observe("DELETED", at("old", "11"))
    assert ctl.body("ns", "web")["metadata"]["uid"] == "new" and forgotten == ["old"]
    ctl.observe("MODIFIED", {**at("new", "21"), "spec": {"v": 2}})  # the new object's events count
    await _until(lambda: rec.seen == ["new", "new"])
    assert ctl.body("ns", "web")["metadata"]["resourceVersion"] == "21"
    ctl.observe("ADDED", at("newer", "30"))  # a later one replaces it
    await _until(lambda: rec.seen == ["new", "new", "newer"])
    assert forgotten == ["old", "new"] and ctl.uids() == {"newer"}
    await ctl.shutdown()


def test_which_of_two_objects_of_one_name_is_later():
    from shared.controller.workqueue import is_later

    def meta(**m: str) -> dict[str, Any]:
        return {"metadata": m}

    assert is_later(meta(resourceVersion="100"), meta(resourceVersion="99"))  # numerically
    assert not is_later(meta(resourceVersion="99"), meta(resourceVersion="100"))
    ts1, ts2 = "2026-01-01T00:00:01Z", "2026-01-01T00:00:02Z"
    assert is_later(meta(resourceVersion="x", creationTimestamp=ts2), meta(creationTimestamp=ts1))
    assert not is_later(meta(creationTimestamp=ts1), meta(creationTimestamp=ts2))
    assert is_later(meta(creationTimestamp=ts1), meta(creationTimestamp=ts1))  # a tie: last seen
    assert is_later(meta(), meta())


async def test_the_echo_of_our_own_status_write_updates_the_store_but_wakes_no_pass():
    """The echo of a pass's own status write is not a reason for another pass; any other
    status change is (someone else's write, or an older write of ours arriving late)."""
    from shared.controller.workqueue import Controller

    seen: list[dict] = []

    async def reconcile(body):
        seen.append(body)

    ctl = Controller("c", reconcile, echo=lambda body: body.get("status") == {"ready": 1})
    meta = {"uid": "u1", "name": "a", "generation": 1, "labels": {"x": "1"}}
    body = {"metadata": {**meta, "resourceVersion": "1"}, "spec": {"v": 1}}
    ctl.observe(None, body)
    await _until(lambda: len(seen) == 1)

    echo = {"metadata": {**meta, "resourceVersion": "2"}, "spec": {"v": 1}, "status": {"ready": 1}}
    ctl.observe("MODIFIED", echo)
    assert ctl.body("", "a") == echo  # stored (an equal, compacted copy): the next pass reads it
    await asyncio.sleep(0.1)
    assert len(seen) == 1

    ctl.observe(None, echo)  # the same body in a listing (a relist, a resync) does
    await _until(lambda: len(seen) == 2)

    other = {"metadata": {**meta, "resourceVersion": "3"}, "spec": {"v": 1}, "status": {"ready": 0}}
    ctl.observe("MODIFIED", other)  # not the status we wrote: a pass puts it right
    await _until(lambda: len(seen) == 3)
    assert seen[-1] == other

    # What a pass reads does wake it: the spec, labels, annotations, deletion, finalizers.
    changes = [
        {"spec": {"v": 2}},
        {"metadata": {**meta, "resourceVersion": "4", "labels": {"x": "2"}}},
        {"metadata": {**meta, "resourceVersion": "5", "annotations": {"a": "b"}}},
        {"metadata": {**meta, "resourceVersion": "6", "finalizers": ["f"]}},
        {"metadata": {**meta, "resourceVersion": "7", "generation": 2}},
    ]
    for i, change in enumerate(changes, 4):
        ctl.observe("MODIFIED", {**echo, **change})
        await _until(lambda i=i: len(seen) == i)
    await ctl.shutdown()


async def test_without_an_echo_test_every_status_change_wakes_a_pass():
    from shared.controller.workqueue import Controller

    seen: list[dict] = []

    async def reconcile(body):
        seen.append(body)

    ctl = Controller("c", reconcile)
    meta = {"uid": "u1", "name": "a", "generation": 1}
    ctl.observe(None, {"metadata": {**meta, "resourceVersion": "1"}, "spec": {}})
    await _until(lambda: len(seen) == 1)
    ctl.observe("MODIFIED", {"metadata": {**meta, "resourceVersion": "2"}, "spec": {}, "status": {"r": 1}})
    await _until(lambda: len(seen) == 2)
    await ctl.shutdown()


async def test_an_idle_loop_parks_and_the_next_kick_or_its_timer_starts_it_again():
    """An object whose pass has nothing more to do holds no task: a kick, or the delay its
    pass asked for, runs the next pass as before."""
    rec, delays = _Recorder(), iter([None, 0.05, None])

    async def reconcile(body: Mapping[str, Any]) -> float | None:
        await rec(body)
        return next(delays)

    ctl = Controller("c", reconcile)
    ctl.observe("ADDED", _obj("u"))
    await _until(lambda: rec.finished == ["u"] and not ctl._tasks)
    assert ("ns", "web") not in ctl.triggers  # no task, no event: parked
    ctl.kick("ns", "web")
    await _until(lambda: rec.finished == ["u", "u"])  # asked to look again in 0.05 s
    await _until(lambda: not ctl._tasks and ("ns", "web") in ctl._timers)
    await _until(lambda: len(rec.finished) == 3)  # the timer ran it
    await _until(lambda: not ctl._tasks and not ctl._timers)
    await ctl.shutdown()


async def test_a_kick_of_a_parked_loop_cancels_its_timer():
    rec = _Recorder()
    delays = iter([60.0, None])

    async def reconcile(body: Mapping[str, Any]) -> float | None:
        await rec(body)
        return next(delays)

    ctl = Controller("c", reconcile)
    ctl.observe("ADDED", _obj("u"))
    await _until(lambda: ("ns", "web") in ctl._timers)
    timer = ctl._timers[("ns", "web")]
    ctl.kick("ns", "web")
    assert timer.cancelled() and not ctl._timers
    await _until(lambda: rec.finished == ["u", "u"] and not ctl._tasks)
    await ctl.shutdown()


async def test_the_echo_of_a_parked_objects_status_starts_no_pass():
    rec = _Recorder()
    ctl = Controller("c", rec, echo=lambda body: body.get("status") == {"ready": 1})
    ctl.observe("ADDED", _obj("u", spec={"replicas": 1}))
    await _until(lambda: rec.finished == ["u"] and not ctl._tasks)
    ctl.observe("MODIFIED", _obj("u", spec={"replicas": 1}, status={"ready": 1}))  # our write's echo
    await asyncio.sleep(0.05)
    assert rec.seen == ["u"] and not ctl._tasks
    ctl.observe("MODIFIED", _obj("u", spec={"replicas": 2}, status={"ready": 1}))  # a spec change
    await _until(lambda: rec.finished == ["u", "u"])
    await ctl.shutdown()


async def test_a_failing_loop_keeps_its_task_for_its_backoff():
    calls: list[int] = []

    async def reconcile(body: Mapping[str, Any]) -> float | None:
        calls.append(1)
        raise ValueError("the API server is down")

    ctl = Controller("c", reconcile, backoff=Backoff(base=60.0, jitter=0))
    ctl.observe("ADDED", _obj("u"))
    await _until(lambda: calls == [1])
    await asyncio.sleep(0.05)
    assert not ctl._tasks[("ns", "web")].done() and not ctl._timers
    await ctl.shutdown()


async def test_a_woken_request_holds_no_task_until_a_slot_is_handed_to_it():
    """50 objects woken at once, one slot: one task (the pass running), 49 keys in the
    queue; each task starts when the slot comes to it and ends with its pass."""
    release, running, done = asyncio.Event(), [], []

    async def reconcile(body):
        running.append(body["metadata"]["name"])
        await release.wait()
        done.append(body["metadata"]["name"])

    ctl = Controller("c", reconcile, max_concurrent_reconciles=1)
    for i in range(50):
        ctl.observe(None, _obj(f"u{i}", f"o{i}"))
    await _until(lambda: running == ["o0"])
    assert ctl.queued == 49 and len(ctl._tasks) == 1
    assert len([t for t in asyncio.all_tasks() if t.get_name().startswith("c/")]) == 1
    release.set()
    await _until(lambda: len(done) == 50)
    assert done == [f"o{i}" for i in range(50)]  # one namespace: first come first served
    await _until(lambda: not ctl._tasks)
    assert ctl.queued == 0 and not ctl._queued
    await ctl.shutdown()


async def test_a_kick_of_a_queued_request_does_not_queue_it_twice():
    """Kicks and watch events of a request waiting for a slot coalesce into the one pass it
    waits for, which sees the latest body."""
    rec = _Recorder()
    rec.hold = asyncio.Event()
    ctl = Controller("c", rec, max_concurrent_reconciles=1)
    ctl.observe("ADDED", _obj("a", "a"))
    await _until(lambda: rec.seen == ["a"])
    ctl.observe("ADDED", _obj("b", "b", spec={"v": 1}))
    for _ in range(5):
        ctl.kick("ns", "b")
    ctl.observe("MODIFIED", _obj("b", "b", spec={"v": 2}))
    assert ctl.queued == 1 and list(ctl._tasks) == [("ns", "a")]
    rec.hold.set()
    await _until(lambda: rec.finished == ["a", "b"] and not ctl._tasks)
    await asyncio.sleep(0.05)
    assert rec.seen == ["a", "b"] and ctl.queued == 0
    await ctl.shutdown()


async def test_a_request_kicked_during_its_pass_waits_in_the_queue_without_its_task():
    """With no slot free for it, a request kicked during its pass goes back in the line (at the
    end of its namespace's turn) and its task ends; its one more pass runs when a slot comes."""
    order: list[str] = []
    gates = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def reconcile(body):
        name = body["metadata"]["name"]
        order.append(name)
        if order.count(name) == 1:
            await gates[name].wait()

    ctl = Controller("c", reconcile, max_concurrent_reconciles=1)
    ctl.observe("ADDED", _obj("a", "a"))
    await _until(lambda: order == ["a"])
    ctl.observe("ADDED", _obj("b", "b"))  # queued behind a
    ctl.kick("ns", "a")  # during a's pass: one more pass for a
    gates["a"].set()
    await _until(lambda: order == ["a", "b"])  # b was first in line
    assert ctl.queued == 1 and list(ctl._tasks) == [("ns", "b")]  # a waits as a key
    gates["b"].set()
    await _until(lambda: order == ["a", "b", "a"] and not ctl._tasks)
    await asyncio.sleep(0.05)
    assert order == ["a", "b", "a"]
    await ctl.shutdown()


async def test_a_request_deleted_while_queued_gets_no_task_and_passes_the_slot_on():
    rec = _Recorder()
    rec.hold = asyncio.Event()
    ctl = Controller("c", rec, max_concurrent_reconciles=1)
    for name in ("a", "b", "c"):
        ctl.observe("ADDED", _obj(name, name))
    await _until(lambda: rec.seen == ["a"])
    ctl.observe("DELETED", _obj("b", "b"))
    rec.hold.set()
    await _until(lambda: rec.finished == ["a", "c"] and not ctl._tasks)
    assert rec.seen == ["a", "c"] and ctl.queued == 0
    await ctl.shutdown()


async def test_queued_keys_take_turns_by_group_with_waiting_tasks():
    """Keys (take_or_queue) and waiting holders (acquire) stand in one line: round-robin over
    the groups, first come first served within each; a key handed a slot holds it until its
    work gives it back, and a key no longer wanted passes the slot on."""
    started: list[str] = []
    unwanted = {"b1"}

    def start(key):
        if key in unwanted:
            return False
        started.append(key)
        return True

    slots = FairSlots(1, start)
    assert slots.take_or_queue("x", "x0")  # free: taken at once
    for group, names in (("a", ["a0", "a1", "a2"]), ("b", ["b0", "b1"]), ("c", ["c0"])):
        for name in names:
            assert not slots.take_or_queue(group, name)
    waiter = asyncio.create_task(slots.acquire("b"))  # a task waiting in b, behind b0 and b1
    await _until(lambda: slots.waiting == 7)
    # Each holder's work ends in turn, giving its slot back to the next in line.
    for group, now_started in (("x", "a0"), ("a", "b0"), ("b", "c0"), ("c", "a1"), ("a", "a2")):
        slots.release(group)
        assert started[-1] == now_started and slots.held == 1
    # b1, no longer wanted, passed the slot on to a2 above; the waiting task is next.
    assert not waiter.done() and slots.waiting == 1
    slots.release("a")
    await waiter
    assert started == ["a0", "b0", "c0", "a1", "a2"]
    assert (slots.held, slots.held_by("b"), slots.waiting) == (1, 1, 0)
    slots.release("b")
    assert slots.held == 0
    with pytest.raises(RuntimeError):
        FairSlots(1).take_or_queue("a", "k")  # keys need a start function
