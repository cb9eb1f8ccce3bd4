"""CPU cost of TDSet's calendar per pass, at the schema's limits (no cluster).

    python -m tools.bench.tdset_calendar [--repeat 20]

Times, on this machine's one core, what every pass of a TDSet computes from its spec:

- the overlap analysis of 48 windows that all overlap each other (1,128 pairs), uncached
  (the pass caches it per window list; a spec change computes it once);
- ``schedule.decide`` (replicas, layer, the next 5 transitions) for a full calendar: 48
  windows with a lead time, 32 overrides, 366 holidays, and for the tutorial's five windows.

Reports the median and the maximum over ``--repeat`` runs, and the size of the overlap notes
written to status.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time
from collections.abc import Callable
from typing import Any

from operators.tdset import schedule

UTC = datetime.UTC


def timed(work: Callable[[], Any], repeat: int) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), max(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    now = datetime.datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
    overlapping = {
        "schedulingConfig": [
            {"startTime": i % 24, "endTime": (i + 23) % 24, "replica": i} for i in range(48)
        ],
        "defaultReplica": 1,
    }

    def overlaps() -> list[str]:
        schedule._overlap_notes.cache_clear()
        return schedule.overlaps(overlapping)

    notes = overlaps()
    full = {
        **overlapping,
        "schedulingConfig": [
            {"startTime": i % 24, "startMinute": 30, "endTime": (i + 1) % 24, "replica": i, "leadTime": "45m"}
            for i in range(48)
        ],
        "timeZone": "Europe/Berlin",
        "overrides": [
            {
                "name": f"o{i}",
                "start": f"2027-01-{i % 28 + 1:02d}T08:00",
                "end": f"2027-01-{i % 28 + 1:02d}T20:00",
                "replicas": 9,
            }
            for i in range(32)
        ],
        "holidays": {
            "dates": [
                (datetime.date(2026, 12, 1) + datetime.timedelta(days=i)).isoformat()
                for i in range(0, 732, 2)
            ],
            "replicas": 1,
        },
    }
    tutorial = {
        "schedulingConfig": [
            {"startTime": 0, "endTime": 6, "replica": 1},
            {"startTime": 6, "endTime": 9, "replica": 2},
            {"startTime": 9, "endTime": 17, "replica": 5},
            {"startTime": 17, "endTime": 19, "replica": 4},
            {"startTime": 19, "endTime": 0, "replica": 2},
        ],
        "defaultReplica": 3,
    }
    rows = [
        ("overlap analysis, 48 mutually overlapping windows (uncached)", overlaps),
        ("decide: 48 windows with leadTime, 32 overrides, 366 holidays", lambda: schedule.decide(full, now)),
        ("decide: the tutorial's 5 windows", lambda: schedule.decide(tutorial, now)),
    ]
    for what, work in rows:
        median, worst = timed(work, args.repeat)
        print(f"{what}: median {median * 1000:.1f} ms, max {worst * 1000:.1f} ms")
    print(f"overlap notes in status: {len(notes)} lines, {sum(len(n) for n in notes)} characters")


if __name__ == "__main__":
    main()
