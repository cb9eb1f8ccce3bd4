import asyncio

import pytest

from shared.retry import Backoff
from shared.workqueue import Controller, RetryError, Triggers, reconcile_loop


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
    from shared.metrics import Metrics

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
    from shared.workqueue import Controller

    seen: list[tuple[str, str]] = []

    async def reconcile(body):
        seen.append((body["metadata"]["uid"], body["spec"]["v"]))

    ctl = Controller("c", reconcile)
    body = {"metadata": {"uid": "u1", "name": "a"}, "spec": {"v": "1"}}
    ctl.observe(None, body)  # initial listing starts the loop
    await _until(lambda: seen == [("u1", "1")])
    ctl.observe("MODIFIED", {**body, "spec": {"v": "2"}})  # latest body, one more pass
    await _until(lambda: seen[-1] == ("u1", "2"))
    ctl.kick("u1")
    await _until(lambda: len(seen) == 3)
    assert ctl.body("u1")["spec"] == {"v": "2"}
    ctl.observe("DELETED", body)
    assert ctl.body("u1") is None
    ctl.kick("u1")  # no loop any more: nothing runs
    await asyncio.sleep(0.05)
    assert len(seen) == 3
    ctl.observe("ADDED", {"metadata": {"name": "no-uid"}})  # ignored
    await ctl.shutdown()


async def test_controller_waits_for_its_gate():
    from shared.workqueue import Controller

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


async def test_objects_behind_a_closed_gate_share_one_poll():
    """A standby (leader election) waits with every object it watches: one poll, not one each,
    and an object deleted meanwhile leaves the others waiting."""
    open_gate, seen = False, []

    async def reconcile(body):
        seen.append(body["metadata"]["uid"])

    ctl = Controller("c", reconcile, gate=lambda: open_gate)
    for i in range(50):
        ctl.observe("ADDED", {"metadata": {"uid": f"u{i}", "name": f"o{i}"}})
    await asyncio.sleep(0.05)
    polls = [t for t in asyncio.all_tasks() if t.get_name() == "c/gate" and not t.done()]
    assert len(polls) == 1 and seen == []
    ctl.observe("DELETED", {"metadata": {"uid": "u0", "name": "o0"}})
    await asyncio.sleep(0.05)
    assert not polls[0].done()
    open_gate = True
    await _until(lambda: len(seen) == 49)
    assert "u0" not in seen
    await ctl.shutdown()


async def test_a_failed_pass_with_a_deadline_runs_again_by_then_whatever_the_backoff():
    """#15.7: a long backoff (here 100 s) must not push a pass past the deadline it names."""
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


async def test_kick_name_wakes_the_object_now_holding_that_name():
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
    controller.kick_name("ns", "web")
    await _until(lambda: woken == ["old", "new", "new"])
    controller.kick_name("ns", "other")  # nothing of that name: nothing to wake
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
    controller.kick("u")
    await asyncio.sleep(0.05)
    assert seen == ["live"]
    await controller.shutdown()


async def test_no_more_than_max_concurrent_reconciles_passes_run_at_once():
    """20 objects, a limit of 3: at most 3 passes run (and are counted as active workers) at a
    time, the others wait their turn, and all 20 finish once the first ones are released."""
    from shared.metrics import Metrics

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
    for i in range(objects):
        ctl.observe("ADDED", {"metadata": {"uid": f"u{i}", "namespace": "ns", "name": f"o{i}"}})
    await _until(lambda: running >= limit)
    await asyncio.sleep(0.05)  # time for any pass over the limit to start
    assert (running, most) == (limit, limit)
    assert active() == limit  # passes waiting for a slot are not active workers
    release.set()
    await _until(lambda: len(done) == objects)
    assert most == limit and most_active == limit
    assert active() == 0
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
    ctl.kick("a")
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
