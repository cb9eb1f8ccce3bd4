"""``make chaos``: SIGKILL an operator at random points of its work and check it converges.

    python -m tools.bench.chaos [--trials 100] [--seed 1]

Each trial draws a scenario and a kill delay from a seeded RNG: a WebServer scale-up,
scale-down or rollout, a TDSet crossing a window boundary, or a Netperf run (killed in any of
its phases, or while it writes its result). It starts the operator (watching a fresh namespace
of the local control plane, kwok nodes), makes the change, SIGKILLs the operator after the
delay (no clean shutdown: an OOM kill or a lost node), starts it again and waits until the
children are exactly right: the expected count, nothing duplicated, nothing orphaned, every
child controlled by its owner, and a status that says so. One line per trial, then
``converged K/N``; the exit status is 1 unless every trial converged.

``tests/integration/test_chaos.py`` runs a few fixed seeds of the same trials in ``make test``.
"""

from __future__ import annotations

import argparse
import datetime
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kubernetes import client, config

from localcluster import cluster as localcluster
from shared.api.clock import OFFSET_ENV
from tests.framework import netperfs, tdsets, webservers
from tests.framework.namespaces import delete_namespace, fresh_namespace
from tests.framework.operator_process import OperatorProcess
from tests.framework.waits import wait_for

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = ("scale-up", "scale-down", "rollout", "tdset-boundary", "netperf-run")
UTC = datetime.UTC


@dataclass(frozen=True)
class Trial:
    seed: int
    scenario: str
    kill_after: float  # seconds after the change


def draw(seed: int) -> Trial:
    rng = random.Random(seed)
    scenario = SCENARIOS[seed % len(SCENARIOS)]  # every scenario equally often, whatever N
    return Trial(seed, scenario, round(rng.uniform(0.0, 3.0), 2))


@dataclass
class Env:
    api: client.ApiClient
    kubeconfig: Path
    workdir: Path

    @property
    def cluster(self) -> Any:
        return SimpleNamespace(api=self.api)  # what the test helpers read


class Operator:
    """One operator for one namespace, killed and started again at will."""

    def __init__(self, env: Env, name: str, namespace: str, extra: dict[str, str] | None = None) -> None:
        self.env, self.name, self.namespace, self.extra = env, name, namespace, extra or {}
        self.proc: OperatorProcess | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = self.env.workdir / f"{self.namespace}-{self.name}-{self.starts}.log"
        self.proc = OperatorProcess(
            f"operators.{self.name}", self.env.kubeconfig, log, namespaces=self.namespace, env=self.extra
        ).start()

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def _owned_exactly(env: Env, namespace: str, uid: str, count: int) -> bool:
    """``count`` live pods, all controlled by ``uid``, and no other live pod in the namespace."""
    pods = client.CoreV1Api(env.api).list_namespaced_pod(namespace).items
    live = [p for p in pods if p.metadata.deletion_timestamp is None]
    owned = [p for p in live if any(r.controller and r.uid == uid for r in p.metadata.owner_references or [])]
    return len(owned) == count == len(live)


def webserver_trial(env: Env, trial: Trial, namespace: str, rng: random.Random) -> None:
    op = Operator(env, "webserver", namespace)
    op.start()
    try:
        before, after, spec_change = {
            "scale-up": (rng.randint(0, 2), rng.randint(6, 15), {}),
            "scale-down": (rng.randint(8, 15), rng.randint(0, 4), {}),
            "rollout": (r := rng.randint(2, 6), r, {"image": "nginx:1.28"}),
        }[trial.scenario]
        webservers.create(env.cluster, namespace, "web", {"replicas": before})
        webservers.converged(env.cluster, namespace, "web", before)
        webservers.patch_spec(env.cluster, namespace, "web", {"replicas": after, **spec_change})
        time.sleep(trial.kill_after)  # the kill point itself: a random instant inside the work
        op.kill()
        op.start()
        ws = webservers.converged(env.cluster, namespace, "web", after)
        uid = ws["metadata"]["uid"]
        wait_for(
            lambda: _owned_exactly(env, namespace, uid, after), 60, "exactly the owned pods, nothing else"
        )
        if spec_change:
            pods = webservers.active_pods(env.cluster, namespace, "web")
            assert all(p.spec.containers[0].image == "nginx:1.28" for p in pods), "a pod on the old template"
    finally:
        op.stop()


