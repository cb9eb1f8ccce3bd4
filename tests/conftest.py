"""Test-suite wide settings, and ``--reverse`` for running the suite back to front.

Tests must not depend on each other or on what an earlier test left behind. Two ways to check:
``pytest --reverse`` and ``pytest --random-order-bucket=global --random-order-seed=N``
(pytest-random-order; the order is the default one unless asked).
"""

import pytest
from hypothesis import settings

# No timing thresholds in tests: speed is measured in benchmarks, and a 2-core CI machine that
# is also compiling or running a control plane must not fail a property test on a slow example.
settings.register_profile("project", deadline=None, print_blob=True)
settings.load_profile("project")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--reverse", action="store_true", help="run the collected tests in reverse order")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--reverse"):
        items.reverse()
