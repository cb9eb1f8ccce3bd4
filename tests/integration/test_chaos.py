"""A few seeds of ``make chaos`` in ``make test``: the operator SIGKILLed at random points of a
WebServer scale-up, scale-down and rollout, a TDSet boundary and a Netperf run, each one
converging to exactly the right children (``tools/bench/chaos.py`` has the checks; ``make chaos
N=100`` runs many)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.framework.cluster import Cluster
from tools.bench import chaos

# One seed per scenario (seed % 5 picks it), the kill points drawn from them.
SEEDS = [1, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_sigkill_at_a_random_point_converges(cluster: Cluster, seed: int, tmp_path: Path) -> None:
    trial = chaos.draw(seed)
    ok, why, seconds = chaos.run(chaos.Env(cluster.api, cluster.kubeconfig, tmp_path), trial)
    print(f"seed {seed} {trial.scenario}, killed {trial.kill_after:.2f}s in: {seconds:.1f}s")
    assert ok, f"seed {seed} {trial.scenario}, killed {trial.kill_after:.2f}s in: {why}"
