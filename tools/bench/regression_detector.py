"""The regression detector's error budget, on synthetic run histories (seeded, no cluster).

    python -m tools.bench.regression_detector [--series 50] [--trials 400] [--seed 1]

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Iterator
from typing import Any

from operators.netperf import measurement, schedule, schema

RUNS = 720  # 30 days of hourly runs
HORIZON = 24  # runs after a drop within which detection is looked for
FALSE_CVS = (0.02, 0.05, 0.10, 0.15, 0.20)
DROPS = (0.10, 0.15, 0.20, 0.30, 0.50)
DETECT_CVS = (0.02, 0.05, 0.08, 0.10, 0.15, 0.20)
SHIPPED = schema.samples({"schedule": "@hourly"})  # a scheduled Netperf's samples by default
MEASUREMENT = measurement.with_key({})["key"]  # the default spec's: every run measures the same


class Link:
    """A simulated scheduled Netperf: its history and the verdict on each new run."""

    def __init__(self, rng: random.Random, cv: float, samples: int) -> None:
        self.rng, self.cv, self.samples = rng, cv, samples
        self.history: list[dict[str, Any]] = []
        self.run = 0
        self.settings = schedule.Settings()

    def _item(self, level: float) -> dict[str, Any]:
        self.run += 1
        values = [max(0.0, self.rng.gauss(level, self.cv * level)) for _ in range(self.samples)]
        return {
            "run": self.run,
            "result": "Done",
            "testType": "TCP_STREAM",
            "measurement": MEASUREMENT,
            "samples": values,
        }

    def fill(self, level: float) -> None:
        """A full history at ``level`` (not judged: as after a day of runs)."""
        for _ in range(schedule.DEFAULT_HISTORY):
            self.history = schedule.appended(self.history, self._item(level), schedule.DEFAULT_HISTORY)

    def measure(self, level: float) -> bool:
        """One run at ``level``: whether it is judged Regressed."""
        item = self._item(level)
        judged = schedule.verdict(self.history, item, self.settings)
        self.history = schedule.appended(self.history, item, schedule.DEFAULT_HISTORY)
        return isinstance(judged, schedule.Judgement) and judged.regressed


def false_alarms(seed: int, cv: float, series: int, samples: int) -> tuple[float, float]:
    """(Regressed verdicts, Regressed episodes) per 720 runs of an unchanged link."""
    rng = random.Random(f"{seed}-false-{cv}-{samples}")
    flagged = episodes = 0
    for _ in range(series):
        link = Link(rng, cv, samples)
        link.fill(1e9)
        before = False
        for _ in range(RUNS):
            now = link.measure(1e9)
            flagged += now
            episodes += now and not before
            before = now
    return flagged / series, episodes / series


def delays(seed: int, cv: float, drop: float, trials: int, samples: int) -> Iterator[int | None]:
    """Per trial, the runs after a sustained drop until the first Regressed (None: not within HORIZON)."""
    rng = random.Random(f"{seed}-detect-{cv}-{drop}-{samples}")
    for _ in range(trials):
        link = Link(rng, cv, samples)
        link.fill(1e9)
        found = None
        for k in range(1, HORIZON + 1):
            if link.measure(1e9 * (1 - drop)):
                found = k
                break
        yield found


def detection_table(seed: int, trials: int, samples: int) -> list[str]:
    lines = [
        "| drop | CV | within 1 run | within 2 | within 3 | median runs to detect |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for drop in DROPS:
        for cv in DETECT_CVS:
            found = list(delays(seed, cv, drop, trials, samples))
            within = [sum(1 for d in found if d is not None and d <= k) / trials for k in (1, 2, 3)]
            hits = sorted(d if d is not None else HORIZON + 1 for d in found)
            median = statistics.median(hits)
            med = f"{median:g}" if median <= HORIZON else f"> {HORIZON}"
            lines.append(
                f"| {drop:.0%} | {cv:.0%} | {within[0]:.1%} | {within[1]:.1%} | {within[2]:.1%} | {med} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Each run is ``samples`` normal samples (default: a scheduled Netperf's shipped default, 5,
    then 3 to compare) around the link's level with a coefficient of variation (CV) between
    samples; the run's history entry and its judgement go
    through the operator's own path (``schedule.verdict`` with the default settings, the default
    history of 24 results). Prints, as Markdown tables:

    - **false alarms**: ``--series`` series of 720 hourly runs (30 days) with no change, per CV:
      Regressed verdicts and Regressed episodes (a page: the condition turning True) per 720 runs;
    - **detection**: a level held for a full history, then a sustained drop; per drop and CV, the
      share of ``--trials`` trials flagged within 1, 2 and 3 runs of the drop, and the median runs
      to the first Regressed (within 24 runs);
    - all of it per ``--samples``;
    - the CPU time of one verdict on a full history (this process, whatever else the machine runs).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=50, help="series of 720 runs per CV (false alarms)")
    parser.add_argument("--trials", type=int, default=300, help="trials per drop and CV (detection)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--samples",
        type=int,
        nargs="+",
        default=[SHIPPED, schema.DEFAULT_SAMPLES],
        help="samples per run (default: a scheduled Netperf's, then the unscheduled default)",
    )
    args = parser.parse_args(argv)
    s = schedule.Settings()
    print(
        f"defaults: pValue {s.p_value}, minChangePercent {s.min_change_percent:g}, direction {s.direction}, "
        f"history {schedule.DEFAULT_HISTORY}; seed {args.seed}"
    )
    for samples in args.samples:
        shipped = " (the shipped default of a scheduled Netperf)" if samples == SHIPPED else ""
        print(f"\n### samples: {samples}{shipped}\n")
        print(f"False alarms, {args.series} series x {RUNS} runs per CV, no change:\n")
        print("| CV | Regressed verdicts per 720 runs | Regressed episodes per 720 runs |")
        print("| --- | --- | --- |")
        cpu = time.process_time()
        for cv in FALSE_CVS:
            flagged, episodes = false_alarms(args.seed, cv, args.series, samples)
            print(f"| {cv:.0%} | {flagged:.2f} | {episodes:.2f} |", flush=True)
        per = (time.process_time() - cpu) / max(1, len(FALSE_CVS) * args.series * RUNS)
        print(f"\nCPU per verdict (a full history of {schedule.DEFAULT_HISTORY}): {per * 1e3:.2f} ms")
        print(f"\nDetection of a sustained drop, {args.trials} trials each:\n")
        for line in detection_table(args.seed, args.trials, samples):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