def tdset_trial(env: Env, trial: Trial, namespace: str, rng: random.Random) -> None:
    # The operator's clock (shifted, and continuous across the restart): a boundary ~4 s after
    # the TDSet is created, so the kill falls before, at or after it.
    now = datetime.datetime.now(UTC)
    boundary = (now + datetime.timedelta(minutes=1)).replace(second=0, microsecond=0)
    shifted_start = boundary - datetime.timedelta(seconds=10)
    offset = (shifted_start - now).total_seconds()
    op = Operator(env, "tdset", namespace, {OFFSET_ENV: f"{offset:.6f}"})
    op.start()
    try:
        window = {
            "startTime": boundary.hour,
            "startMinute": boundary.minute,
            "endTime": (boundary.hour + 8) % 24,
            "replica": rng.randint(3, 6),
        }
        spec = {**tdsets.steady(2), "schedulingConfig": [window]}
        shifted = lambda: datetime.datetime.now(UTC) + datetime.timedelta(seconds=offset)  # noqa: E731
        wait_for(lambda: shifted() >= boundary - datetime.timedelta(seconds=5), 30, "5 s before the boundary")
        tdsets.create(env.cluster, namespace, "shop", spec)
        time.sleep(1.0 + trial.kill_after * 2.5)  # 1..8.5 s: the boundary is ~5 s in
        op.kill()
        op.start()
        tdsets.replicas_become(env.cluster, namespace, "shop", window["replica"], "the window's replicas")
        uid = tdsets.get(env.cluster, namespace, "shop")["metadata"]["uid"]
        deps = client.AppsV1Api(env.api).list_namespaced_deployment(namespace).items
        assert [d.metadata.name for d in deps] == ["shop"], "one Deployment"
        assert [r.uid for r in deps[0].metadata.owner_references] == [uid]
        wait_for(
            lambda: (tdsets.get(env.cluster, namespace, "shop").get("status") or {}).get("activeWindow") == 0,
            30,
            "status shows the window",
        )
    finally:
        op.stop()


def netperf_trial(env: Env, trial: Trial, namespace: str, rng: random.Random) -> None:
    op = Operator(env, "netperf", namespace)
    op.start()
    try:
        netperfs.create(env.cluster, namespace, "np", {})
        kill_in_finish = rng.random() < 0.3
        if not kill_in_finish:
            time.sleep(trial.kill_after)  # Initial, Server or Test
            op.kill()
            op.start()
        s = netperfs.in_test(env.cluster, namespace, "np")
        pods = [p for p in netperfs.pods(env.cluster, namespace) if p.metadata.deletion_timestamp is None]
        assert sorted(p.metadata.name for p in pods) == ["np-client-1", "np-server-1"], "one pod of each"
        netperfs.finish_client(env.cluster, namespace, s["clientPod"], netperfs.fixture("tcp_stream"))
        if kill_in_finish:
            time.sleep(trial.kill_after / 3)  # while it writes the result and deletes the pods
            op.kill()
            op.start()
        done = netperfs.phase_is(env.cluster, namespace, "np", "Done", timeout=90)
        assert done.get("speedBitsPerSec"), "a result"
        netperfs.no_pods_left(env.cluster, namespace)
    finally:
        op.stop()


TRIALS: dict[str, Callable[[Env, Trial, str, random.Random], None]] = {
    "scale-up": webserver_trial,
    "scale-down": webserver_trial,
    "rollout": webserver_trial,
    "tdset-boundary": tdset_trial,
    "netperf-run": netperf_trial,
}


def run(env: Env, trial: Trial) -> tuple[bool, str, float]:
    """One trial in a fresh namespace; (converged, what went wrong, seconds)."""
    core = client.CoreV1Api(env.api)
    namespace = fresh_namespace(core, f"chaos-{trial.seed}", {"localcluster.dev/test": "true"})
    t0 = time.monotonic()
    try:
        TRIALS[trial.scenario](env, trial, namespace, random.Random(trial.seed * 7919))
    except Exception as exc:  # an API error is a failed trial too, not the end of the run
        return (
            False,
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            time.monotonic() - t0,
        )
    finally:
        delete_namespace(core, namespace)
    return True, "", time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1, help="first seed; trial i uses seed + i")
    args = parser.parse_args(argv)
    crds = sorted((REPO / "bundle" / "manifests").glob("*.yaml"))  # as the tests do
    t0 = time.monotonic()
    print(f"chaos: {args.trials} trials from seed {args.seed}; starting the local control plane", flush=True)
    with localcluster.running(crds=crds) as cl:
        env = Env(
            config.new_client_from_config(config_file=str(cl.kubeconfig)),
            cl.kubeconfig,
            Path(tempfile.mkdtemp()),
        )
        results = []
        for i in range(args.trials):
            trial = draw(args.seed + i)
            ok, why, seconds = run(env, trial)
            results.append((trial, ok))
            verdict = "converged" if ok else f"NOT CONVERGED: {why}"
            print(
                f"[{i + 1}/{args.trials} {time.monotonic() - t0:5.0f}s] seed {trial.seed} {trial.scenario}, "
                f"killed {trial.kill_after:.2f}s in: {verdict} ({seconds:.1f}s)",
                flush=True,
            )
    good = sum(ok for _, ok in results)
    per = {
        s: (sum(ok for t, ok in results if t.scenario == s), sum(t.scenario == s for t, _ in results))
        for s in SCENARIOS
    }
    print("  ".join(f"{s} {k}/{n}" for s, (k, n) in per.items()))
    print(f"converged {good}/{len(results)} in {time.monotonic() - t0:.0f}s (operator logs in {env.workdir})")
    return 0 if good == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
