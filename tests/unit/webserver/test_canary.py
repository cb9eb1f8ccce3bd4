"""Canary rollouts by pod ratio (``operators.webserver.canary``): the weight to pod-count
arithmetic over every accepted input, and the steps pass by pass with pods that become ready
as created (what the planner does, applied), from the status each pass wrote."""

from __future__ import annotations

import datetime

from hypothesis import given
from hypothesis import strategies as st

from operators.webserver import canary, desired, rollout, status
from operators.webserver.desired import Plan, PodView
from operators.webserver.schema import MAX_REPLICAS, rule_errors

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
STEPS = [{"weight": 25}, {"pause": {}}, {"weight": 50}, {"pause": {"seconds": 60}}]
V1 = {"replicas": 4, "image": "nginx:1", "rollout": {"strategy": "Canary", "canary": {"steps": STEPS}}}
V2 = {**V1, "image": "nginx:2"}


def at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


@given(replicas=st.integers(0, MAX_REPLICAS), weight=st.integers(0, 100))
def test_split_is_the_weight_rounded_half_up_within_the_documented_bounds(replicas, weight):
    c, s = canary.split(replicas, weight)
    assert c + s == replicas and c >= 0 and s >= 0
    if replicas == 0:
        return
    exact = replicas * weight / 100
    if weight == 0:
        assert c == 0
    elif weight == 100:
        assert s == 0
    elif replicas == 1:
        assert c == 1  # one pod: the weight above 0 asks for the canary
    elif exact < 1:
        assert c == 1
    elif exact > replicas - 1:
        assert c == replicas - 1
    else:
        assert abs(c - exact) <= 0.5  # within 1/(2 replicas) of the share asked for
        assert c == int(exact + 0.5)  # half up


@given(replicas=st.integers(1, MAX_REPLICAS), w1=st.integers(0, 100), w2=st.integers(0, 100))
def test_split_grows_with_the_weight(replicas, w1, w2):
    lo, hi = sorted((w1, w2))
    assert canary.split(replicas, lo)[0] <= canary.split(replicas, hi)[0]


def test_a_step_has_exactly_one_of_weight_and_pause_and_canary_needs_steps():
    bad = {
        "replicas": 1,
        "rollout": {"strategy": "Canary", "canary": {"steps": [{"weight": 5, "pause": {}}, {}]}},
    }
    assert [e.path for e in rule_errors(bad)] == [
        "spec.rollout.canary.steps[0]",
        "spec.rollout.canary.steps[1]",
    ]
    assert [e.path for e in rule_errors({"replicas": 1, "rollout": {"strategy": "Canary"}})] == [
        "spec.rollout.canary"
    ]
    assert rule_errors(V1) == []


class Sim:
    """One WebServer's passes: track, the canary step, the plan applied, ready pods at once."""

    def __init__(self, spec):
        self.spec, self.st, self.pods, self.t = spec, None, [], 0.0
        self.state = self.track = None

    def step(self, seconds: float = 1.0, spec=None):
        self.spec = spec or self.spec
        self.t += seconds
        now = at(self.t)
        recorded = (self.st or {}).get("canary")
        track = rollout.track(
            self.spec,
            desired.template(self.spec),
            self.st,
            self.pods,
            now,
            hold=canary.holding(self.spec, recorded),
        )
        state = canary.advance(
            self.spec,
            track.history,
            recorded,
            self.pods,
            now,
            target_hash=track.hash,
            rollback=track.rollback is not None,
        )
        if state is not None and not state.promoted and not track.paused:
            p = canary.plan("web", self.spec, self.pods, state, now)
            creates = [(s, state.canary_hash) for s in p.canary_slots] + [
                (s, state.stable_hash) for s in p.stable_slots
            ]
            plan = Plan(create_slots=p.create_slots, delete=p.delete)
        else:
            plan = desired.plan("web", self.spec, self.pods, thash=track.hash, paused=track.paused)
            creates = [(s, track.hash) for s in plan.create_slots]
        self.st = status.compute(
            name="web",
            spec=self.spec,
            generation=1,
            pods=self.pods,
            plan=plan,
            failure=None,
            current=self.st,
            now=now,
            rollout=track,
            canary=state,
        )
        self.pods = [p for p in self.pods if p.name not in plan.delete] + [
            PodView(
                desired.pod_name("web", h, s),
                h,
                "t",
                "Running",
                True,
                True,
                ready_since="2026-01-01T00:00:00Z",
            )
            for s, h in creates
        ]
        self.state, self.track = state, track
        return self

    def counts(self):
        out = {}
        for p in self.pods:
            out[p.template_hash] = out.get(p.template_hash, 0) + 1
        return out

    def progressing(self):
        c = {c["type"]: c for c in self.st["conditions"]}
        return c["Progressing"]["reason"], c["Ready"]["status"]

    def settle(self, passes=10):
        for _ in range(passes):
            self.step()
        return self


