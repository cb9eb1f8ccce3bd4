"""The TDSet API (``schedule.rs/v1``): the one source of its CRD and validation.

Compatible with the original tutorial operator: ``container``, ``service``,
``schedulingConfig[]{startTime, endTime, replica}``, ``defaultReplica`` and ``intervalMint``
keep their names and meaning (``intervalMint`` is now only the longest time between two
re-checks; boundaries are hit exactly). Additions are optional and default to the original
behaviour: ``timeZone`` (UTC), ``startMinute``/``endMinute`` (0), ``days`` (every day),
``suspend`` (false).
"""

from __future__ import annotations

from typing import Any

from operators.tdset.schedule import DAYS, DEFAULT_RECHECK_MINUTES, DEFAULT_TIME_ZONE
from shared.api.crd import CONDITIONS_SCHEMA, CRDSpec, ratcheting_rule
from shared.api.validation import IMAGE, name_rules

GROUP = "schedule.rs"
VERSION = "v1"
KIND = "TDSet"
PLURAL = "tdsets"
APP = "tdset"  # value of app.kubernetes.io/name on every child

MAX_WINDOWS = 48
MAX_REPLICAS = 10000
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
    # -- spec.scaleTargetRef (issue #26): a workload the user runs, instead of the container --
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
                "Kinds beyond those four need RBAC (docs/operators/tdset.md)."
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
    ),
    object_validations=name_rules("has(self.spec.service)"),
)
