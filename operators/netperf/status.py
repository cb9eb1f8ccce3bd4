"""Netperf status for each phase, written whole (pure).

Phases in ``status.status``: ``Initial`` (a run is claimed: ``startedAt`` and the pod names
are recorded before any pod exists) → ``Server`` → ``Test`` → ``Done``, or ``Error`` with a
CamelCase ``reason`` and a ``message``. A new run (new generation) clears the previous
results. Conditions:

- ``Progressing``: True while a run is under way (reason = phase), False when it ended
  (``Completed`` or the error's reason);
- ``Complete``: True once results are recorded;
- ``Degraded``: True with the reason when the run ended in ``Error`` (``InvalidSpec`` with
  the field paths for a spec the schema rejects), False otherwise;
- ``Regressed`` (scheduled Netperfs, :mod:`.schedule`): the latest result judged against its
  baseline, set by the reconciler's ``record`` when a run ends;
- ``Reconciling``/``Stalled``/``Ready`` (:func:`shared.api.conditions.readiness`, what kstatus and
  Argo CD judge): a one-off benchmark is done when its run is: ``Reconciling`` while it runs,
  ``Ready`` once ``Done``, ``Stalled`` after an ``Error`` (the run is over for this generation;
  only a changed spec starts another).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from operators.netperf import schedule
from operators.netperf.desired import PodNames
from operators.netperf.parse import Result
from shared.api import conditions

COMPLETE = "Complete"
RESULT_FIELDS = (
    "headline",
    "speedBitsPerSec",
    "throughputBitsPerSec",
    "transactionsPerSec",
    "latencySeconds",
    "streams",
    "retransmits",
    "completedAt",
    "reason",
    "message",
    "serverIP",
    "serviceIP",
    "paths",
    "ratios",
)
RUNNING = ("Initial", "Server", "Test")
FINISHED = ("Done", "Error")


def _conditions(
    current: Mapping[str, Any],
    phase: str,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime.datetime,
) -> list[dict[str, Any]]:
    def cond(type_: str, status: bool, why: str, text: str) -> conditions.Condition:
        return conditions.make(type_, status, why, text, generation=generation, now=now)

    running = phase in RUNNING
    return conditions.set_all(
        current.get("conditions"),
        cond(conditions.PROGRESSING, running, phase if running else reason, message),
        cond(COMPLETE, phase == "Done", "Completed" if phase == "Done" else phase, message),
        cond(conditions.DEGRADED, phase == "Error", reason if phase == "Error" else "AsExpected", message),
        *conditions.readiness(
            stalled=(reason, message) if phase == "Error" else None,
            reconciling=(phase, message) if running else None,
            ready=("Completed", message),
            generation=generation,
            now=now,
        ),
    )


def started(
    *, current: Mapping[str, Any], generation: int, names: PodNames, now: datetime.datetime
) -> dict[str, Any]:
    """A new run: previous results are cleared (None deletes them in the merge patch)."""
    message = f"starting server pod {names.server}"
    return {
        **{k: None for k in RESULT_FIELDS},
        "status": "Initial",
        "observedGeneration": generation,
        "startedAt": conditions.rfc3339(now),
        "serverPod": names.server,
        "clientPod": names.client,
        "conditions": _conditions(current, "Initial", "Initial", message, generation=generation, now=now),
    }


def phase(
    *, current: Mapping[str, Any], phase: str, summary: str, now: datetime.datetime, **fields: Any
) -> dict[str, Any]:
    """``current`` moved to a running phase (or Done) with ``fields`` set."""
    generation = int(current.get("observedGeneration") or 0)
    return {
        **current,
        **fields,
        "status": phase,
        "conditions": _conditions(current, phase, phase, summary, generation=generation, now=now),
    }


def headline(result: Result) -> str:
    """The figure ``kubectl get`` shows for the test type: throughput, or rate and p99 latency."""
    if result.throughput_bits is not None:
        text = f"{result.throughput_bits.mean / 1e9:.3f} Gbit/s"
        return text + (f" ({len(result.streams)} streams)" if result.streams else "")
    if result.transactions is not None:
        unit = "conn/s" if result.test_type == "TCP_CRR" else "trans/s"
        text = f"{result.transactions.mean:.0f} {unit}"
        p99 = result.latency_seconds.get("p99")
        return text + (f", p99 {p99 * 1e6:.0f}us" if p99 is not None else "")
    return ""


def result_fields(result: Result, now: datetime.datetime) -> dict[str, Any]:
    """The top-level result fields of ``result`` (what ``done`` writes besides the phase)."""
    fields: dict[str, Any] = {
        "completedAt": conditions.rfc3339(now),
        "speedBitsPerSec": result.speed_bits_per_sec,
        "throughputBitsPerSec": result.throughput_bits.as_status() if result.throughput_bits else None,
        "transactionsPerSec": result.transactions.as_status() if result.transactions else None,
        "latencySeconds": dict(result.latency_seconds) or None,
        "streams": [s.as_status() for s in result.streams] or None,
        "retransmits": result.retransmits,
        "reason": None,
        "message": None,
    }
    fields["headline"] = headline(result)
    return fields


def summary_of(result: Result) -> str:
    if result.throughput_bits is not None:
        n = len(result.throughput_bits.samples)
        summary = f"{result.throughput_bits.mean / 1e9:.3f} Gbit/s, mean of {n} samples"
        if result.streams:
            summary += f" of the sum of {len(result.streams)} parallel streams"
        return summary
    if result.transactions is not None:
        n = len(result.transactions.samples)
        what = "connections/s" if result.test_type == "TCP_CRR" else "transactions/s"
        return f"{result.transactions.mean:.0f} {what}, mean of {n} samples"
    return "completed"


def done(*, current: Mapping[str, Any], result: Result, now: datetime.datetime) -> dict[str, Any]:
    fields = result_fields(result, now)
    return phase(current=current, phase="Done", summary=summary_of(result), now=now, **fields)


# Compare runs (spec.compare): each path's result in status.paths, and the ratios of their means.
RATIOS = (
    ("podToHost", "pod", "host"),
    ("serviceToPod", "service", "pod"),
    ("serviceToHost", "service", "host"),
)


def path_entry(path: str, result: Result, now: datetime.datetime) -> dict[str, Any]:
    """One path's compact result (the headline figure's statistics, as a history entry has)."""
    item = schedule.entry({"status": "Done", **result_fields(result, now)}, run=0, test_type=result.test_type)
    for key in ("run", "scheduledTime", "completedAt", "testType"):
        item.pop(key, None)
    return {"path": path, **item, "headline": headline(result)}


def ratios(entries: list[dict[str, Any]]) -> dict[str, float] | None:
    """The ratios of the paths' mean headline figures that the compared paths allow."""
    means = {e["path"]: e.get("mean") for e in entries if e.get("result") == "Done"}
    found = {}
    for name, a, b in RATIOS:
        top, bottom = means.get(a), means.get(b)
        if top is not None and bottom:
            found[name] = round(top / bottom, 4)
    return found or None


