"""The TDSet API (``schedule.rs/v1``): the one source of its CRD and validation.

Compatible with the original tutorial operator: ``container``, ``service``,
``schedulingConfig[]{startTime, endTime, replica}``, ``defaultReplica`` and ``intervalMint``
keep their names and meaning (``intervalMint`` is only the longest time between two
re-checks; boundaries are hit exactly). Additions are optional and default to the original
behaviour: ``timeZone`` (UTC), ``startMinute``/``endMinute`` (0), ``days`` (every day),
``suspend`` (false).
"""

from __future__ import annotations

from typing import Any

from operators.tdset.schedule import (
    ANNOTATION_FORM,
    DATE_PATTERN,
    DAYS,
    DEFAULT_RECHECK_MINUTES,
    DEFAULT_TIME_ZONE,
    DURATION_PATTERN,
    EARLIEST_YEAR,
    LATEST_YEAR,
    MAX_REPLICAS,
    OVERRIDE_ANNOTATION,
    RANGE_MESSAGE,
    TIME_PATTERN,
    UPCOMING,
    in_range_rule,
)
from shared.api.crd import CONDITIONS_SCHEMA, CRDSpec, ratcheting_rule
from shared.api.validation import IMAGE, name_rules

GROUP = "schedule.rs"
VERSION = "v1"
KIND = "TDSet"
PLURAL = "tdsets"
APP = "tdset"  # value of app.kubernetes.io/name on every child

MAX_WINDOWS = 48
# Safety-net re-check when intervalMint is not set (boundaries are woken for exactly anyway).

_HOUR = {"type": "integer", "minimum": 0, "maximum": 23}
_MINUTE = {"type": "integer", "minimum": 0, "maximum": 59, "default": 0}

