"""Canary analysis by the operator itself, over HTTP: no metrics provider needed.

While a canary's weight step runs with ``spec.rollout.canary.analysis``, the operator sends
``GET path`` to every canary and every stable pod each ``intervalSeconds`` (each request
bounded by ``timeoutSeconds``) and keeps the outcomes of this step: a 2xx or 3xx answer is a
success, anything else (a 5xx, a refused connection, a timeout) a failure; latency is the time
to the response headers. Once the canary has ``samples`` requests, ``judge`` decides: its
success rate at least ``minSuccessPercent``, its p95 at most ``maxP95Milliseconds`` and at most
``maxP95OverStablePercent`` % of the stable pods' p95 (each when set). A pass lets the step end;
a failure aborts the canary (``.rollout``: back to the stable revision, ``Degraded`` with
the figures). Probing runs in one task per WebServer, off the reconcile passes, which only read
the figures; a WebServer has at most ``PER_OWNER`` requests in flight and all of them
``IN_FLIGHT``, each bounded by its timeout, so a tenant's slow pods cost it its own rounds,
not another's.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

PER_OWNER = 8
IN_FLIGHT = 64
KEPT = 10000  # outcomes kept per group and step (the oldest go first)
DEFAULTS = {
    "path": "/",
    "intervalSeconds": 5,
    "timeoutSeconds": 2,
    "samples": 20,
    "minSuccessPercent": 99,
}


def options(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """``spec.rollout.canary.analysis`` with its defaults, or None when there is none."""
    given = ((spec.get("rollout") or {}).get("canary") or {}).get("analysis")
    return None if given is None else {**DEFAULTS, **given}


@dataclass(frozen=True)
class Figures:
    """One group's (canary or stable) outcomes in this step."""

    requests: int = 0
    successes: int = 0
    p95_ms: float | None = None

    @property
    def success_percent(self) -> float | None:
        return None if not self.requests else 100.0 * self.successes / self.requests

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"requests": self.requests, "successes": self.successes}
        if self.p95_ms is not None:
            out["p95Milliseconds"] = round(self.p95_ms, 1)
        return out

    def __str__(self) -> str:
        rate = self.success_percent
        p95 = "-" if self.p95_ms is None else f"{self.p95_ms:.0f} ms"
        return f"{self.successes}/{self.requests} ok ({0 if rate is None else rate:.1f} %), p95 {p95}"


def summarize(outcomes: Sequence[tuple[bool, float]]) -> Figures:
    """Figures of ``(success, milliseconds)`` outcomes; p95 by nearest rank."""
    if not outcomes:
        return Figures()
    latencies = sorted(ms for _, ms in outcomes)
    rank = max(1, math.ceil(0.95 * len(latencies)))
    return Figures(len(outcomes), sum(ok for ok, _ in outcomes), latencies[rank - 1])


def judge(canary: Figures, stable: Figures, opts: Mapping[str, Any]) -> tuple[bool | None, str]:
    """True (pass), False (abort) or None (too few requests yet), and the figures said."""
    said = f"canary {canary}; stable {stable}"
    if canary.requests < int(opts["samples"]):
        return None, f"{said}; {canary.requests}/{opts['samples']} canary requests"
    why: list[str] = []
    rate = canary.success_percent or 0.0
    if rate < float(opts["minSuccessPercent"]):
        why.append(f"success {rate:.1f} % < {opts['minSuccessPercent']} %")
    p95 = canary.p95_ms or 0.0
    limit = opts.get("maxP95Milliseconds")
    if limit is not None and p95 > float(limit):
        why.append(f"p95 {p95:.0f} ms > {limit} ms")
    over = opts.get("maxP95OverStablePercent")
    if over is not None and stable.p95_ms is not None and p95 > stable.p95_ms * float(over) / 100:
        why.append(f"p95 {p95:.0f} ms > {over} % of stable's {stable.p95_ms:.0f} ms")
    if why:
        return False, f"{said}: " + "; ".join(why)
    return True, said


@dataclass
class Run:
    """The probing of one WebServer's canary step."""

    key: tuple[int, int]  # (revision, step)
    opts: dict[str, Any]
    targets: dict[str, list[str]]  # "canary"/"stable" -> URLs
    outcomes: dict[str, deque[tuple[bool, float]]] = field(
        default_factory=lambda: {"canary": deque(maxlen=KEPT), "stable": deque(maxlen=KEPT)}
    )
    task: asyncio.Task[None] | None = None

    def figures(self) -> tuple[Figures, Figures]:
        return summarize(list(self.outcomes["canary"])), summarize(list(self.outcomes["stable"]))


class Analyzer:
    """The probing tasks, one per WebServer in a canary step with analysis."""

    def __init__(self, kick: Callable[[str, str], None], *, in_flight: int = IN_FLIGHT) -> None:
        self.kick = kick
        self.runs: dict[str, Run] = {}
        self._limit = asyncio.Semaphore(in_flight)

    def observe(
        self,
        uid: str,
        owner: tuple[str, str],
        key: tuple[int, int],
        targets: dict[str, list[str]],
        opts: dict[str, Any],
    ) -> tuple[Figures, Figures]:
        """Probe ``targets`` for step ``key`` (started now, or the same run with the pods of
        now); returns the figures so far."""
        run = self.runs.get(uid)
        if run is None or run.key != key or run.opts != opts:
            self.stop(uid)
            run = self.runs[uid] = Run(key, opts, targets)
            run.task = asyncio.get_running_loop().create_task(self._probe(run, owner))
        run.targets = targets
        return run.figures()

    def stop(self, uid: str) -> None:
        run = self.runs.pop(uid, None)
        if run is not None and run.task is not None:
            run.task.cancel()

    async def close(self) -> None:
        """Stop every run and wait for their sessions to close."""
        tasks = [run.task for run in self.runs.values() if run.task is not None]
        for uid in list(self.runs):
            self.stop(uid)
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _probe(self, run: Run, owner: tuple[str, str]) -> None:
        mine = asyncio.Semaphore(PER_OWNER)
        # One session per run, closed when it stops; no connection kept: each probe is a new
        # connection, as a Service spreads them.
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
            while True:
                started = time.monotonic()
                groups = [(g, url) for g, urls in run.targets.items() for url in urls]
                results = await asyncio.gather(
                    *(self._one(session, url, run.opts, mine) for _, url in groups)
                )
                for (group, _), outcome in zip(groups, results, strict=True):
                    run.outcomes[group].append(outcome)
                self.kick(*owner)  # a pass records the figures and judges
                left = float(run.opts["intervalSeconds"]) - (time.monotonic() - started)
                await asyncio.sleep(max(0.0, left))

    async def _one(
        self, session: aiohttp.ClientSession, url: str, opts: Mapping[str, Any], mine: asyncio.Semaphore
    ) -> tuple[bool, float]:
        timeout = float(opts["timeoutSeconds"])
        async with mine, self._limit:
            began = time.monotonic()
            try:
                async with session.get(
                    url, timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False
                ) as answer:
                    ok = 200 <= answer.status < 400
            except (aiohttp.ClientError, TimeoutError, OSError):
                ok = False
            return ok, (time.monotonic() - began) * 1000.0
