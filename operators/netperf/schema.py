"""The Netperf API: ``app.example.com/v1alpha1`` ``Netperf``, the one source of its CRD schema.

Compatible with the original tutorial operator: ``spec.serverNode``/``spec.clientNode`` and
``status.status``/``serverPod``/``clientPod``/``speedBitsPerSec`` keep their names, but
``speedBitsPerSec`` now holds bits per second (the original stored netperf's 10^6 bits/s).
Everything else is an addition with a default that keeps the original behaviour (one
TCP_STREAM test between two pods).
"""

from __future__ import annotations

from typing import Any

import shared
from shared.api.crd import CONDITIONS_SCHEMA, CRDSpec, ratcheting_rule
from shared.api.validation import IMAGE, NODE_NAME, FieldError, name_rules

GROUP = "app.example.com"
VERSION = "v1alpha1"
KIND = "Netperf"
PLURAL = "netperfs"
APP = "netperf"  # value of app.kubernetes.io/name on every pod

TEST_TYPES = ("TCP_STREAM", "TCP_RR", "UDP_STREAM", "TCP_CRR", "UDP_RR")
PLACEMENTS = ("DifferentNodes", "SameNode")
PHASES = ("Initial", "Server", "Test", "Done", "Error")
DEFAULT_IMAGE = f"ghcr.io/k8s-operators-py/netperf:{shared.__version__}"
DEFAULTS: dict[str, Any] = {
    "testType": "TCP_STREAM",
    "duration": 10,
    "samples": 3,
    "placement": "DifferentNodes",
    "image": DEFAULT_IMAGE,
    "parallel": 1,
}
MAX_SAMPLES = 10  # all samples must fit the 4 KiB termination message (checked by a unit test)
MAX_DURATION = 300
STREAM_TYPES = ("TCP_STREAM", "UDP_STREAM")
# Concurrent netperf processes in the one client pod. 8: the scaling series (1/2/4/8);
# beyond the cores of a node more processes measure the client's CPU, not the network; and every
# process's output of every sample shares the 4 KiB termination message (MAX_RUNS).
MAX_PARALLEL = 8
# samples x parallel outputs fit the 4 KiB termination message (checked by a unit test).
MAX_RUNS = 24

# Combinations the schema alone cannot refuse: (CEL rule, message, field), each with its Python
# twin in combination_errors. Ratcheting (shared.api.crd): stored objects predate them.
_STREAMS_ONLY = (
    "!has(self.parallel) || self.parallel == 1 || self.testType in ['TCP_STREAM', 'UDP_STREAM']",
    "parallel > 1 needs testType TCP_STREAM or UDP_STREAM: the latency percentiles of concurrent "
    "request/response streams cannot be combined into one",
)
_RUNS_FIT = (
    f"!has(self.parallel) || self.parallel * self.samples <= {MAX_RUNS}",
    f"samples x parallel must be at most {MAX_RUNS}: every stream's output of every sample must "
    "fit the client's 4 KiB termination message",
)

_NODE = {
    "type": "string",
    "maxLength": 253,
    "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
    # The pattern lets "a..b" through, which no pod's node affinity accepts.
    "x-kubernetes-validations": [dict(NODE_NAME.cel)],
}

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One network benchmark between a netperf server pod and a client pod.",
    "x-kubernetes-validations": [
        ratcheting_rule(*_STREAMS_ONLY, fieldPath=".parallel"),
        ratcheting_rule(*_RUNS_FIT, fieldPath=".parallel"),
    ],
    "properties": {
        "serverNode": {**_NODE, "description": "Node for the server pod (default: the scheduler picks)."},
        "clientNode": {**_NODE, "description": "Node for the client pod (default: per spec.placement)."},
        "testType": {
            "type": "string",
            "enum": list(TEST_TYPES),
            "default": DEFAULTS["testType"],
            "description": (
                "netperf test: TCP_STREAM or UDP_STREAM (bits/s), TCP_RR or UDP_RR (transactions/s "
                "and latency percentiles), TCP_CRR (a new connection per transaction: "
                "connections/s and latency percentiles)."
            ),
        },
        "duration": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_DURATION,
            "default": DEFAULTS["duration"],
            "description": "Seconds per sample (netperf -l).",
        },
        "samples": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SAMPLES,
            "default": DEFAULTS["samples"],
            "description": "Runs of the test, one after the other (for mean, deviation and 95% CI).",
        },
        "messageSize": {
            "type": "integer",
            "minimum": 1,
            "maximum": 65507,
            "description": (
                "Bytes per send for STREAM tests (netperf -m), request and response size for "
                "the RR types (-r). Default: netperf's."
            ),
        },
        "image": {
            "type": "string",
            "minLength": 1,
            "maxLength": 512,
            "pattern": r"^[^\s]+$",
            "x-kubernetes-validations": [dict(IMAGE.cel)],
            "default": DEFAULTS["image"],
            "description": "Image with netperf, netserver and sh, run as non-root (default: ours).",
        },
        "parallel": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PARALLEL,
            "default": DEFAULTS["parallel"],
            "description": (
                "netperf processes started together in the client pod, each its own stream to the "
                "server (as super-netperf does); status has their sum per sample and each stream's "
                f"figures. STREAM tests only; samples x parallel at most {MAX_RUNS}."
            ),
        },
        "timeoutSeconds": {
            "type": "integer",
            "minimum": 5,
            "maximum": 86400,
            "description": (
                "Longest time from start to result before the test ends in Error "
                "(default: 60 + samples * (duration + 15))."
            ),
        },
        "placement": {
            "type": "string",
            "enum": list(PLACEMENTS),
            "default": DEFAULTS["placement"],
            "description": (
                "Where the client runs when clientNode is not set: on a different node than the "
                "server (pod anti-affinity) or on the same node."
            ),
        },
    },
}

