"""Netperf status for each phase, written whole (pure)."""

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

    Phases in ``status.status``: ``Initial`` (a run is claimed: ``startedAt`` and the pod names
    are recorded before any pod exists) → ``Server`` → ``Test`` → ``Done``, or ``Error`` with a
    CamelCase ``reason`` and a ``message``. A new run (new generation) clears the previous
    results. Conditions:

    - ``Progressing``: True while a run is under way (reason = phase), False when it ended
      (``Completed`` or the error's reason);
    - ``Complete``: True once results are recorded;
    - ``Degraded``: True with the reason when the run ended in ``Error`` (``InvalidSpec`` with
      the field paths for a spec the schema rejects), False otherwise;
    - ``Regressed`` (scheduled Netperfs, ``.schedule``): the latest result judged against its
      baseline, set by the reconciler's ``record`` when a run ends, cleared when it no longer
      applies (``.verdicts``);
    - a scheduled Netperf whose spec the operator refuses: ``Degraded``/``Stalled`` with
      ``InvalidSpec`` over the last run's status (``spec_invalid``), no run of its own.

    ``series`` derives every per-object series from spec and status, so what is exported never
    depends on what this process saw happen.
    - ``Reconciling``/``Stalled``/``Ready`` (``shared.api.conditions.readiness``, what kstatus and
      Argo CD judge): a one-off benchmark is done when its run is: ``Reconciling`` while it runs,
      ``Ready`` once ``Done``, ``Stalled`` after an ``Error`` (the run is over for this generation;
      only a changed spec starts another).
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


def spec_invalid(
    *, current: Mapping[str, Any], message: str, generation: int, now: datetime.datetime
) -> dict[str, Any]:
    """A scheduled Netperf whose spec the operator refuses: ``Degraded`` (``InvalidSpec``) and
    ``Stalled`` until the spec changes; no due time is met meanwhile. The last run's result, the
    history and the verdict stay as they are: the error belongs to no run."""
    reason = "InvalidSpec"
    # observedGeneration is a one-off run's key while it runs (as scheduled passes keep it).
    running = current.get("status") in RUNNING
    return {
        **current,
        "observedGeneration": current.get("observedGeneration") if running else generation,
        "nextRunTime": None,
        "conditions": conditions.set_all(
            current.get("conditions"),
            conditions.make(conditions.DEGRADED, True, reason, message, generation=generation, now=now),
            *conditions.readiness(stalled=(reason, message), generation=generation, now=now),
        ),
    }


def spec_valid(*, current: Mapping[str, Any], generation: int, now: datetime.datetime) -> dict[str, Any]:
    """``current`` with a ``spec_invalid``'s conditions undone, once the spec is valid again:
    those of the last run's phase, or (no run yet) ``Degraded`` False and ``Ready``."""
    degraded = conditions.get(current.get("conditions"), conditions.DEGRADED)
    if degraded is None or degraded.get("status") != "True" or degraded.get("reason") != "InvalidSpec":
        return dict(current)
    if current.get("status") == "Error" and current.get("reason") == "InvalidSpec":
        return dict(current)  # a one-off run that ended InvalidSpec: its own error
    phase_now = current.get("status")
    if phase_now in (*RUNNING, *FINISHED):
        complete = conditions.get(current.get("conditions"), COMPLETE) or {}
        reason = "Done" if phase_now == "Done" else str(current.get("reason") or phase_now)
        message = str(complete.get("message") or current.get("message") or phase_now)
        updated = _conditions(current, str(phase_now), reason, message, generation=generation, now=now)
    else:
        message = "waiting for the first due time"
        updated = conditions.set_all(
            current.get("conditions"),
            conditions.make(
                conditions.DEGRADED, False, "AsExpected", message, generation=generation, now=now
            ),
            *conditions.readiness(ready=("Scheduled", message), generation=generation, now=now),
        )
    return {**current, "conditions": updated}


# The per-object series, by metric, each {label values after namespace and name: value}.
Series = dict[str, dict[tuple[str, ...], float]]
SERIES = (
    "netperf_throughput_bytes_per_second",
    "netperf_failed",
    "netperf_result_throughput_bytes_per_second",
    "netperf_result_transactions_per_second",
    "netperf_result_latency_seconds",
    "netperf_regressed",
)


def _latest_result(spec: Mapping[str, Any], st: Mapping[str, Any]) -> dict[str, Any] | None:
    """The latest result as a history entry has it (unit, mean, percentiles, testType): the
    status' own when a run is Done, else (scheduled, a run under way or failed) the newest Done
    entry of the history."""
    if st.get("status") == "Done":
        test_type = str(({**dict(spec), **(st.get("runSpec") or {})}).get("testType") or "TCP_STREAM")
        return schedule.entry(st, run=0, test_type=test_type)
    if spec.get("schedule"):
        done = [h for h in st.get("history") or [] if h.get("result") == "Done"]
        if done:
            return dict(done[-1])
    return None


def series(spec: Mapping[str, Any], st: Mapping[str, Any]) -> Series:
    """Every per-object series of a Netperf, from its spec and status alone (each pass exports
    exactly these: what a restarted or new leader exports is what the object says)."""
    found: Series = {name: {} for name in SERIES}
    if st.get("status") in (*RUNNING, *FINISHED):
        found["netperf_failed"][()] = 1.0 if st.get("status") == "Error" else 0.0
    latest = _latest_result(spec, st)
    if latest is not None and latest.get("mean") is not None:
        test_type = str(latest.get("testType"))
        if latest.get("unit") == "bitsPerSec":
            found["netperf_throughput_bytes_per_second"][()] = float(latest["mean"]) / 8
            found["netperf_result_throughput_bytes_per_second"][(test_type,)] = float(latest["mean"]) / 8
        elif latest.get("unit") == "perSec":
            found["netperf_result_transactions_per_second"][(test_type,)] = float(latest["mean"])
        for percentile in ("p50", "p90", "p99"):
            if (value := latest.get(f"{percentile}Seconds")) is not None:
                found["netperf_result_latency_seconds"][(test_type, percentile)] = float(value)
    verdict = st.get("regression")
    if spec.get("schedule") and verdict:
        regressed = bool(verdict.get("regressed"))
        run = str(verdict.get("regressedSince") or verdict.get("run") or "") if regressed else ""
        found["netperf_regressed"][(str(verdict.get("testType") or ""), run)] = 1.0 if regressed else 0.0
    return found
