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
from shared.api.crd import CONDITIONS_SCHEMA, CRDSpec
from shared.api.validation import IMAGE, NODE_NAME, name_rules

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
}
MAX_SAMPLES = 10  # all samples must fit the 4 KiB termination message (checked by a unit test)
MAX_DURATION = 300

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
        "retransmits": {"type": "integer", "description": "TCP retransmissions by the sender, all samples."},
        "observedGeneration": {"type": "integer"},
        "conditions": CONDITIONS_SCHEMA,
    },
}

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
            "name": "Throughput",
            "type": "number",
            "jsonPath": ".status.speedBitsPerSec",
            "description": "bits/s",
        },
        {"name": "Trans/s", "type": "number", "jsonPath": ".status.transactionsPerSec.mean", "priority": 1},
        {"name": "Reason", "type": "string", "jsonPath": ".status.reason", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ),
    object_validations=name_rules(),
)
