"""Parse the client's termination message into results with statistics (pure).

The client pod runs netperf ``samples`` times in keyval form (``-P 0 ... -- -k KEYS``) and
appends each run to its termination message as::

    SAMPLE=0
    EXIT=0
    THROUGHPUT=14509.18
    THROUGHPUT_UNITS=10^6bits/s
    ...
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.api.errors import OperatorError

COMMON_KEYS = ("THROUGHPUT", "THROUGHPUT_UNITS", "ELAPSED_TIME", "PROTOCOL")
RR_KEYS = (*COMMON_KEYS, "TRANSACTION_RATE", "MEAN_LATENCY", "P50_LATENCY", "P90_LATENCY", "P99_LATENCY")
KEYS: Mapping[str, tuple[str, ...]] = {
    "TCP_STREAM": (*COMMON_KEYS, "LOCAL_TRANSPORT_RETRANS"),
    "UDP_STREAM": COMMON_KEYS,
    "TCP_RR": (*RR_KEYS, "LOCAL_TRANSPORT_RETRANS"),
    # One transaction = connect, request, response, close: the rate is connections per second.
    # Not LOCAL_TRANSPORT_RETRANS: it is read from one of the many connections (or -1).
    "TCP_CRR": RR_KEYS,
    # UDP has no retransmissions (netperf prints -1): not asked for.
    "UDP_RR": RR_KEYS,
}
PROTOCOL = {"TCP_STREAM": "TCP", "UDP_STREAM": "UDP", "TCP_RR": "TCP", "TCP_CRR": "TCP", "UDP_RR": "UDP"}
# Request/response tests: transactions per second and latency percentiles instead of bits/s.
RR_TYPES = frozenset({"TCP_RR", "TCP_CRR", "UDP_RR"})
BITS_PER_UNIT = {"10^9bits/s": 1e9, "10^6bits/s": 1e6, "10^3bits/s": 1e3, "bits/s": 1.0}
RAW_LIMIT = 1024  # characters of raw output kept in an error message
# No figure of netperf's is larger (bits/s in its units, transactions/s, microseconds): a larger
# one is no measurement, and the sums and squares of the statistics stay finite below it.
MAX_FIGURE = 1e15

# Two-sided 95% quantiles of Student's t distribution by degrees of freedom (n - 1).
T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


class ParseError(OperatorError, ValueError):
    """The message is not a complete, plausible result; ``str()`` includes the raw text."""

    def __init__(self, problem: str, raw: str) -> None:
        self.problem = problem
        self.raw = raw
        super().__init__(f"{problem}; output: {truncate(raw)!r}")


def truncate(text: str, limit: int = RAW_LIMIT) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


@dataclass(frozen=True)
class Stats:
    samples: tuple[float, ...]
    mean: float
    stddev: float
    ci95_low: float
    ci95_high: float

    def as_status(self) -> dict[str, Any]:
        return {
            "samples": list(self.samples),
            "mean": self.mean,
            "stddev": self.stddev,
            "ci95Low": self.ci95_low,
            "ci95High": self.ci95_high,
        }


def stats(values: Sequence[float]) -> Stats:
    """Mean, sample standard deviation and the t-based 95% confidence interval of the mean."""
    if not values:
        raise ValueError("no values")
    mean = statistics.fmean(values)
    if len(values) == 1:
        return Stats(tuple(values), mean, 0.0, mean, mean)
    sd = statistics.stdev(values)
    df = len(values) - 1
    t = T95[df - 1] if df <= len(T95) else 1.960
    half = t * sd / math.sqrt(len(values))
    return Stats(tuple(values), mean, sd, mean - half, mean + half)


@dataclass(frozen=True)
class Result:
    test_type: str
    throughput_bits: Stats | None = None  # STREAM tests
    transactions: Stats | None = None  # RR types (TCP_CRR: connections per second)
    latency_seconds: Mapping[str, float] = field(default_factory=dict)  # RR types: mean, p50, p90, p99
    retransmits: int | None = None
    streams: tuple[Stats, ...] = ()  # parallel > 1: each stream's throughput (bits/s)

    @property
    def speed_bits_per_sec(self) -> float | None:
        return self.throughput_bits.mean if self.throughput_bits is not None else None


def split_samples(message: str) -> list[tuple[int, int, dict[str, str], str]]:
    """(sample index, exit code, KEY=VALUE pairs, raw text) per ``SAMPLE=`` block."""
    blocks: list[tuple[int, int, dict[str, str], str]] = []
    for chunk in message.split("SAMPLE=")[1:]:
        lines = chunk.splitlines()
        index = lines[0].strip() if lines else ""
        pairs: dict[str, str] = {}
        exit_code = -1
        for line in lines[1:]:
            key, sep, value = line.partition("=")
            if not sep or not key.strip().isupper():
                continue
            if key.strip() == "EXIT":
                code = _integer(value)
                exit_code = code if code is not None else -1
            else:
                pairs[key.strip()] = value.strip()
        number = _integer(index) if not index.startswith("-") else None
        blocks.append((number if number is not None else -1, exit_code, pairs, "SAMPLE=" + chunk))
    return blocks


def _number(pairs: Mapping[str, str], key: str, raw: str) -> float:
    try:
        value = float(pairs[key])
    except ValueError:
        raise ParseError(f"{key} is not a number: {pairs[key]!r}", raw) from None
    if not math.isfinite(value):
        raise ParseError(f"{key} is not finite: {pairs[key]!r}", raw)
    if abs(value) > MAX_FIGURE:
        raise ParseError(f"{key} is out of range (at most {MAX_FIGURE:g}): {pairs[key]!r}", raw)
    return value


def _integer(text: str) -> int | None:
    """``text`` as a decimal integer of ASCII digits (``str.isdigit`` also takes ``²``)."""
    digits = text.strip()
    unsigned = digits.removeprefix("-")
    return int(digits) if unsigned.isascii() and unsigned.isdigit() else None


@dataclass(frozen=True)
class Sample:
    throughput_bits: float | None
    transactions: float | None
    latency_seconds: Mapping[str, float]
    retransmits: int | None


LATENCY_KEYS = (
    ("mean", "MEAN_LATENCY"),
    ("p50", "P50_LATENCY"),
    ("p90", "P90_LATENCY"),
    ("p99", "P99_LATENCY"),
)


def parse_sample(test_type: str, index: int, exit_code: int, pairs: Mapping[str, str], raw: str) -> Sample:
    """One run's keyval output, checked: every key present, plausible values, known units."""
    if exit_code != 0:
        raise ParseError(f"netperf run {index} exited with {exit_code}", raw)
    missing = [k for k in KEYS[test_type] if k not in pairs]
    if missing:
        raise ParseError(f"netperf run {index} lacks {', '.join(missing)}", raw)
    if pairs["PROTOCOL"] != PROTOCOL[test_type]:
        raise ParseError(f"netperf run {index} used {pairs['PROTOCOL']}, not {PROTOCOL[test_type]}", raw)
    throughput = _number(pairs, "THROUGHPUT", raw)
    if throughput <= 0:
        raise ParseError(f"netperf run {index} reports throughput {pairs['THROUGHPUT']} (no data moved)", raw)
    if _number(pairs, "ELAPSED_TIME", raw) <= 0:
        raise ParseError(f"netperf run {index} reports no elapsed time", raw)
    retransmits = None
    if "LOCAL_TRANSPORT_RETRANS" in pairs:
        value = int(_number(pairs, "LOCAL_TRANSPORT_RETRANS", raw))
        retransmits = value if value >= 0 else None  # -1: not available on this platform
    units = pairs["THROUGHPUT_UNITS"]
    if test_type not in RR_TYPES:
        if units not in BITS_PER_UNIT:
            raise ParseError(f"unexpected THROUGHPUT_UNITS {units!r}", raw)
        return Sample(throughput * BITS_PER_UNIT[units], None, {}, retransmits)
    if units != "Trans/s":
        raise ParseError(f"unexpected THROUGHPUT_UNITS {units!r} for {test_type}", raw)
    latency = {}
    for name, key in LATENCY_KEYS:
        usec = _number(pairs, key, raw)
        if usec < 0:
            raise ParseError(f"netperf run {index} reports {key}={pairs[key]}", raw)
        latency[name] = usec / 1e6
    return Sample(None, _number(pairs, "TRANSACTION_RATE", raw), latency, retransmits)


