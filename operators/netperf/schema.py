"""The Netperf API: ``app.example.com/v1alpha1`` ``Netperf``, the one source of its CRD schema.

Compatible with the original tutorial operator: ``spec.serverNode``/``spec.clientNode`` and
``status.status``/``serverPod``/``clientPod``/``speedBitsPerSec`` keep their names, but
``speedBitsPerSec`` now holds bits per second (the original stored netperf's 10^6 bits/s).
Everything else is an addition with a default that keeps the original behaviour (one
TCP_STREAM test between two pods).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import shared

# The scheduling fields and their limits live with the rules that use them (pure, no CRD import).
from operators.netperf.schedule import (
    DEFAULT_BASELINE_RUNS,
    DEFAULT_DIRECTION,
    DEFAULT_HISTORY,
    DEFAULT_MIN_CHANGE_PERCENT,
    DEFAULT_P_VALUE,
    DIRECTIONS,
    MAX_BASELINE_RUNS,
    MAX_BASELINE_SAMPLES,
    MAX_HISTORY,
    SCHEDULE_FIELDS,
    SKIP_REASONS,
)
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
# The network between client and server: the pod network, through a ClusterIP Service
# (kube-proxy), or the nodes' own (both pods hostNetwork).
PATHS = ("pod", "service", "host")
DEFAULT_PATH = "pod"
MAX_COMPARE = 3
DEFAULT_IMAGE = f"ghcr.io/k8s-operators-py/netperf:{shared.__version__}"
DEFAULTS: dict[str, Any] = {
    "testType": "TCP_STREAM",
    "duration": 10,
    "placement": "DifferentNodes",
    "image": DEFAULT_IMAGE,
    "parallel": 1,
}
MAX_SAMPLES = 10  # all samples must fit the 4 KiB termination message (checked by a unit test)
# samples left unset: no schema default (the controller could not tell "unset" from a persisted
# default), ``samples`` decides. A scheduled Netperf's results are all judged for a regression, and
# the detector meets its error budget (docs/benchmarks.md) with 5 samples per run, not 3.
DEFAULT_SAMPLES = 3
DETECTION_SAMPLES = 5
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
    f"!has(self.parallel) || !has(self.samples) || self.parallel * self.samples <= {MAX_RUNS}",
    f"samples x parallel must be at most {MAX_RUNS}: every stream's output of every sample must "
    "fit the client's 4 KiB termination message",
)

_PATH_OR_COMPARE = (
    "!has(self.path) || !has(self.compare)",
    "path and compare are exclusive: set path for one path, or compare for several",
)
_COMPARE_UNIQUE = (
    "self.all(p, self.exists_one(q, q == p))",
    "compare: each path at most once",
)

# Fields that only mean something with a schedule: (field, CEL rule, message).
_NEEDS_SCHEDULE = tuple(
    (f, f"has(self.schedule) || !has(self.{f})", f"{f} needs spec.schedule: it is about repeated runs")
    for f in ("timeZone", "window", "suspend", "startingDeadlineSeconds", "historyLimit", "regression")
)
_ACK_OR_PINNED = (
    "!has(self.acknowledgedRun) || !has(self.baseline)",
    "acknowledgedRun and baseline are exclusive: acknowledging a change starts a new measured "
    "baseline; with a pinned baseline, pin the new samples instead",
)
_WINDOW_NOT_EMPTY = (
    "self.startHour != self.endHour",
    "window: startHour and endHour must differ (an empty window would never start a run; "
    "for no window, leave it out)",
)
# The CEL condition under which a Netperf makes a Service (the name rules for it apply).
SERVICE_REQUESTED = (
    "(has(self.spec.path) && self.spec.path == 'service') "
    "|| (has(self.spec.compare) && 'service' in self.spec.compare)"
)
_HOUR = {"type": "integer", "minimum": 0, "maximum": 23}
_TIME = {"type": "string", "format": "date-time"}

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
        ratcheting_rule(*_PATH_OR_COMPARE, fieldPath=".compare"),
        *(ratcheting_rule(rule, message, fieldPath=f".{f}") for f, rule, message in _NEEDS_SCHEDULE),
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
            "description": (
                "Runs of the test, one after the other (for mean, deviation and 95% CI). Default "
                f"{DEFAULT_SAMPLES}; with a schedule (every result judged for a regression) "
                f"{DETECTION_SAMPLES}, or as many as parallel leaves room for (samples x parallel at "
                f"most {MAX_RUNS}): with fewer than {DETECTION_SAMPLES} the detector's error budget "
                "(docs/benchmarks.md) is not promised. A scheduled run's status.runSpec.samples says "
                "what it used."
            ),
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
        "path": {
            "type": "string",
            "enum": list(PATHS),
            "description": (
                "The network measured (default pod): pod (client to the server pod's IP over the "
                "pod network), service (client to a ClusterIP Service the Netperf owns in front of "
                "this run's server pod: what kube-proxy costs; netperf's data port is fixed and "
                "exposed too), host (both pods hostNetwork: the nodes' network without the pod "
                "network; the namespace's Pod Security must be privileged). Not with compare."
            ),
        },
        "compare": {
            "type": "array",
            "minItems": 2,
            "maxItems": MAX_COMPARE,
            "items": {"type": "string", "enum": list(PATHS)},
            "x-kubernetes-validations": [{"rule": _COMPARE_UNIQUE[0], "message": _COMPARE_UNIQUE[1]}],
            "description": (
                "Several paths measured one after the other in one Netperf (one run per path, never "
                "two at once), e.g. [pod, host]: status.paths has each path's result, status.ratios "
                "podToHost and serviceToPod of their headline figures. The top-level result, the "
                "history and regression detection are the first path's. Not with path."
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
        "schedule": {
            "type": "string",
            "minLength": 1,
            "maxLength": 128,
            # The shape only; each field's values are checked by the operator (Degraded, InvalidSpec).
            "pattern": r"^\s*(@[a-z]+|\S+(\s+\S+){4})\s*$",
            "description": (
                "Run repeatedly, at the times of this standard 5-field cron expression (minute hour "
                "day-of-month month day-of-week, or @hourly/@daily/@weekly/@monthly/@yearly), on "
                "the wall clock of timeZone. Never two runs at once: a time that comes while a run "
                "is in progress is skipped and counted in status.skippedRuns. Each result is kept "
                "in status.history and judged for a regression. Without it: one run per spec change."
            ),
        },
        "timeZone": {
            "type": "string",
            "minLength": 1,
            "maxLength": 64,
            "pattern": r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$",
            "description": "IANA time zone of schedule and window, e.g. Europe/Berlin (default UTC).",
        },
        "window": {
            "type": "object",
            "description": (
                "Quiet window: a scheduled run starts only between startHour and endHour "
                "(exclusive) on the wall clock of timeZone; endHour < startHour crosses midnight "
                "(22 -> 6). A time outside it is skipped (status.skippedRuns.outsideWindow), not deferred."
            ),
            "required": ["startHour", "endHour"],
            "x-kubernetes-validations": [{"rule": _WINDOW_NOT_EMPTY[0], "message": _WINDOW_NOT_EMPTY[1]}],
            "properties": {
                "startHour": {**_HOUR, "description": "Hour the window opens (0-23)."},
                "endHour": {**_HOUR, "description": "Hour the window closes, exclusive (0-23)."},
            },
        },
        "suspend": {
            "type": "boolean",
            "description": (
                "No scheduled run starts while true (a run in progress finishes); the times that "
                "pass are counted in status.skippedRuns.suspended and not caught up on afterwards."
            ),
        },
        "startingDeadlineSeconds": {
            "type": "integer",
            "minimum": 1,
            "maximum": 31536000,
            "description": (
                "As in CronJob: a due time not started within this many seconds (the operator was "
                "down) is skipped. Without it, after any downtime the latest missed time runs once "
                "at once and the earlier ones are skipped (status.skippedRuns.missed)."
            ),
        },
        "historyLimit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_HISTORY,
            "description": f"Results kept in status.history, newest last (default {DEFAULT_HISTORY}).",
        },
        "regression": {
            "type": "object",
            "description": (
                "How a scheduled result is judged: change points in the run history of its "
                "measurement (each run's mean), found and tested with Student's t-test as "
                "Hunter/Apache Otava do; the latest result regressed when the runs since a change "
                "are worse than the baseline (the latest level that was no regression) by at least "
                "minChangePercent with p < pValue. Sets the Regressed condition, a Warning Event "
                "and netperf_regressed. A result it cannot judge (the first of its measurement, a "
                "baseline of fewer than 2 runs) is reported as not judged in status.regression."
            ),
            "x-kubernetes-validations": [
                {"rule": _ACK_OR_PINNED[0], "message": _ACK_OR_PINNED[1], "fieldPath": ".acknowledgedRun"}
            ],
            "properties": {
                "baselineRuns": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_BASELINE_RUNS,
                    "description": (
                        "How many earlier results of the same measurement the detector looks at: "
                        "test type, parallel, messageSize, path, nodes, image and duration (default "
                        f"{DEFAULT_BASELINE_RUNS}; at most what historyLimit keeps; see status.measurement)."
                    ),
                },
                "baseline": {
                    "type": "array",
                    "minItems": 2,
                    "maxItems": MAX_BASELINE_SAMPLES,
                    "items": {"type": "number", "minimum": 0},
                    "description": (
                        "A pinned baseline instead: values in the headline unit (bits/s for STREAM "
                        "tests, transactions/s or connections/s), e.g. run means copied from the history."
                    ),
                },
                "minChangePercent": {
                    "type": "number",
                    "minimum": 1,
                    "maximum": 100,
                    "description": f"Smallest change that counts (default {DEFAULT_MIN_CHANGE_PERCENT:g} %).",
                },
                "pValue": {
                    "type": "number",
                    "minimum": 0.0001,
                    "maximum": 0.5,
                    "description": (
                        f"Significance level of the change points and verdicts (default {DEFAULT_P_VALUE}: "
                        "at most one false Regressed per 720 runs, docs/benchmarks.md)."
                    ),
                },
                "direction": {
                    "type": "string",
                    "enum": list(DIRECTIONS),
                    "description": (
                        f"Which change is a regression (default {DEFAULT_DIRECTION}: every figure "
                        "judged is higher-is-better); Either also reports a rise."
                    ),
                },
                "acknowledgedRun": {
                    "type": "integer",
                    "minimum": 1,
                    "description": (
                        "A known and accepted change: from this run on, the runs before it are no "
                        "baseline (e.g. the changeRun of status.regression after a deliberate "
                        "change of the network). Not with baseline."
                    ),
                },
            },
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

_PERCENTILES = {f"{p}Seconds": {"type": "number"} for p in ("p50", "p90", "p99")}
# The spec fields a result's figure depends on (operators.netperf.measurement).
MEASUREMENT_FIELDS = (
    "testType",
    "parallel",
    "messageSize",
    "path",
    "serverNode",
    "clientNode",
    "placement",
    "image",
    "duration",
)

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
        "path": {"type": "string", "description": "The path of the run in progress, or of the latest run."},
        "serviceIP": {
            "type": "string",
            "description": "path service: the ClusterIP of the run's Service, the client's target.",
        },
        "paths": {
            "type": "array",
            "maxItems": MAX_COMPARE,
            "description": (
                "compare: each path's result, in spec.compare's order (a path still to run is absent)."
            ),
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "enum": list(PATHS)},
                    "result": {"type": "string", "enum": ["Done", "Error"]},
                    "headline": {"type": "string"},
                    "reason": {"type": "string"},
                    "unit": {"type": "string", "enum": ["bitsPerSec", "perSec"]},
                    "mean": {"type": "number", "description": "Mean of the headline figure."},
                    "ci95Low": {"type": "number"},
                    "ci95High": {"type": "number"},
                    "samples": {"type": "array", "maxItems": MAX_SAMPLES, "items": {"type": "number"}},
                    **_PERCENTILES,
                },
            },
        },
        "ratios": {
            "type": "object",
            "description": (
                "compare: ratios of the paths' mean headline figures (throughput, or transactions/s): "
                "podToHost = pod / host (what the pod network keeps of the node's), serviceToPod = "
                "service / pod (what kube-proxy keeps), serviceToHost = service / host."
            ),
            "properties": {
                "podToHost": {"type": "number"},
                "serviceToPod": {"type": "number"},
                "serviceToHost": {"type": "number"},
            },
        },
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
        "run": {"type": "integer", "description": "Scheduled: the number of the latest run (1, 2, ...)."},
        "runSpec": {
            "type": "object",
            "description": (
                "Scheduled: the test fields of spec as the latest run started (its pods' spec), "
                "samples included (spec.samples or its default)."
            ),
            # spec's test fields, without defaults and rules: a copy of what was admitted.
            "properties": {
                k: {kk: vv for kk, vv in v.items() if kk not in ("default", "x-kubernetes-validations")}
                for k, v in SPEC_SCHEMA["properties"].items()
                if k not in SCHEDULE_FIELDS
            },
        },
        "scheduledTime": {**_TIME, "description": "Scheduled: the due time the latest run started for."},
        "lastScheduleTime": {
            **_TIME,
            "description": "Scheduled: the latest due time dealt with (run or skipped).",
        },
        "nextRunTime": {**_TIME, "description": "Scheduled: the next due time."},
        "skippedRuns": {
            "type": "object",
            "description": (
                "Scheduled: due times that started no run, by reason: overlapping (a run was in "
                "progress), missed (passed while the operator was down; all but the latest, or "
                "all with startingDeadlineSeconds), outsideWindow, suspended."
            ),
            "properties": {r: {"type": "integer"} for r in SKIP_REASONS},
        },
        "history": {
            "type": "array",
            "maxItems": MAX_HISTORY,
            "description": (
                "Scheduled: the latest results, newest last (at most spec.historyLimit): the "
                "headline figure's mean, 95% CI and samples (unit bitsPerSec or perSec), p99 "
                "latency of the RR types, or the error's reason."
            ),
            "items": {
                "type": "object",
                "properties": {
                    "run": {"type": "integer"},
                    "scheduledTime": _TIME,
                    "completedAt": _TIME,
                    "testType": {"type": "string"},
                    "result": {"type": "string", "enum": ["Done", "Error"]},
                    "reason": {"type": "string"},
                    "unit": {"type": "string", "enum": ["bitsPerSec", "perSec"]},
                    "mean": {"type": "number"},
                    "ci95Low": {"type": "number"},
                    "ci95High": {"type": "number"},
                    "samples": {"type": "array", "maxItems": 10, "items": {"type": "number"}},
                    **_PERCENTILES,
                    "measurement": {
                        "type": "string",
                        "description": (
                            "The key of what the run measured (status.measurement.key): results "
                            "are compared only with results of the same key."
                        ),
                    },
                },
            },
        },
        "measurement": {
            "type": "object",
            "description": (
                "Scheduled: what the latest result measured, the spec fields that change the figure "
                "(testType, parallel, messageSize, path, serverNode, clientNode, placement, image, "
                "duration), their key (each history entry's measurement) and since which run."
            ),
            "properties": {
                "key": {"type": "string"},
                "since": {"type": "integer", "description": "The first run of this measurement in a row."},
                "samples": {
                    "type": "integer",
                    "description": (
                        "The samples of the latest result (spec.samples or its default); not part "
                        "of the key: they change how well a figure is known, not the figure."
                    ),
                },
                **{
                    f: {k: v for k, v in SPEC_SCHEMA["properties"][f].items() if k in ("type", "enum")}
                    for f in MEASUREMENT_FIELDS
                },
            },
        },
        "regression": {
            "type": "object",
            "description": (
                "Scheduled: the latest result judged against the earlier results of its measurement "
                "(see spec.regression); removed when the schedule is removed or the spec's "
                "measurement changes (the Regressed condition says so)."
            ),
            "properties": {
                "run": {"type": "integer", "description": "The run judged."},
                "testType": {"type": "string"},
                "measurement": {"type": "string", "description": "The key of its measurement."},
                "judged": {
                    "type": "boolean",
                    "description": "False when there was nothing to judge (reason says why).",
                },
                "reason": {
                    "type": "string",
                    "description": (
                        "Regressed, WithinBaseline, or why it was not judged: NewBaseline (the first "
                        "result of its measurement), TooFewSamples (a baseline of fewer than 2 "
                        "runs), ZeroBaseline, NotFinite."
                    ),
                },
                "regressed": {"type": "boolean"},
                "regressedSince": {
                    "type": "integer",
                    "description": "The first run of the regression in a row (the alert's run label).",
                },
                "baselineMean": {"type": "number"},
                "mean": {"type": "number"},
                "changePercent": {"type": "number"},
                "pValue": {"type": "number"},
                "baselineSamples": {
                    "type": "integer",
                    "description": "Not written any more (see baselineRuns).",
                },
                "baselineRuns": {
                    "type": "integer",
                    "description": "Runs (or pinned values) in the baseline the result was judged against.",
                },
                "changeRun": {
                    "type": "integer",
                    "description": "Regressed: the regression's first run (see regression.acknowledgedRun).",
                },
            },
        },
    },
}


def combination_errors(spec: dict[str, Any]) -> list[FieldError]:
    """The CEL rules on spec in Python (the controller cannot run CEL): for objects that reached
    it without them (stored before the rules, or a relaxed CRD)."""
    full = {**DEFAULTS, **spec}
    errors = []
    if full["parallel"] != 1 and full["testType"] not in STREAM_TYPES:
        errors.append(FieldError("spec.parallel", _STREAMS_ONLY[1]))
    if int(full["parallel"]) * samples(spec) > MAX_RUNS:
        errors.append(FieldError("spec.parallel", _RUNS_FIT[1]))
    for f, _rule, message in _NEEDS_SCHEDULE:
        if spec.get(f) is not None and not spec.get("schedule"):
            errors.append(FieldError(f"spec.{f}", message))
    if spec.get("path") is not None and spec.get("compare") is not None:
        errors.append(FieldError("spec.compare", _PATH_OR_COMPARE[1]))
    compare = spec.get("compare") or []
    if len(set(compare)) != len(compare):
        errors.append(FieldError("spec.compare", _COMPARE_UNIQUE[1]))
    regression = spec.get("regression") or {}
    if regression.get("acknowledgedRun") is not None and regression.get("baseline") is not None:
        errors.append(FieldError("spec.regression.acknowledgedRun", _ACK_OR_PINNED[1]))
    window = spec.get("window") or {}
    if window and window.get("startHour") == window.get("endHour"):
        errors.append(FieldError("spec.window", _WINDOW_NOT_EMPTY[1]))
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
        {"name": "Path", "type": "string", "jsonPath": ".status.path", "priority": 1},
        {
            "name": "Pod/Host",
            "type": "number",
            "jsonPath": ".status.ratios.podToHost",
            "description": "compare: pod path's mean / host path's",
            "priority": 1,
        },
        {
            "name": "Service/Pod",
            "type": "number",
            "jsonPath": ".status.ratios.serviceToPod",
            "description": "compare: service path's mean / pod path's",
            "priority": 1,
        },
        {"name": "Reason", "type": "string", "jsonPath": ".status.reason", "priority": 1},
        {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule", "priority": 1},
        {"name": "Runs", "type": "integer", "jsonPath": ".status.run", "priority": 1},
        {"name": "Next", "type": "date", "jsonPath": ".status.nextRunTime", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ),
    # A Service's name (path service) has no dots and starts with a letter.
    object_validations=name_rules(SERVICE_REQUESTED),
)


def samples(spec: Mapping[str, Any]) -> int:
    """The samples a run of ``spec`` takes: ``spec.samples`` when set; else DETECTION_SAMPLES with a
    schedule (every result judged for a regression), DEFAULT_SAMPLES without, in either case no
    more than parallel leaves room for in MAX_RUNS (and at least 1)."""
    if spec.get("samples") is not None:
        return int(spec["samples"])
    wanted = DETECTION_SAMPLES if spec.get("schedule") else DEFAULT_SAMPLES
    parallel = max(1, int(spec.get("parallel") or DEFAULTS["parallel"]))
    return max(1, min(wanted, MAX_RUNS // parallel))


def detection_note(samples: int) -> str:
    """What a scheduled run of ``samples`` samples is to be told: nothing from DETECTION_SAMPLES on,
    else that the detector's error budget is not promised for it."""
    if samples >= DETECTION_SAMPLES:
        return ""
    return (
        f" ({samples} samples per run: the detection goal of docs/benchmarks.md needs "
        f"{DETECTION_SAMPLES}, it is not promised)"
    )


def paths(spec: dict[str, Any]) -> tuple[str, ...]:
    """The paths a run of ``spec`` measures, in order: compare's, or the one path (default pod)."""
    if spec.get("compare"):
        return tuple(spec["compare"])
    return (spec.get("path") or DEFAULT_PATH,)


def requests_service(spec: dict[str, Any]) -> bool:
    """Whether a run of ``spec`` makes a Service (SERVICE_REQUESTED in Python)."""
    return "service" in paths(spec)
