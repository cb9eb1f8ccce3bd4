"""localcluster.gotools: a pinned Go tool is built once into the cache, even when asked at once.

Parallel test workers (the unit tests that run opm and kstatus) ask for the same tool at the same
moment on a new machine; none may build into a directory another is building into or delete
it. The Go build itself is replaced here by a writer of the output file: what is under test is
the cache's locking, not Go.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from localcluster import gotools


def fake_build(calls: list[str]):
    def run_go(args: list[str], module: Path, label: str) -> None:
        out = Path(args[args.index("-o") + 1])
        calls.append(out.name)
        # Long enough for the other thread to reach the cache while this "build" runs.
        time.sleep(0.3)
        out.write_text("#!/bin/sh\n")
        out.chmod(0o755)

    return run_go


def test_a_tool_asked_for_by_two_workers_at_once_is_built_once(tmp_path, monkeypatch):
    monkeypatch.setenv("GOTOOLS_CACHE", str(tmp_path))
    calls: list[str] = []
    monkeypatch.setattr(gotools, "run_go", fake_build(calls))
    start = threading.Barrier(2)
    results: list[Path] = []
    errors: list[BaseException] = []

    def worker() -> None:
        start.wait()
        try:
            results.append(gotools.ensure("kstatus"))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert calls == list(gotools.TOOLS["kstatus"]), calls
    assert len(results) == 2 and results[0] == results[1] and results[0].is_file()
    assert not list(tmp_path.glob("*.partial"))


def test_a_built_tool_is_reused_without_a_build(tmp_path, monkeypatch):
    monkeypatch.setenv("GOTOOLS_CACHE", str(tmp_path))
    calls: list[str] = []
    monkeypatch.setattr(gotools, "run_go", fake_build(calls))
    first = gotools.ensure("kstatus")
    monkeypatch.setattr(gotools, "run_go", pytest.fail)
    assert gotools.ensure("kstatus") == first
    assert calls == list(gotools.TOOLS["kstatus"])