WINDOW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Run `replica` pods from startTime:startMinute (inclusive) to endTime:endMinute "
        "(exclusive), wall clock of spec.timeZone. end <= start crosses midnight (19 -> 0 is "
        "19:00-24:00). The first matching window wins."
    ),
    "required": ["startTime", "endTime", "replica"],
    "properties": {
        "startTime": {**_HOUR, "description": "Hour the window starts (0-23)."},
        "startMinute": {**_MINUTE, "description": "Minute of startTime the window starts (0-59)."},
        "endTime": {**_HOUR, "description": "Hour the window ends, exclusive (0-23)."},
        "endMinute": {**_MINUTE, "description": "Minute of endTime the window ends (0-59)."},
        "replica": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_REPLICAS,
            "description": "Replicas while the window is active.",
        },
        "days": {
            "type": "array",
            "description": "Days on which the window starts (default: every day).",
            "minItems": 1,
            "maxItems": 7,
            "items": {"type": "string", "enum": list(DAYS)},
            "x-kubernetes-list-type": "set",
        },
    },
    "x-kubernetes-validations": [
        {
            "rule": (
                "self.startTime * 60 + (has(self.startMinute) ? self.startMinute : 0) != "
                "self.endTime * 60 + (has(self.endMinute) ? self.endMinute : 0)"
            ),
            "message": (
                "start and end are equal; a window must not be empty (for all day, use defaultReplica)"
            ),
        }
    ],
}

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    # -- spec.scaleTargetRef: a workload the user runs, instead of the container --
    "description": (
        "A Deployment whose replica count follows a time-of-day schedule: the TDSet's own "
        "(spec.container) or one you run (spec.scaleTargetRef)."
    ),
    "required": ["schedulingConfig", "defaultReplica"],
    # Ratcheting (tools.check.crd_compat): every stored TDSet has a container, so both hold.
    "x-kubernetes-validations": [
        ratcheting_rule(
            "has(self.container) != has(self.scaleTargetRef)",
            "set exactly one of container (a Deployment of the TDSet's own) and scaleTargetRef",
        ),
        ratcheting_rule(
            "!has(self.service) || has(self.container)",
            "service exposes the TDSet's own pods: it needs container, not scaleTargetRef",
        ),
    ],
    "properties": {
        "scaleTargetRef": {
            "type": "object",
            "description": (
                "An object of the TDSet's namespace with a /scale subresource (a Deployment, "
                "StatefulSet, ReplicaSet, WebServer, or a custom resource with one) whose replicas "
                "follow the schedule, read and written through /scale. Never owned: the replicas "
                "found are remembered on it and given back when the TDSet goes or points elsewhere. "
                "Kinds beyond those four need RBAC (docs/operators/tdset-targets.md)."
            ),
            "required": ["apiVersion", "kind", "name"],
            "properties": {
                "apiVersion": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 317,
                    "pattern": r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?$",
                    "description": "API version of the target, e.g. apps/v1.",
                },
                "kind": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 63,
                    "pattern": r"^[A-Z][A-Za-z0-9]*$",
                    "description": "Kind of the target, e.g. Deployment.",
                },
                "name": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 253,
                    "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
                    "description": "Name of the target, in the TDSet's namespace.",
                },
            },
        },
        # -- end of spec.scaleTargetRef --
        "container": {
            "type": "object",
            "description": (
                "The container of the Deployment's pods, with the pod settings it needs "
                "(runAsUser, automountServiceAccountToken)."
            ),
            "required": ["image", "port"],
            "properties": {
                "image": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 512,
                    "pattern": r"^[^\s]+$",
                    "x-kubernetes-validations": [dict(IMAGE.cel)],
                    "description": "Container image.",
                },
                "port": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 65535,
                    "description": "Container port.",
                },
                "runAsUser": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 2147483647,
                    "description": (
                        "Run the pods as this non-root UID with the restricted Pod Security "
                        "Standard (no privilege escalation, all capabilities dropped, "
                        "RuntimeDefault seccomp), as namespaces enforcing it require. Needs an "
                        "image that runs as non-root on a port >= 1024, e.g. image "
                        "nginxinc/nginx-unprivileged:1.27, port 8080, runAsUser 101."
                    ),
                },
                "automountServiceAccountToken": {
                    "type": "boolean",
                    "default": False,
                    "description": (
                        "Mount a token of the namespace's default ServiceAccount into the pods "
                        "(the pod field of the same name). Off by default. Set it for an image "
                        "that calls the Kubernetes API; true then overrides the ServiceAccount's "
                        "own automountServiceAccountToken, as on a pod. A change rolls the "
                        "Deployment."
                    ),
                },
            },
        },
        "service": {
            "type": "object",
            "description": "When set, a ClusterIP Service named like the TDSet exposes the pods.",
            "required": ["port"],
            "properties": {
                "port": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 65535,
                    "description": "Service port (forwards to container.port).",
                },
            },
        },
        "schedulingConfig": {
            "type": "array",
            "description": "Time windows with their replica counts; the first matching window wins.",
            "maxItems": MAX_WINDOWS,
            "items": WINDOW_SCHEMA,
        },
        "defaultReplica": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_REPLICAS,
            "description": "Replicas outside every window.",
        },
        "intervalMint": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1440,
            "description": (
                "Longest time in minutes between two re-checks (window boundaries are acted on "
                f"exactly; default {DEFAULT_RECHECK_MINUTES})."
            ),
        },
        "timeZone": {
            "type": "string",
            "default": DEFAULT_TIME_ZONE,
            "minLength": 1,
            "maxLength": 64,
            "pattern": r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$",
            "description": "IANA time zone of the windows, e.g. Europe/Berlin (default UTC).",
        },
        "suspend": {
            "type": "boolean",
            "default": False,
            "description": (
                "Pause scheduling: the Deployment keeps whatever replica count it has (manual "
                "scaling is then respected); image, port and Service changes still apply."
            ),
        },
    },
}

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "desiredReplicas": {
            "type": "integer",
            "description": "Replicas the operator maintains now (the schedule's, unless suspended).",
        },
        "scheduledReplicas": {"type": "integer", "description": "Replicas the schedule asks for now."},
        "activeWindow": {
            "type": "integer",
            "nullable": True,
            "description": "Index in spec.schedulingConfig of the active window; absent outside all.",
        },
        "nextTransitionTime": {
            "type": "string",
            "format": "date-time",
            "nullable": True,
            "description": "When the schedule changes next (absent if not within 8 days).",
        },
        "replicas": {"type": "integer", "description": "Pods of the Deployment."},
        "readyReplicas": {"type": "integer", "description": "Ready pods of the Deployment."},
        "autoscaler": {
            "type": "string",
            "description": "HorizontalPodAutoscaler whose minReplicas follows the schedule, if any.",
        },
        "warnings": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Things that work but are probably not meant (e.g. overlapping windows).",
        },
        "observedGeneration": {"type": "integer"},
        "conditions": CONDITIONS_SCHEMA,
    },
}

