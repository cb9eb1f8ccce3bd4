import asyncio

import kopf
import pytest

from shared.controller.metrics import Metrics
from shared.controller.reconcile import reconciler
from shared.controller.retry import Backoff


def value(metrics, name, **labels):
    v = metrics.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


@pytest.fixture
def metrics():
    m = Metrics()
    m.init_controllers(["ctl"], 6)
    return m


def test_success_counts_and_times(metrics):
    @reconciler("ctl", metrics)
    def handler(**_):
        return "done"

    assert handler(retry=0) == "done"
    assert value(metrics, "controller_runtime_reconcile_total", controller="ctl", result="success") == 1
    assert value(metrics, "controller_runtime_reconcile_time_seconds_count", controller="ctl") == 1
    assert value(metrics, "controller_runtime_active_workers", controller="ctl") == 0


def test_unexpected_error_becomes_backed_off_temporary_error(metrics):
    @reconciler("ctl", metrics, Backoff(base=0.5, cap=100, jitter=0))
    def handler(**_):
        raise ConnectionError("api down")

    with pytest.raises(kopf.TemporaryError) as info:
        handler(retry=3)
    assert info.value.delay == pytest.approx(4.0)
    assert "attempt 4" in str(info.value) and "api down" in str(info.value)
    assert isinstance(info.value.__cause__, ConnectionError)
    assert value(metrics, "controller_runtime_reconcile_total", controller="ctl", result="error") == 1
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="ctl") == 1
    assert value(metrics, "controller_runtime_reconcile_panics_total", controller="ctl") == 0


def test_programming_error_counts_as_panic(metrics):
    @reconciler("ctl", metrics)
    def handler(**_):
        return {}["missing"]

    with pytest.raises(kopf.TemporaryError):
        handler()
    assert value(metrics, "controller_runtime_reconcile_panics_total", controller="ctl") == 1


def test_permanent_error_is_terminal_and_passes_through(metrics):
    @reconciler("ctl", metrics)
    def handler(**_):
        raise kopf.PermanentError("bad spec")

    with pytest.raises(kopf.PermanentError, match="bad spec"):
        handler()
    assert value(metrics, "controller_runtime_terminal_reconcile_errors_total", controller="ctl") == 1
    assert value(metrics, "controller_runtime_reconcile_total", controller="ctl", result="error") == 1


@pytest.mark.parametrize(("delay", "result"), [(5, "requeue_after"), (0, "requeue")])
def test_temporary_error_is_a_requeue(metrics, delay, result):
    @reconciler("ctl", metrics)
    async def handler(**_):
        raise kopf.TemporaryError("wait", delay=delay)

    with pytest.raises(kopf.TemporaryError) as info:
        asyncio.run(handler())
    assert info.value.delay == delay
    assert value(metrics, "controller_runtime_reconcile_total", controller="ctl", result=result) == 1
    assert value(metrics, "controller_runtime_reconcile_errors_total", controller="ctl") == 0


def test_async_stays_async_and_sync_stays_sync(metrics):
    @reconciler("ctl", metrics)
    async def a(**_):
        return 1

    @reconciler("ctl", metrics)
    def s(**_):
        return 2

    assert asyncio.iscoroutinefunction(a)
    assert not asyncio.iscoroutinefunction(s)
    assert asyncio.run(a()) == 1 and s() == 2
    assert value(metrics, "controller_runtime_reconcile_total", controller="ctl", result="success") == 2