_STATS = {
    "type": "object",
    "properties": {
        "samples": {"type": "array", "items": {"type": "number"}},
        "mean": {"type": "number"},
        "stddev": {"type": "number", "description": "Sample standard deviation (n - 1)."},
        "ci95Low": {
            "type": "number",
            "description": "Lower bound of the 95% confidence interval of the mean.",
        },
        "ci95High": {
            "type": "number",
            "description": "Upper bound of the 95% confidence interval of the mean.",
        },
    },
}

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": list(PHASES), "description": "Phase of the test."},
        "reason": {"type": "string", "description": "Why the test is in Error (CamelCase)."},
        "message": {"type": "string", "description": "Details of the Error (raw netperf output, truncated)."},
        "serverPod": {"type": "string"},
        "clientPod": {"type": "string"},
        "serverIP": {"type": "string"},
        "startedAt": {"type": "string", "format": "date-time"},
        "completedAt": {"type": "string", "format": "date-time"},
        "headline": {
            "type": "string",
            "description": (
                "The result in one line, per test type: mean throughput (STREAM; the sum of the "
                "streams with parallel), or mean transactions/s (TCP_CRR: connections/s) and p99 "
                "latency (RR types)."
            ),
        },
        "speedBitsPerSec": {
            "type": "number",
            "description": "Mean throughput in bits per second (STREAM tests; UDP: received).",
        },
        "throughputBitsPerSec": {
            **_STATS,
            "description": "Throughput per sample in bits/s, with statistics.",
        },
        "transactionsPerSec": {
            **_STATS,
            "description": "RR types: transactions per second per sample (TCP_CRR: connections per second).",
        },
        "latencySeconds": {
            "type": "object",
            "description": "RR types: transaction latency in seconds, averaged over the samples.",
            "properties": {
                "mean": {"type": "number"},
                "p50": {"type": "number"},
                "p90": {"type": "number"},
                "p99": {"type": "number"},
            },
        },
        "streams": {
            "type": "array",
            "maxItems": MAX_PARALLEL,
            "description": (
                "parallel > 1: each stream's throughput in bits/s per sample, with statistics "
                "(throughputBitsPerSec holds their sum per sample)."
            ),
            "items": _STATS,
        },
        "retransmits": {"type": "integer", "description": "TCP retransmissions by the sender, all samples."},
        "observedGeneration": {"type": "integer"},
        "conditions": CONDITIONS_SCHEMA,
    },
}


def combination_errors(spec: dict[str, Any]) -> list[FieldError]:
    """The CEL rules on spec in Python (the controller cannot run CEL): for objects that reached
    it without them (stored before the rules, or a relaxed CRD)."""
    full = {**DEFAULTS, **spec}
    errors = []
    if full["parallel"] != 1 and full["testType"] not in STREAM_TYPES:
        errors.append(FieldError("spec.parallel", _STREAMS_ONLY[1]))
    if int(full["parallel"]) * int(full["samples"]) > MAX_RUNS:
        errors.append(FieldError("spec.parallel", _RUNS_FIT[1]))
    return errors


CRD = CRDSpec(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=PLURAL,
    spec_schema=SPEC_SCHEMA,
    status_schema=STATUS_SCHEMA,
    short_names=("np",),
    categories=("all", "k8s-operators-py"),
    printer_columns=(
        {"name": "Phase", "type": "string", "jsonPath": ".status.status"},
        {"name": "Type", "type": "string", "jsonPath": ".spec.testType"},
        {
            "name": "Result",
            "type": "string",
            "jsonPath": ".status.headline",
            "description": "Gbit/s (STREAM), or transactions/s (TCP_CRR: connections/s) and p99 latency",
        },
        {
            "name": "Throughput",
            "type": "number",
            "jsonPath": ".status.speedBitsPerSec",
            "description": "bits/s",
            "priority": 1,
        },
        {"name": "Trans/s", "type": "number", "jsonPath": ".status.transactionsPerSec.mean", "priority": 1},
        {
            "name": "P99",
            "type": "number",
            "jsonPath": ".status.latencySeconds.p99",
            "description": "seconds",
            "priority": 1,
        },
        {"name": "Streams", "type": "integer", "jsonPath": ".spec.parallel", "priority": 1},
        {"name": "Reason", "type": "string", "jsonPath": ".status.reason", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ),
    object_validations=name_rules(),
)