def next_path(
    *,
    current: Mapping[str, Any],
    path: str,
    names: PodNames,
    now: datetime.datetime,
    **fields: Any,
) -> dict[str, Any]:
    """A compare run moves on to its next path: Initial again, with that path's pods and its own
    deadline (startedAt); the results so far stay."""
    message = f"path {path}: starting server pod {names.server}"
    generation = int(current.get("observedGeneration") or 0)
    return {
        **current,
        **fields,
        "status": "Initial",
        "path": path,
        "startedAt": conditions.rfc3339(now),
        "serverPod": names.server,
        "clientPod": names.client,
        "serverIP": None,
        "serviceIP": None,
        "conditions": _conditions(current, "Initial", "Initial", message, generation=generation, now=now),
    }


def error(
    *,
    current: Mapping[str, Any],
    reason: str,
    message: str,
    now: datetime.datetime,
    generation: int | None = None,
) -> dict[str, Any]:
    """The run ended without a result; ``generation`` when it failed before it was claimed."""
    gen = int(current.get("observedGeneration") or 0) if generation is None else generation
    return {
        **current,
        "observedGeneration": gen,
        "status": "Error",
        "reason": reason,
        "message": message,
        "completedAt": conditions.rfc3339(now),
        "conditions": _conditions(current, "Error", reason, message, generation=gen, now=now),
    }


class FinishedRuns:
    """Which runs (object UID, generation, run number) this process has seen finish, to count each once.

    Counting where the final status is written counted a run twice when that write timed out
    client-side but had succeeded (the retry wrote, and counted, again). Counting what the
    watch shows finishing cannot: the server's object says it once per generation. A listing
    (event type None: start-up, relists) only records, so a restart does not count again.
    """

    def __init__(self) -> None:
        self._seen: dict[str, tuple[int, int]] = {}

    def observe(self, event_type: str | None, body: Mapping[str, Any]) -> str | None:
        """The result label to count ("done"/"error") when this event shows a new finish."""
        meta, st = body.get("metadata") or {}, body.get("status") or {}
        uid = meta.get("uid") or ""
        if event_type == "DELETED":
            self._seen.pop(uid, None)
            return None
        if st.get("status") not in FINISHED or st.get("observedGeneration") is None:
            return None
        # A scheduled Netperf finishes many runs in one generation: each is its number.
        run = (int(st["observedGeneration"]), int(st.get("run") or 0))
        if self._seen.get(uid) == run:
            return None
        self._seen[uid] = run
        if event_type is None:
            return None
        return "done" if st["status"] == "Done" else "error"