# --- The layered calendar: overrides, holidays, pre-warm, preview. ---
# One block, merged into the schemas above, so the calendar's fields sit apart from the rest.
MAX_OVERRIDES = 32
MAX_HOLIDAYS = 366
_NAME = {"type": "string", "minLength": 1, "maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}
# Dates and times within the calendar's years (schedule.EARLIEST_YEAR..LATEST_YEAR), a plain
# text comparison of the leading date; ratcheting, so an object stored before keeps updating.
_IN_RANGE = ratcheting_rule(in_range_rule(), RANGE_MESSAGE)
_TIME = {
    "type": "string",
    "minLength": 16,
    "maxLength": 25,
    "pattern": TIME_PATTERN,
    "x-kubernetes-validations": [_IN_RANGE],
}
_LEAD_TIME = {
    "type": "string",
    "minLength": 2,
    "maxLength": 16,
    "pattern": DURATION_PATTERN,
    "x-kubernetes-validations": [
        {"rule": "duration(self) <= duration('24h')", "message": "must be at most 24h"}
    ],
}
# Offsets in both: compare the instants; in neither: the same local format compares as text.
# Mixed forms are compared by the controller (which knows the zone).
_HAS_OFFSET = "{0}.endsWith('Z') || {0}.matches('[+-][0-9]{{2}}:[0-9]{{2}}$')"
_START_BEFORE_END = (
    f"({_HAS_OFFSET.format('self.start')}) != ({_HAS_OFFSET.format('self.end')}) || "
    f"(({_HAS_OFFSET.format('self.start')}) ? timestamp(self.start) < timestamp(self.end) : "
    "self.start < self.end)"
)
CALENDAR_WINDOW_PROPERTIES: dict[str, Any] = {
    "name": {
        **_NAME,
        "description": "Names the window in status.decidedBy and status.upcoming (else its index).",
    },
    "leadTime": {
        **_LEAD_TIME,
        "description": (
            "Pre-warm: scale up this long before the window opens (e.g. 5m, 1h30m; at most 24h; "
            "overrides spec.leadTime). Never scales down early."
        ),
    },
}
CALENDAR_SPEC_PROPERTIES: dict[str, Any] = {
    "overrides": {
        "type": "array",
        "description": (
            "Dated ranges with their replicas, above holidays and windows; the first in list order "
            "that contains now wins. Each expires at its end. The annotation "
            f'{OVERRIDE_ANNOTATION}: "{ANNOTATION_FORM}" is one more, above these.'
        ),
        "maxItems": MAX_OVERRIDES,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {
            "type": "object",
            "required": ["name", "start", "end", "replicas"],
            "properties": {
                "name": {**_NAME, "description": "Names the override in status.decidedBy (unique)."},
                "start": {
                    **_TIME,
                    "description": (
                        "When it starts: RFC 3339 (2026-11-27T00:00:00Z, 2026-11-27T00:00:00+01:00) "
                        "or a date and time in spec.timeZone (2026-11-27T00:00), in the years "
                        f"{EARLIEST_YEAR} to {LATEST_YEAR}."
                    ),
                },
                "end": {
                    **_TIME,
                    "description": "When it ends (exclusive) and expires; the same forms as start.",
                },
                "replicas": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_REPLICAS,
                    "description": "Replicas while it applies.",
                },
            },
            "x-kubernetes-validations": [{"rule": _START_BEFORE_END, "message": "end must be after start"}],
        },
    },
    "holidays": {
        "type": "object",
        "description": (
            "Dates on which holidays.replicas applies all day (00:00-24:00 in spec.timeZone), above "
            "the windows and below the overrides."
        ),
        "required": ["replicas"],
        "properties": {
            "dates": {
                "type": "array",
                "description": f"Holidays, e.g. 2026-12-25 (in the years {EARLIEST_YEAR} to {LATEST_YEAR}).",
                "maxItems": MAX_HOLIDAYS,
                "x-kubernetes-list-type": "set",
                "items": {"type": "string", "minLength": 10, "maxLength": 10, "pattern": DATE_PATTERN},
                # On the list: the items of a set are not correlatable, so a rule on them could
                # not ratchet.
                "x-kubernetes-validations": [
                    ratcheting_rule(f"self.all(d, {in_range_rule('d')})", f"every date {RANGE_MESSAGE}")
                ],
            },
            "configMapRef": {
                "type": "object",
                "description": (
                    "More dates, from any ConfigMap in the TDSet's namespace: each of its data values lists "
                    "dates (2026-12-25) separated by spaces, commas or lines; # starts a comment. "
                    "Changes apply at once."
                ),
                "required": ["name"],
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 253,
                        "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                        "description": "The ConfigMap's name.",
                    }
                },
            },
            "replicas": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_REPLICAS,
                "description": "Replicas on a holiday.",
            },
        },
    },
    "leadTime": {
        **_LEAD_TIME,
        "description": (
            "Pre-warm every window: scale up this long before it opens (e.g. 5m; at most 24h). "
            "A window's own leadTime overrides it. Never scales down early."
        ),
    },
}
_TRANSITION_TIME = {"type": "string", "format": "date-time"}
CALENDAR_STATUS_PROPERTIES: dict[str, Any] = {
    "decidedBy": {
        "type": "object",
        "description": (
            "Which layer decided scheduledReplicas (override, holiday, window, default, or leadTime "
            "while pre-warming for a window) and which entry of it (override name, date, window "
            "name or index)."
        ),
        "properties": {"layer": {"type": "string"}, "entry": {"type": "string"}},
    },
    "upcoming": {
        "type": "array",
        "description": f"The next {UPCOMING} transitions of the calendar (within 400 days).",
        "items": {
            "type": "object",
            "properties": {
                "time": {**_TRANSITION_TIME, "description": "When (UTC)."},
                "localTime": {"type": "string", "description": "When, on the wall clock of spec.timeZone."},
                "replicas": {"type": "integer"},
                "layer": {"type": "string"},
                "entry": {"type": "string"},
            },
        },
    },
    "preWarm": {
        "type": "object",
        "description": "The last pre-warmed window opening, and when the target was ready for it.",
        "properties": {
            "entry": {"type": "string", "description": "The window (name or index)."},
            "windowStart": {**_TRANSITION_TIME, "description": "When the window opened (or opens)."},
            "replicas": {"type": "integer", "description": "Replicas pre-warmed."},
            "readyAt": {**_TRANSITION_TIME, "description": "When readyReplicas first reached them."},
            "readySecondsAfterStart": {
                "type": "integer",
                "description": "readyAt minus windowStart: negative when ready before the window opened.",
            },
        },
    },
}
WINDOW_SCHEMA["properties"].update(CALENDAR_WINDOW_PROPERTIES)
SPEC_SCHEMA["properties"].update(CALENDAR_SPEC_PROPERTIES)
STATUS_SCHEMA["properties"].update(CALENDAR_STATUS_PROPERTIES)
# kubectl get tds -o wide: who decides now, and the next transition.
CALENDAR_COLUMNS = (
    {"name": "Layer", "type": "string", "jsonPath": ".status.decidedBy.layer", "priority": 1},
    {"name": "Next-Replicas", "type": "integer", "jsonPath": ".status.upcoming[0].replicas", "priority": 1},
    {"name": "Next-Layer", "type": "string", "jsonPath": ".status.upcoming[0].layer", "priority": 1},
)
# --- end of the calendar block ---

