"""The operator's canary analysis (``operators.webserver.analysis``): the judgement over any
figures, and the probing against real HTTP servers on the loopback (answering 200, 500, slowly,
or never), with the bound that keeps one tenant's hanging pods from delaying another's."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

from operators.webserver import analysis, desired, rollout, status
from operators.webserver.analysis import Figures
from operators.webserver.desired import Plan, PodView
from tests.framework.waits import SLACK

OPTS = {**analysis.DEFAULTS, "samples": 3, "intervalSeconds": 1, "timeoutSeconds": 1}


@given(
    n=st.integers(1, 200),
    ok=st.integers(0, 200),
    p95=st.floats(0, 10000),
    stable_p95=st.floats(0.1, 10000),
    min_success=st.integers(0, 100),
    max_p95=st.one_of(st.none(), st.integers(1, 60000)),
    over=st.one_of(st.none(), st.integers(100, 100000)),
)
def test_judge_passes_exactly_when_every_threshold_set_holds(
    *, n, ok, p95, stable_p95, min_success, max_p95, over
):
    ok = min(ok, n)
    opts = {**analysis.DEFAULTS, "samples": n, "minSuccessPercent": min_success}
    if max_p95 is not None:
        opts["maxP95Milliseconds"] = max_p95
    if over is not None:
        opts["maxP95OverStablePercent"] = over
    canary, stable = Figures(n, ok, p95), Figures(n, n, stable_p95)
    verdict, message = analysis.judge(canary, stable, opts)
    holds = (
        100.0 * ok / n >= min_success
        and (max_p95 is None or p95 <= max_p95)
        and (over is None or p95 <= stable_p95 * over / 100)
    )
    assert verdict is holds and f"{ok}/{n} ok" in message
    assert analysis.judge(Figures(n - 1, ok, p95), stable, opts)[0] is None  # too few yet


def test_summarize_takes_the_nearest_rank_p95():
    outcomes = [(True, float(ms)) for ms in range(1, 101)]
    assert analysis.summarize(outcomes) == Figures(100, 100, 95.0)
    assert analysis.summarize([(False, 7.0)]) == Figures(1, 0, 7.0)


async def until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout * SLACK
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@pytest.fixture
async def servers() -> AsyncIterator[dict[str, str]]:
    hang = asyncio.Event()

    async def good(_: web.Request) -> web.Response:
        return web.Response(text="v1")

    async def bad(_: web.Request) -> web.Response:
        return web.Response(status=500)

    async def hanging(_: web.Request) -> web.Response:
        await hang.wait()
        return web.Response(text="late")

    app = web.Application()
    app.add_routes([web.get("/good", good), web.get("/bad", bad), web.get("/hang", hanging)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield {k: f"http://127.0.0.1:{port}/{k}" for k in ("good", "bad", "hang")}
    hang.set()
    await runner.cleanup()


@pytest.mark.slow  # three real probe intervals of a second
async def test_a_canary_answering_500_fails_and_a_good_one_passes(servers):
    kicks: list[tuple[str, str]] = []
    probe = analysis.Analyzer(lambda ns, name: kicks.append((ns, name)))
    try:
        probe.observe(
            "bad", ("ns", "bad"), (2, 0), {"canary": [servers["bad"]], "stable": [servers["good"]]}, OPTS
        )
        probe.observe(
            "good", ("ns", "good"), (2, 0), {"canary": [servers["good"]], "stable": [servers["good"]]}, OPTS
        )
        await until(lambda: all(r.figures()[0].requests >= 3 for r in probe.runs.values()), "3 rounds each")
        bad, good = probe.runs["bad"].figures(), probe.runs["good"].figures()
        assert analysis.judge(*bad, OPTS)[0] is False and bad[1].successes == bad[1].requests
        assert analysis.judge(*good, OPTS)[0] is True
        assert ("ns", "bad") in kicks and ("ns", "good") in kicks
        # The same step with the pods of now keeps its figures; another step starts afresh.
        probe.observe("good", ("ns", "good"), (2, 0), {"canary": [servers["good"]], "stable": []}, OPTS)
        assert probe.runs["good"].figures()[0].requests >= 3
        fresh = probe.observe(
            "good", ("ns", "good"), (2, 2), {"canary": [servers["good"]], "stable": []}, OPTS
        )
        assert fresh[0].requests <= 1
    finally:
        await probe.close()


@pytest.mark.slow  # three real probe intervals of a second
async def test_a_tenants_hanging_pods_do_not_hold_another_tenants_probes(servers):
    # All the requests one WebServer may have in flight, plus one: another always has a slot.
    probe = analysis.Analyzer(lambda ns, name: None, in_flight=analysis.PER_OWNER + 1)
    slow = {**OPTS, "timeoutSeconds": 60, "intervalSeconds": 60}
    try:
        probe.observe("slow", ("a", "slow"), (2, 0), {"canary": [servers["hang"]] * 30, "stable": []}, slow)
        probe.observe("fast", ("b", "fast"), (2, 0), {"canary": [servers["good"]], "stable": []}, OPTS)
        await until(lambda: probe.runs["fast"].figures()[0].requests >= 3, "3 rounds of the fast tenant")
        assert probe.runs["slow"].figures()[0].requests == 0  # still hanging, not finished
        assert analysis.judge(*probe.runs["fast"].figures(), OPTS)[0] is True
    finally:
        await probe.close()


def test_an_aborted_canary_goes_back_to_the_stable_revision_and_is_degraded_with_the_figures():
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    v1 = {
        "replicas": 4,
        "image": "nginx:1",
        "rollout": {"strategy": "Canary", "canary": {"steps": [{"weight": 25}]}},
    }
    v2 = {**v1, "image": "nginx:2"}
    h1, h2 = desired.template_hash(v1), desired.template_hash(v2)

    def pods(thash, n):
        return [PodView(f"{thash}{i}", thash, "t", "Running", True, True) for i in range(n)]

    state = rollout.track(v1, desired.template(v1), None, [], t0)
    state = rollout.track(v1, desired.template(v1), state.status_fields(), pods(h1, 4), t0)
    state = rollout.track(v2, desired.template(v2), state.status_fields(), pods(h1, 4), t0)
    said = "canary 0/3 ok (0.0 %), p95 3 ms; stable 3/3 ok (100.0 %), p95 2 ms: success 0.0 % < 99 %"
    observed = pods(h1, 3) + pods(h2, 1)
    state = rollout.track(v2, desired.template(v2), state.status_fields(), observed, t0, abort=said)
    assert state.hash == h1 and state.rollback is not None and state.rollback["analysis"] == said
    assert state.rolled_back is not None and "failed its analysis" in state.rolled_back
    assert [e["outcome"] for e in state.history] == ["Available", "RolledBack", "Progressing"]
    st_ = status.compute(
        name="web",
        spec=v2,
        generation=2,
        pods=observed,
        plan=Plan(),
        failure=None,
        current=None,
        now=t0,
        rollout=state,
    )
    cond = {c["type"]: c for c in st_["conditions"]}
    assert (cond["Degraded"]["status"], cond["Degraded"]["reason"]) == ("True", "CanaryAnalysisFailed")
    assert cond["Degraded"]["message"] == said
    assert "failed its canary analysis" in cond["Progressing"]["message"]