def parse(message: str, test_type: str, samples: int, parallel: int = 1) -> Result:
    """The result of ``samples`` runs of ``test_type`` (each of ``parallel`` streams), or
    ``ParseError``.

    netperf drops unknown selectors in a comma list silently, so every key asked for must be
    present; a throughput of 0 or less is netperf's silent failure mode (colliding data ports)
    and is rejected; any other line (warnings) is ignored. For UDP_STREAM netperf's omni
    ``THROUGHPUT`` is the receiver's rate (what arrived), not what was sent. The request/response
    types (TCP_RR, TCP_CRR, UDP_RR) report transactions per second and latency percentiles; a
    TCP_CRR transaction opens and closes a connection, so its rate is connections per second. Latencies are
    reported by netperf in microseconds and returned in seconds; throughput in bits/s.

    With ``parallel`` > 1 (STREAM tests) each sample is that many netperf processes started together,
    each block carrying a ``STREAM=`` line after ``SAMPLE=``: a sample's throughput is the sum of its
    streams' (the statistics, and so the confidence interval, are over these sums), and each
    stream's own samples get their own statistics.
    """
    if test_type not in KEYS:
        raise ValueError(f"unknown test type {test_type!r}")
    blocks = split_samples(message)
    if not blocks:
        raise ParseError("no SAMPLE= block in the client's termination message", message)
    if parallel > 1:
        return _parse_streams(message, blocks, test_type, samples, parallel)
    runs = [parse_sample(test_type, *block) for block in blocks]
    if len(runs) != samples:
        raise ParseError(f"expected {samples} samples, got {len(runs)}", message)
    throughputs = [r.throughput_bits for r in runs if r.throughput_bits is not None]
    transactions = [r.transactions for r in runs if r.transactions is not None]
    retransmits = [r.retransmits for r in runs if r.retransmits is not None]
    latency = {
        name: statistics.fmean(r.latency_seconds[name] for r in runs)
        for name, _ in LATENCY_KEYS
        if all(name in r.latency_seconds for r in runs)
    }
    return Result(
        test_type=test_type,
        throughput_bits=stats(throughputs) if throughputs else None,
        transactions=stats(transactions) if transactions else None,
        latency_seconds=latency,
        retransmits=sum(retransmits) if retransmits else None,
    )


