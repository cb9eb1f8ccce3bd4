"""netperf_tests_total counts each finished run once."""

from operators.netperf.status import FinishedRuns


def netperf(status: str, generation: int = 1, uid: str = "u1") -> dict:
    return {
        "metadata": {"uid": uid, "generation": generation},
        "status": {"status": status, "observedGeneration": generation},
    }


def test_a_finish_seen_again_is_not_counted_again():
    runs = FinishedRuns()
    assert runs.observe("MODIFIED", netperf("Test")) is None
    assert runs.observe("MODIFIED", netperf("Done")) == "done"
    # The retried final write (it had timed out client-side but succeeded) shows the same finish.
    assert runs.observe("MODIFIED", netperf("Done")) is None
    assert runs.observe(None, netperf("Done")) is None  # a relist replays it
    assert runs.observe("MODIFIED", netperf("Error", generation=2)) == "error"  # a new run


def test_a_listing_records_without_counting_and_deletion_forgets():
    runs = FinishedRuns()
    assert runs.observe(None, netperf("Done")) is None  # finished before this process started
    assert runs.observe("MODIFIED", netperf("Done")) is None
    runs.observe("DELETED", netperf("Done"))
    assert (
        runs.observe("ADDED", netperf("Error", uid="u1")) == "error"
    )  # same UID can't recur; the map is clean


def test_each_scheduled_run_of_one_generation_counts_once():
    runs = FinishedRuns()
    meta = {"uid": "u", "name": "np", "namespace": "ns"}

    def body(run: int, phase: str = "Done") -> dict:
        return {"metadata": meta, "status": {"status": phase, "observedGeneration": 1, "run": run}}

    assert runs.observe("MODIFIED", body(1)) == "done"
    assert runs.observe("MODIFIED", body(1)) is None
    assert runs.observe("MODIFIED", body(2, "Error")) == "error"
