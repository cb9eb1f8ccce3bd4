"""Next run times as Kubernetes CronJob computes them: robfig/cron v3's ``ParseStandard`` and
``Next``, the zone given as CronJob gives ``spec.timeZone`` (a ``CRON_TZ=`` prefix).

Runs our small command ``localcluster/go/robfigcron``, built from its pinned module on first use
(``localcluster.gotools``, ``make robfigcron``).
"""

from __future__ import annotations

import datetime
import functools
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from localcluster import gotools


@functools.cache
def binary() -> Path:
    return gotools.ensure("robfigcron")


@dataclass(frozen=True)
class Answer:
    times: tuple[datetime.datetime, ...] = ()  # fewer than asked: none within robfig's five years
    error: str | None = None  # ParseStandard refused the schedule


def next_times(queries: Sequence[tuple[str, str, datetime.datetime, int]]) -> list[Answer]:
    """For each (schedule, zone, after, count): robfig's next ``count`` times after ``after``."""
    lines = [
        json.dumps({"schedule": s, "zone": z, "after": a.isoformat().replace("+00:00", "Z"), "count": n})
        for s, z, a, n in queries
    ]
    out = subprocess.run(
        [str(binary())], input="\n".join(lines) + "\n", capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, f"robfigcron failed: {out.stderr}"
    answers = []
    for line in out.stdout.splitlines():
        data = json.loads(line)
        times = tuple(datetime.datetime.fromisoformat(t) for t in data.get("next") or ())
        answers.append(Answer(times=times, error=data.get("error")))
    assert len(answers) == len(queries), out.stdout
    return answers
