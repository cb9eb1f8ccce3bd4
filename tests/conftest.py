"""Suite-wide settings: the framework's fixtures, parallel workers, test order, the timing summary.

Tests must not depend on each other or on what an earlier test left behind. Two ways to check:
``pytest --reverse`` and ``pytest --random-order-bucket=global --random-order-seed=N``
(pytest-random-order; the order is the default one unless asked).

With ``pytest -n N --dist loadgroup`` (pytest-xdist, what ``make test`` runs) every test that
uses the real node runs on one worker, one after the other: only one real node can run per host
(containerd, kube-proxy's chains and the pod network are the machine's). The other tests spread
over all workers, each with a control plane of its own.
"""

from __future__ import annotations

import collections
import os

import pytest
from hypothesis import settings

from localcluster.process import PORTS_ENV
from tests.framework import properties

pytest_plugins = ["tests.framework.fixtures"]

# No timing thresholds in tests: speed is measured in benchmarks, and a 2-core CI machine that
# is also compiling or running a control plane must not fail a property test on a slow example.
# The full profile unless --hypothesis-profile names another (make unit: dev, fewer examples).
settings.load_profile(properties.FULL)

# Fixtures that bring up this host's one real node: every test using one joins this group.
REAL_NODE_FIXTURES = frozenset({"real_cluster", "images"})
REAL_NODE_GROUP = "real-node"


# pytest-xdist names its workers gw0, gw1, ...: each takes its ports from its own share of
# 20000-29999, so two workers never race for one port. Below the kernel's ephemeral ports
# (32768+), the real node's NodePorts (30000+) and the well-known Kubernetes ports (10250...).
PORTS = (20000, 30000)


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and PORTS_ENV not in os.environ:
        share = (PORTS[1] - PORTS[0]) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        first = PORTS[0] + int(worker[2:]) * share
        os.environ[PORTS_ENV] = f"{first}-{first + share - 1}"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--reverse", action="store_true", help="run the collected tests in reverse order")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--reverse"):
        items.reverse()


# Marks go on as each test is collected: pytest-xdist's worker turns xdist_group marks into node
# ids in its own pytest_collection_modifyitems, which may run before any of ours.
def pytest_itemcollected(item: pytest.Item) -> None:
    if item.path.parent.name == "integration":
        item.add_marker(pytest.mark.integration)
    if REAL_NODE_FIXTURES & set(getattr(item, "fixturenames", ())):
        item.add_marker(pytest.mark.real_node)
        item.add_marker(pytest.mark.xdist_group(REAL_NODE_GROUP))
    elif shares_module_setup(item):
        # One worker runs the module: its set-up (operators, Prometheus, built images) once.
        item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Fail loudly if pytest-xdist did not group the real-node tests on this worker.

    pytest-xdist 3.8 groups by rewriting ``Item._nodeid``; pytest 9.2 no longer reads it, and
    the tests then spread over all workers and fight for the one real node. constraints.txt
    pins pytest 9.1 for that; this check keeps an upgrade from breaking it unnoticed.
    """
    if not session.config.getoption("loadgroup", default=False):
        return
    for item in session.items:
        if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rpartition("]")[2]:
            raise pytest.UsageError(
                f"pytest-xdist did not group {item.nodeid}: pytest and pytest-xdist disagree on node "
                "ids (see constraints.txt); the real-node tests would run side by side"
            )


def shares_module_setup(item: pytest.Item) -> bool:
    """Whether the test uses a fixture made once per module (or class) of tests."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.values() if info is not None else ()
    return any(d.scope in ("module", "class", "package") for defs in definitions for d in defs)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The slowest modules (set-up, call and teardown of their tests, summed) and the total.

    Summed per module over whichever workers ran its tests, so the figure is the module's cost,
    comparable from run to run whatever the number of workers.
    """
    per_module: collections.Counter[str] = collections.Counter()
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                per_module[report.nodeid.split("::", 1)[0]] += report.duration
    if not per_module:
        return
    terminalreporter.section("slowest modules (seconds of tests, summed over workers)")
    for module, seconds in per_module.most_common(12):
        terminalreporter.write_line(f"{seconds:8.1f}  {module}")
    terminalreporter.write_line(f"{sum(per_module.values()):8.1f}  all {len(per_module)} modules")