# --- Autoscaler bounds: an HPA's minReplicas/maxReplicas per entry. ---
# An entry's own bound, else the spec's, else the scheduled replicas (floor) and the HPA's own
# maxReplicas (cap), each bound on its own: the rules below reject every combination that would
# give an HPA minReplicas > maxReplicas, so what passes admission is always a valid HPA.
_BOUND = {"type": "integer", "minimum": 1, "maximum": MAX_REPLICAS}


def bound_properties(where: str) -> dict[str, Any]:
    return {
        "minReplicas": {
            **_BOUND,
            "description": (
                f"With an HPA on the target: its minReplicas (floor) while {where}, instead of the "
                "scheduled replicas. Given back when it stops deciding."
            ),
        },
        "maxReplicas": {
            **_BOUND,
            "description": (
                f"With an HPA on the target: its maxReplicas (cap) while {where}; the HPA's own "
                "maxReplicas is given back when it stops deciding."
            ),
        },
    }


def min_le_max(message: str = "maxReplicas must be at least minReplicas") -> dict[str, Any]:
    return ratcheting_rule(
        "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
        message,
        fieldPath=".maxReplicas",
    )


def _entries_within_spec(field: str, what: str) -> list[dict[str, Any]]:
    """An entry's own minimum under the spec's maximum, the spec's minimum under an entry's own
    maximum (the bound an entry leaves unset is the spec's)."""
    return [
        ratcheting_rule(
            f"!has(self.maxReplicas) || !has(self.{field}) || self.{field}.all(e, !has(e.minReplicas) || "
            "has(e.maxReplicas) || e.minReplicas <= self.maxReplicas)",
            f"a {what} with minReplicas and no maxReplicas of its own is capped by spec.maxReplicas: its "
            "minReplicas must not exceed spec.maxReplicas",
            fieldPath=f".{field}",
        ),
        ratcheting_rule(
            f"!has(self.minReplicas) || !has(self.{field}) || self.{field}.all(e, !has(e.maxReplicas) || "
            "has(e.minReplicas) || self.minReplicas <= e.maxReplicas)",
            f"a {what} with maxReplicas and no minReplicas of its own has spec.minReplicas as its floor: "
            "its maxReplicas must be at least spec.minReplicas",
            fieldPath=f".{field}",
        ),
    ]