def test_steps_split_the_pods_pause_until_resumed_then_for_a_time_and_promote():
    sim = Sim(V1).settle()
    v1, v2 = desired.template_hash(V1), desired.template_hash(V2)
    assert sim.counts() == {v1: 4} and sim.st.get("canary") is None  # a first creation: no canary

    sim.step(spec=V2).settle()
    # Step 0 (25 % of 4: 1 pod) done, step 1 pauses until resumed: exactly 1 canary, 3 stable.
    assert sim.counts() == {v2: 1, v1: 3}
    assert sim.st["canary"]["step"] == 1 and sim.st["canary"]["weight"] == 25
    assert sim.progressing() == ("CanaryPaused", "False")
    # Held by design: no pass to wake for, and the progress deadline does not run.
    assert sim.state.wake_in is None and rollout.deadline_in(sim.track, sim.spec, at(sim.t)) is None

    resumed = {
        **V2,
        "rollout": {**V2["rollout"], "canary": {"steps": STEPS, "resume": {"revision": 2, "step": 1}}},
    }
    sim.step(spec=resumed).settle()
    assert sim.counts() == {v2: 2, v1: 2} and sim.st["canary"]["step"] == 3
    assert sim.progressing()[0] == "CanaryPaused" and sim.state.wake_in is not None
    sim.step(60).settle()  # the timed pause over: promoted, every pod the canary
    assert sim.counts() == {v2: 4} and sim.st["lastRolloutOutcome"] == "Available"
    assert sim.st["canary"] is None and sim.progressing() == ("ReplicasReady", "True")


def test_an_hpa_scaling_during_a_step_keeps_the_weight():
    sim = Sim(V1).settle()
    sim.step(spec=V2).settle()
    v1, v2 = desired.template_hash(V1), desired.template_hash(V2)
    sim.step(spec={**V2, "replicas": 8}).settle()
    assert sim.counts() == {v2: 2, v1: 6} and sim.st["canary"]["canaryPods"] == 2


def test_a_fast_rollback_during_a_canary_ends_it_on_the_stable_revision():
    sim = Sim(V1).settle()
    sim.step(spec=V2).settle()
    back = {**V2, "rollout": {**V2["rollout"], "rollbackTo": {}}}
    sim.step(spec=back).settle()
    assert sim.counts() == {desired.template_hash(V1): 4} and sim.st.get("canary") is None


def test_the_deadline_runs_while_a_steps_pods_start_and_stops_while_the_analysis_judges():
    analysed = {"steps": [{"weight": 25}], "analysis": {"samples": 5}}
    spec = {**V1, "progressDeadlineSeconds": 30, "rollout": {"strategy": "Canary", "canary": analysed}}
    h1 = desired.template_hash(spec)
    settled = {"step": 0, "revision": 2, "canaryHash": "x"}
    assert not canary.holding(spec, settled)  # pods of the split still starting: the deadline runs
    assert canary.holding(spec, {**settled, "analyzing": True})
    # The state a gate that has not passed yet leaves: analyzing, recorded, then held.
    history = [
        {"revision": 1, "templateHash": h1, "outcome": "Available", "template": desired.template(spec)},
        {"revision": 2, "templateHash": "x", "outcome": "Progressing"},
    ]
    observed = [PodView(f"p{i}", h, "t", "Running", True, True) for i, h in enumerate([h1, h1, h1, "x"])]
    state = canary.advance(
        spec, history, None, observed, at(0), target_hash="x", rollback=False, gate=lambda r, s: False
    )
    assert state is not None and state.analyzing and state.step == 0
    assert canary.holding(spec, state.status_field())
    passed = canary.advance(
        spec, history, None, observed, at(0), target_hash="x", rollback=False, gate=lambda r, s: True
    )
    assert passed is not None and passed.promoted
