import shutil
import subprocess

import pytest

from shared.metrics import RECONCILE_BUCKETS, RESULTS, Metrics


def test_all_results_initialised_to_zero():
    m = Metrics()
    m.init_controllers(["a", "b"], 6)
    for c in ("a", "b"):
        for result in RESULTS:
            assert (
                m.registry.get_sample_value(
                    "controller_runtime_reconcile_total", {"controller": c, "result": result}
                )
                == 0.0
            )
        assert (
            m.registry.get_sample_value("controller_runtime_max_concurrent_reconciles", {"controller": c})
            == 6
        )


def test_exposition_has_no_created_series_and_standard_buckets():
    m = Metrics()
    m.init_controllers(["a"], 6)
    m.reconcile_time.labels("a").observe(0.2)
    text = m.exposition().decode()
    assert "_created" not in text
    assert 'le="0.005"' in text and 'le="60.0"' in text
    assert len(RECONCILE_BUCKETS) == 40


def test_registries_are_private():
    a, b = Metrics(), Metrics()
    a.init_controllers(["x"], 1)
    a.reconcile_total.labels("x", "success").inc()
    assert (
        b.registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "x", "result": "success"}
        )
        is None
    )


def test_promtool_finds_nothing():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool missing: `make test` installs Debian's prometheus package")
    m = Metrics()
    m.init_controllers(["webserver"], 6)
    m.reconcile_time.labels("webserver").observe(0.1)
    proc = subprocess.run(
        [promtool, "check", "metrics"], check=False, input=m.exposition(), capture_output=True
    )
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    assert proc.stdout.decode().strip() == "" and proc.stderr.decode().strip() == ""