WINDOW_SCHEMA["properties"].update(bound_properties("the window decides"))
# Not on the window itself: schedulingConfig is an atomic list, whose items have no oldSelf to
# ratchet on, and a plain rule added to an existing field could refuse a stored object's update.
_WINDOW_MIN_LE_MAX = ratcheting_rule(
    "!has(self.schedulingConfig) || self.schedulingConfig.all(w, !has(w.minReplicas) || "
    "!has(w.maxReplicas) || w.minReplicas <= w.maxReplicas)",
    "a window's maxReplicas must be at least its minReplicas",
    fieldPath=".schedulingConfig",
)
_OVERRIDE_ITEM = SPEC_SCHEMA["properties"]["overrides"]["items"]
_OVERRIDE_ITEM["properties"].update(bound_properties("the override decides"))
_OVERRIDE_ITEM["x-kubernetes-validations"].append(min_le_max())
SPEC_SCHEMA["properties"].update(
    bound_properties(
        "no entry with its own decides (a holiday, the default, or a window or override without it)"
    )
)
SPEC_SCHEMA["x-kubernetes-validations"] += [
    min_le_max(),
    _WINDOW_MIN_LE_MAX,
    *_entries_within_spec("schedulingConfig", "window"),
    *_entries_within_spec("overrides", "override"),
]
STATUS_SCHEMA["properties"]["autoscalerBounds"] = {
    "type": "object",
    "description": (
        "With an HPA: the minReplicas and maxReplicas the TDSet holds it to now, and where each comes "
        "from (window/<entry>, override/<name>, leadTime/<entry>, spec; schedule: the scheduled "
        "replicas; autoscaler: the HPA's own maxReplicas)."
    ),
    "properties": {
        "minReplicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"},
        "minFrom": {"type": "string"},
        "maxFrom": {"type": "string"},
    },
}
# --- end of the autoscaler bounds block ---

CRD = CRDSpec(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=PLURAL,
    spec_schema=SPEC_SCHEMA,
    status_schema=STATUS_SCHEMA,
    short_names=("tds",),
    categories=("all", "k8s-operators-py"),
    printer_columns=(
        {"name": "Desired", "type": "integer", "jsonPath": ".status.desiredReplicas"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Window", "type": "integer", "jsonPath": ".status.activeWindow"},
        {"name": "Next", "type": "string", "jsonPath": ".status.nextTransitionTime"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        *CALENDAR_COLUMNS,
    ),
    object_validations=name_rules("has(self.spec.service)"),
)
