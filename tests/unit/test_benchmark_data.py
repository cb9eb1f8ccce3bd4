"""The benchmarks' results behind the benchmarks page: each says how to reproduce it, when and
at which commit it was measured, and is plotted (``tools.generate.benchmarks``)."""

from __future__ import annotations

import re

import pytest

from tools.generate import benchmarks

DATASETS = benchmarks.load()


def test_there_are_results_and_each_has_a_plot():
    assert DATASETS
    assert set(DATASETS) <= set(benchmarks.PLOTTERS)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_a_result_names_its_command_date_commit_conditions_and_record(name):
    data = DATASETS[name]
    commands = [c.removeprefix("sudo ") for c in data["command"]]
    assert commands and all(c.startswith("python -m tools.bench.") for c in commands)
    for command in commands:
        module = command.split()[2]
        assert (benchmarks.REPO / (module.replace(".", "/") + ".py")).is_file(), command
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", data["date"])
    assert data["commit"] and data["conditions"] and data["rows"]
    page, _, anchor = data["source"].partition("#")
    assert (benchmarks.REPO / page).is_file() and anchor