def _parse_streams(
    message: str,
    blocks: list[tuple[int, int, dict[str, str], str]],
    test_type: str,
    samples: int,
    parallel: int,
) -> Result:
    """``parallel`` concurrent streams per sample (``STREAM=`` blocks; STREAM tests): a sample's
    figure is the sum of its streams' (what the link carried), each stream keeps its own."""
    if test_type in RR_TYPES:
        raise ValueError(f"parallel streams of {test_type} are not combined")
    by_run: dict[tuple[int, int], Sample] = {}
    for index, exit_code, pairs, raw in blocks:
        stream = _integer(pairs.get("STREAM", "")) if not pairs.get("STREAM", "").startswith("-") else None
        if stream is None:
            raise ParseError(f"netperf run {index} has no STREAM= line", raw)
        by_run[(index, stream)] = parse_sample(test_type, index, exit_code, pairs, raw)
    expected = {(i, j) for i in range(samples) for j in range(parallel)}
    if set(by_run) != expected or len(blocks) != len(expected):
        raise ParseError(
            f"expected {samples} samples of {parallel} streams, got {len(blocks)} outputs", message
        )

    def bits(i: int, j: int) -> float:
        value = by_run[(i, j)].throughput_bits
        assert value is not None  # a STREAM test's sample always has it
        return value

    retransmits = [r.retransmits for r in by_run.values() if r.retransmits is not None]
    return Result(
        test_type=test_type,
        throughput_bits=stats([math.fsum(bits(i, j) for j in range(parallel)) for i in range(samples)]),
        retransmits=sum(retransmits) if retransmits else None,
        streams=tuple(stats([bits(i, j) for i in range(samples)]) for j in range(parallel)),
    )
