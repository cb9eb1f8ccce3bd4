"""What a scheduled result measures: the spec fields that change its figure (pure).

Two results are compared only when they measure the same thing. Everything that changes the
figure is part of the measurement: the test type, the parallel streams, the message size, the
path measured (compare: its first path, whose figure the history keeps), where the pods run
(serverNode, clientNode, and placement when no clientNode is set), the image (another netperf
build, another figure) and the seconds per sample (short samples include TCP's ramp-up). The
number of samples and the timeout are not: they change how well a figure is known, not the
figure.

Each history entry carries its measurement's ``key`` (a short digest: the image alone may be
512 characters, and the history holds up to 100 entries); ``status.measurement`` holds the
latest result's fields, so a change can be named (``parallel 8 -> 1``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from operators.netperf import schema

FIELDS = schema.MEASUREMENT_FIELDS


def fields(run_spec: Mapping[str, Any]) -> dict[str, Any]:
    """The measurement of a run's spec (defaults applied; fields that do not apply left out)."""
    full = {**schema.DEFAULTS, **{k: v for k, v in run_spec.items() if v is not None}}
    found: dict[str, Any] = {
        "testType": full["testType"],
        "parallel": int(full["parallel"]),
        "path": schema.paths(dict(full))[0],
        "image": full["image"],
        "duration": int(full["duration"]),
    }
    for optional in ("messageSize", "serverNode", "clientNode"):
        if full.get(optional) is not None:
            found[optional] = full[optional]
    if full.get("clientNode") is None:  # with clientNode set, placement chooses nothing
        found["placement"] = full["placement"]
    return {k: found[k] for k in FIELDS if k in found}


def key(measured: Mapping[str, Any]) -> str:
    """A short digest of ``fields``: equal for the same measurement, different otherwise."""
    text = json.dumps({k: measured[k] for k in FIELDS if k in measured}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def with_key(run_spec: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` and their ``key``: what ``status.measurement`` holds, with the run's samples
    when ``run_spec`` has them (what the run used; no part of the key)."""
    measured = fields(run_spec)
    found = {"key": key(measured), **measured}
    if run_spec.get("samples") is not None:
        found["samples"] = int(run_spec["samples"])
    return found


def change(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """The difference of two measurements in words, e.g. ``parallel 8 -> 1, path pod -> host``."""
    if not old:
        return ""
    parts = []
    for name in FIELDS:
        before, after = old.get(name), new.get(name)
        if before != after:
            parts.append(f"{name} {_word(before)} -> {_word(after)}")
    return ", ".join(parts)


def _word(value: Any) -> str:
    return "(unset)" if value is None else str(value)
