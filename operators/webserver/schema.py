"""The WebServer API (``demo.k8s.io/v1alpha1``): the one source of its CRD and validation.

Compatible with the original tutorial operator: ``spec: {replicas: 5}`` keeps working, and
``status.count`` still reports the number of pods. Everything else is optional with defaults
applied by the API server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from shared.api.crd import CONDITIONS_SCHEMA, CRDSpec, ratcheting_rule
from shared.api.validation import (
    IMAGE,
    QUANTITIES,
    REQUESTS_WITHIN_LIMITS,
    RESOURCE_NAMES_RULE,
    FieldError,
    name_rules,
)

GROUP = "demo.k8s.io"
VERSION = "v1alpha1"
KIND = "WebServer"
PLURAL = "webservers"
APP = "webserver"  # value of app.kubernetes.io/name on every child

DEFAULT_IMAGE = "nginxdemos/hello"
DEFAULT_PORT = 80
MAX_REPLICAS = 1000

_QUANTITY: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "x-kubernetes-int-or-string": True,
    # The published Quantity grammar; it admits a few strings the parser refuses (1E.5), and
    # negative values: CEL rules on resources check with the parser itself (QUANTITIES).
    "pattern": (
        r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
        r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
    ),
}

_RESOURCE_LIST: dict[str, Any] = {
    "type": "object",
    "maxProperties": 8,
    "additionalProperties": _QUANTITY,
    "x-kubernetes-validations": [dict(RESOURCE_NAMES_RULE.cel)],
}

# Label selector and ownership keys the operator sets on every pod: a user label must never
# replace them (the pods would leave the WebServer's selector, or another's would take them).
RESERVED_LABEL_PREFIXES = ("app.kubernetes.io/", "demo.k8s.io/")
RESERVED_LABELS = ("app",)
# The pod annotation spec.restartedAt is written to (the one `kubectl rollout restart` uses).
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
MAX_MIN_READY_SECONDS = 3600
MAX_PROGRESS_DEADLINE_SECONDS = 86400
DEADLINE_AFTER_MIN_READY = "progressDeadlineSeconds must be greater than minReadySeconds"

# A C identifier with '-' and '.': the environment variable names every supported API server
# accepts (1.34 relaxed them to any printable character but '='; older ones refuse the rest).
ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
CONFIG_KEY = r"^[-._a-zA-Z0-9]+$"
# An absolute path without empty segments or a trailing slash: "/a" and "/a/" would be two
# mount paths to the API server's uniqueness check but one to the container runtime.
MOUNT_PATH = r"^(/[^/]+)+$"
HTTP_PATH = r"^/[!-~]*$"  # a path and query, printable ASCII without spaces
# A qualified name (label and annotation keys): an optional DNS subdomain prefix and '/', then
# 1-63 alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric.
QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
QUALIFIED_NAME_MESSAGE = (
    "keys must be qualified names: an optional DNS subdomain prefix of at most 253 characters and "
    "'/', then at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
)
RESERVED_LABELS_MESSAGE = (
    "must not set app or keys under app.kubernetes.io/ or demo.k8s.io/: the operator's own pod "
    "labels (selector, template hash, slot)"
)
_QUALIFIED_KEYS_RULE = (
    f"self.all(k, k.matches('{QUALIFIED_NAME}') && (!k.contains('/') || k.indexOf('/') <= 253))"
)


def _ref(what: str, *, key: bool) -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": {"type": "string", "minLength": 1, "maxLength": 253, "pattern": DNS_SUBDOMAIN},
    }
    if key:
        props["key"] = {"type": "string", "minLength": 1, "maxLength": 253, "pattern": CONFIG_KEY}
    return {
        "type": "object",
        "required": ["name", "key"] if key else ["name"],
        "properties": props,
        "description": f"A {what} in the WebServer's namespace" + (", and one of its keys." if key else "."),
    }


def _map(values: dict[str, Any], rules: list[dict[str, Any]], description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "maxProperties": 32,
        "additionalProperties": values,
        "x-kubernetes-validations": rules,
        "description": description,
    }


# The most characters of each large part of a spec together (env names and values, command,
# args, pod annotations' keys and values): what an object may cost the operator's memory is
# bounded by these totals, not by the item counts times the item lengths (which allowed about
# 1 MiB a WebServer). Ratcheting: a spec stored before the rule keeps its value while unchanged.
MAX_PART_CHARS = 8192
TOTAL_MESSAGE = f"at most {MAX_PART_CHARS} characters in all"


def _total(rule: str) -> dict[str, Any]:
    return ratcheting_rule(f"{rule} <= {MAX_PART_CHARS}", TOTAL_MESSAGE)


_STRINGS: dict[str, Any] = {
    "type": "array",
    "maxItems": 64,
    "items": {"type": "string", "maxLength": 4096},
    "x-kubernetes-validations": [_total("self.map(s, size(s)).sum()")],
}

CONFIGURATION_SCHEMA: dict[str, Any] = {
    "env": {
        "type": "array",
        "maxItems": 64,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "x-kubernetes-validations": [
            _total("self.map(e, size(e.name) + (has(e.value) ? size(e.value) : 0)).sum()")
        ],
        "description": (
            "Environment variables of the web-server container: a value, or a key of a ConfigMap "
            f"or Secret; names and values at most {MAX_PART_CHARS} characters in all. "
            "A change rolls the pods."
        ),
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 253, "pattern": ENV_NAME},
                "value": {"type": "string", "maxLength": 8192},
                "valueFrom": {
                    "type": "object",
                    "properties": {
                        "configMapKeyRef": _ref("ConfigMap", key=True),
                        "secretKeyRef": _ref("Secret", key=True),
                    },
                    "x-kubernetes-validations": [
                        {
                            "rule": "has(self.configMapKeyRef) != has(self.secretKeyRef)",
                            "message": "valueFrom needs exactly one of configMapKeyRef and secretKeyRef",
                        }
                    ],
                },
            },
            "x-kubernetes-validations": [
                {
                    "rule": "!(has(self.value) && has(self.valueFrom))",
                    "message": "an environment variable has a value or a valueFrom, not both",
                }
            ],
        },
    },
    "envFrom": {
        "type": "array",
        "maxItems": 16,
        "description": (
            "Every key of a ConfigMap or Secret as environment variables, optionally prefixed. "
            "A change rolls the pods."
        ),
        "items": {
            "type": "object",
            "properties": {
                "prefix": {"type": "string", "maxLength": 253, "pattern": ENV_NAME},
                "configMapRef": _ref("ConfigMap", key=False),
                "secretRef": _ref("Secret", key=False),
            },
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.configMapRef) != has(self.secretRef)",
                    "message": "envFrom entries need exactly one of configMapRef and secretRef",
                }
            ],
        },
    },
    "volumes": {
        "type": "array",
        "maxItems": 16,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "description": (
            "ConfigMaps and Secrets mounted read-only in the web-server container, each key a file "
            "under mountPath. A change rolls the pods."
        ),
        "items": {
            "type": "object",
            "required": ["name", "mountPath"],
            "properties": {
                "name": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 63,
                    "pattern": DNS_LABEL,
                    "description": "Volume name in the pod (a DNS label).",
                },
                "mountPath": {
                    "type": "string",
                    "maxLength": 1024,
                    "pattern": MOUNT_PATH,
                    "description": "Absolute directory in the container, without a trailing slash.",
                },
                "configMap": _ref("ConfigMap", key=False),
                "secret": _ref("Secret", key=False),
            },
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.configMap) != has(self.secret)",
                    "message": "a volume needs exactly one of configMap and secret",
                },
                {
                    "rule": "!self.name.startsWith('kube-api-access-')",
                    "message": "volume names starting kube-api-access- are the API token's",
                    "fieldPath": ".name",
                },
            ],
        },
        "x-kubernetes-validations": [
            {
                "rule": "self.all(v, self.exists_one(w, w.mountPath == v.mountPath))",
                "message": "volumes must have different mountPaths",
            }
        ],
    },
    "command": {
        **_STRINGS,
        "description": (
            "Replaces the image's entrypoint (a container's command); at most "
            f"{MAX_PART_CHARS} characters in all. A change rolls the pods."
        ),
    },
    "args": {
        **_STRINGS,
        "description": (
            "Replaces the image's arguments (a container's args); at most "
            f"{MAX_PART_CHARS} characters in all. A change rolls the pods."
        ),
    },
    "podMetadata": {
        "type": "object",
        "description": (
            "Labels and annotations added to the pods (never the operator's own labels). A change "
            "rolls the pods."
        ),
        "properties": {
            "labels": _map(
                {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE},
                [
                    {"rule": _QUALIFIED_KEYS_RULE, "message": QUALIFIED_NAME_MESSAGE},
                    {
                        "rule": (
                            "self.all(k, k != 'app' && !k.startsWith('app.kubernetes.io/') && "
                            "!k.startsWith('demo.k8s.io/'))"
                        ),
                        "message": RESERVED_LABELS_MESSAGE,
                    },
                ],
                "Pod labels; values are at most 63 alphanumerics, '-', '_' or '.'.",
            ),
            "annotations": _map(
                {"type": "string", "maxLength": 4096},
                [
                    {"rule": _QUALIFIED_KEYS_RULE, "message": QUALIFIED_NAME_MESSAGE},
                    {
                        "rule": f"!('{RESTARTED_AT}' in self)",
                        "message": f"{RESTARTED_AT} is set from spec.restartedAt",
                    },
                    _total("self.map(k, size(k) + size(self[k])).sum()"),
                ],
                f"Pod annotations; keys and values at most {MAX_PART_CHARS} characters in all.",
            ),
        },
    },
    "restartedAt": {
        "type": "string",
        "maxLength": 64,
        "description": (
            "Any new value (e.g. the current time) rolls the pods, like `kubectl rollout restart`; "
            "the way to make pods read a changed Secret, which the operator cannot watch. Written "
            f"to the pods' {RESTARTED_AT} annotation."
        ),
    },
}

HEALTH_SCHEMA: dict[str, Any] = {
    "readinessPath": {
        "type": "string",
        "maxLength": 1024,
        "pattern": HTTP_PATH,
        "description": (
            "Readiness by HTTP GET of this path on the container's named port (http) instead of a "
            "TCP connect: a pod takes traffic only once it answers 200-399. A change rolls the pods."
        ),
    },
    "liveness": {
        "type": "object",
        "required": ["path"],
        "description": (
            "A liveness check: the kubelet restarts the container after failureThreshold failed "
            "HTTP GETs of path, periodSeconds apart. A change rolls the pods."
        ),
        "properties": {
            "path": {"type": "string", "maxLength": 1024, "pattern": HTTP_PATH},
            "initialDelaySeconds": {"type": "integer", "minimum": 0, "maximum": 3600, "default": 0},
            "periodSeconds": {"type": "integer", "minimum": 1, "maximum": 3600, "default": 10},
            "failureThreshold": {"type": "integer", "minimum": 1, "maximum": 100, "default": 3},
        },
    },
    "minReadySeconds": {
        "type": "integer",
        "minimum": 0,
        "maximum": MAX_MIN_READY_SECONDS,
        "default": 0,
        "description": (
            "A ready pod counts as available (status.availableReplicas, and for the rollout: an old "
            "pod goes only when enough are available) only after this many seconds, as for a "
            "Deployment. Does not roll the pods."
        ),
    },
    "progressDeadlineSeconds": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_PROGRESS_DEADLINE_SECONDS,
        "description": (
            "A rollout that makes no progress (no more available new pods, no fewer old ones) for "
            "this long is reported as Progressing=False, ProgressDeadlineExceeded, as for a "
            "Deployment; with rollout.autoRollback the pods then go back to the last revision that "
            "became available. Unset: 600 plus minReadySeconds (a new pod counts as progress only "
            "once available). When set, must be greater than minReadySeconds. Does not roll the pods."
        ),
    },
}

MAX_CANARY_STEPS = 20
TIMEOUT_WITHIN_INTERVAL = "timeoutSeconds must not be above intervalSeconds"
STEP_ONE_OF = "a canary step has exactly one of weight and pause"
CANARY_NEEDS_STEPS = "strategy Canary needs canary.steps"
ROLLBACK_NOT_PAUSED = "rollbackTo skips the rollout's pause: paused must be false while it is set"

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Desired state of a group of identical web-server pods.",
    "required": ["replicas"],
    # Ratcheting (a spec stored before the rule stays writable while unchanged): the rule is new
    # on an existing object (tools.check.crd_compat).
    "x-kubernetes-validations": [
        ratcheting_rule(
            "!has(self.progressDeadlineSeconds) || "
            "self.progressDeadlineSeconds > (has(self.minReadySeconds) ? self.minReadySeconds : 0)",
            DEADLINE_AFTER_MIN_READY,
            fieldPath=".progressDeadlineSeconds",
        )
    ],
    "properties": {
        "replicas": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_REPLICAS,
            "description": "Number of web-server pods to keep running.",
        },
        "image": {
            "type": "string",
            "default": DEFAULT_IMAGE,
            "minLength": 1,
            "maxLength": 512,
            "pattern": r"^[^\s]+$",
            "x-kubernetes-validations": [dict(IMAGE.cel)],
            "description": "Container image of the web server.",
        },
        "port": {
            "type": "integer",
            "default": DEFAULT_PORT,
            "minimum": 1,
            "maximum": 65535,
            "description": "Container port the server listens on (readiness probe target).",
        },
        "runAsUser": {
            "type": "integer",
            "minimum": 1,
            "maximum": 2147483647,
            "description": (
                "Run the pods as this non-root UID with the restricted Pod Security Standard "
                "(no privilege escalation, all capabilities dropped, RuntimeDefault seccomp), as "
                "namespaces enforcing it require. Needs an image that runs as non-root on a port "
                ">= 1024, e.g. image nginxinc/nginx-unprivileged:1.27, port 8080, runAsUser 101."
            ),
        },
        "automountServiceAccountToken": {
            "type": "boolean",
            "default": False,
            "description": (
                "Mount a token of the namespace's default ServiceAccount into the pods (the pod "
                "field of the same name). Off by default: a web server needs no Kubernetes API "
                "credentials. Set it for an image that calls the API; true then overrides the "
                "ServiceAccount's own automountServiceAccountToken, as on a pod."
            ),
        },
        **CONFIGURATION_SCHEMA,
        **HEALTH_SCHEMA,
        "resources": {
            "type": "object",
            "description": (
                "CPU, memory and ephemeral-storage requests and limits of the web-server container; "
                "a request must not be above its limit."
            ),
            "properties": {"requests": _RESOURCE_LIST, "limits": _RESOURCE_LIST},
            "x-kubernetes-validations": [dict(r.cel) for r in (*QUANTITIES, *REQUESTS_WITHIN_LIMITS)],
        },
        "rollout": {
            "type": "object",
            "description": (
                "How a template change (image, port, resources, runAsUser, "
                "automountServiceAccountToken, configuration, health checks, restartedAt) "
                "replaces the pods, whether it may roll back by itself, and pausing it; "
                "like a Deployment's RollingUpdate. Unset fields default to 25% of replicas: "
                "maxSurge rounded up, maxUnavailable rounded down."
            ),
            "properties": {
                "paused": {
                    "type": "boolean",
                    "default": False,
                    "description": (
                        "While true, a template change creates no pod of the new template and "
                        "deletes no old pod (kubectl rollout pause); scaling waits too while old "
                        "pods run. Setting it back to false resumes and restarts the deadline."
                    ),
                },
                "autoRollback": {
                    "type": "boolean",
                    "default": False,
                    "description": (
                        "When a rollout exceeds progressDeadlineSeconds, go back to exactly the pod "
                        "template of the last revision in status.history that became Available "
                        "(condition Progressing reason RolledBack, a Warning Event). Once per spec "
                        "change: a rollback that misses the deadline is left for a human."
                    ),
                },
                "maxSurge": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_REPLICAS,
                    "description": "Pods allowed above replicas while old pods are replaced.",
                },
                "strategy": {
                    "type": "string",
                    "enum": ["RollingUpdate", "Canary"],
                    "default": "RollingUpdate",
                    "description": (
                        "RollingUpdate (maxSurge, maxUnavailable) or Canary: the new template gets "
                        "the share of the pods each canary step's weight asks for, the rest run the "
                        "last Available revision, all behind the one Service."
                    ),
                },
                "canary": {
                    "type": "object",
                    "description": (
                        "The steps of a Canary rollout, in order; after the last one every pod runs "
                        "the new template. A weight step is done when exactly that split of pods is "
                        "available: canary pods = replicas x weight / 100 rounded half up, at least 1 "
                        "above weight 0, at most replicas - 1 below 100 (status.canary shows it)."
                    ),
                    "properties": {
                        "steps": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_CANARY_STEPS,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "weight": {
                                        "type": "integer",
                                        "minimum": 0,
                                        "maximum": 100,
                                        "description": "Percent of the pods to run the new template.",
                                    },
                                    "pause": {
                                        "type": "object",
                                        "description": "Hold: for seconds, or without them until resumed.",
                                        "properties": {
                                            "seconds": {"type": "integer", "minimum": 1, "maximum": 86400},
                                        },
                                    },
                                },
                                "x-kubernetes-validations": [
                                    {"rule": "has(self.weight) != has(self.pause)", "message": STEP_ONE_OF}
                                ],
                            },
                        },
                        "analysis": {
                            "type": "object",
                            "description": (
                                "The operator's own analysis of each weight step: it sends GET path to "
                                "every canary and stable pod each intervalSeconds (timeoutSeconds each, "
                                "a new connection each) and, once the canary has samples requests, "
                                "lets the step end when the canary's success rate (2xx/3xx) is at "
                                "least minSuccessPercent and its p95 latency within maxP95Milliseconds "
                                "and maxP95OverStablePercent of the stable's (when set); else aborts: "
                                "back to the stable revision, Degraded with the figures."
                            ),
                            "properties": {
                                "path": {
                                    "type": "string",
                                    "default": "/",
                                    "maxLength": 1024,
                                    "pattern": "^/[!-~]*$",
                                },
                                "intervalSeconds": {
                                    "type": "integer",
                                    "minimum": 1,
                                    "maximum": 300,
                                    "default": 5,
                                },
                                "timeoutSeconds": {
                                    "type": "integer",
                                    "minimum": 1,
                                    "maximum": 60,
                                    "default": 2,
                                },
                                "samples": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 20},
                                "minSuccessPercent": {
                                    "type": "integer",
                                    "minimum": 0,
                                    "maximum": 100,
                                    "default": 99,
                                },
                                "maxP95Milliseconds": {"type": "integer", "minimum": 1, "maximum": 60000},
                                "maxP95OverStablePercent": {
                                    "type": "integer",
                                    "minimum": 100,
                                    "maximum": 100000,
                                },
                            },
                            "x-kubernetes-validations": [
                                {
                                    "rule": (
                                        "!has(self.timeoutSeconds) || !has(self.intervalSeconds) || "
                                        "self.timeoutSeconds <= self.intervalSeconds"
                                    ),
                                    "message": TIMEOUT_WITHIN_INTERVAL,
                                    "fieldPath": ".timeoutSeconds",
                                }
                            ],
                        },
                        "resume": {
                            "type": "object",
                            "description": (
                                "Releases the pause steps without seconds of one canary revision, up to "
                                "and including step (status.canary.revision and .step say which)."
                            ),
                            "properties": {
                                "revision": {"type": "integer", "minimum": 1},
                                "step": {"type": "integer", "minimum": 0},
                            },
                            "required": ["revision", "step"],
                        },
                    },
                },
                "rollbackTo": {
                    "type": "object",
                    "description": (
                        "Fast rollback: while set, every pod runs this revision's template as kept in "
                        "status.history, all created at once (no pause, no steps, no analysis; an old "
                        "pod goes once a new one is available), whatever the spec's template. "
                        "Clearing it rolls the spec's template out again. A revision not in the "
                        "history with its template is an error (Degraded), nothing moves."
                    ),
                    "properties": {
                        "revision": {
                            "type": "integer",
                            "minimum": 0,
                            "default": 0,
                            "description": (
                                "A revision of status.history; 0: the previous one, the last "
                                "Available revision other than the one running when it is set."
                            ),
                        },
                    },
                },
                "maxUnavailable": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_REPLICAS,
                    "description": (
                        "Ready pods allowed below replicas while old pods are replaced; 0 deletes an "
                        "old pod only once a new one is ready."
                    ),
                },
            },
            "x-kubernetes-validations": [
                {
                    "rule": (
                        "!has(self.maxSurge) || !has(self.maxUnavailable) || "
                        "self.maxSurge > 0 || self.maxUnavailable > 0"
                    ),
                    "message": (
                        "maxSurge and maxUnavailable must not both be 0: no old pod could be replaced"
                    ),
                },
                {
                    "rule": (
                        "!has(self.strategy) || self.strategy != 'Canary' || "
                        "(has(self.canary) && has(self.canary.steps))"
                    ),
                    "message": CANARY_NEEDS_STEPS,
                    "fieldPath": ".canary",
                },
                {
                    "rule": "!has(self.rollbackTo) || !has(self.paused) || !self.paused",
                    "message": ROLLBACK_NOT_PAUSED,
                    "fieldPath": ".rollbackTo",
                },
            ],
        },
        "disruptionBudget": {
            "type": "object",
            "default": {},
            "description": (
                "A PodDisruptionBudget named like the WebServer over its pods, maxUnavailable 1 "
                "(not-ready pods always evictable), kept only while replicas is at least 2: a single "
                "replica never blocks a node drain. Never touches a budget of that name it does not "
                "control (condition ReplicaFailure, PodDisruptionBudgetConflict)."
            ),
            "properties": {"enabled": {"type": "boolean", "default": True}},
        },
        "topologySpread": {
            "type": "object",
            "default": {},
            "description": (
                "Soft topology spread of the pods over nodes (kubernetes.io/hostname) and zones "
                "(topology.kubernetes.io/zone): the scheduler prefers, never refuses "
                "(whenUnsatisfiable ScheduleAnyway). Switching it off or on rolls the pods."
            ),
            "properties": {"enabled": {"type": "boolean", "default": True}},
        },
        "service": {
            "type": "object",
            "description": "A Service selecting the pods, created when enabled.",
            "properties": {
                "enabled": {"type": "boolean", "default": False},
                "type": {
                    "type": "string",
                    "enum": ["ClusterIP", "NodePort", "LoadBalancer"],
                    "default": "ClusterIP",
                },
                "port": {"type": "integer", "minimum": 1, "maximum": 65535, "default": 80},
                "nodePort": {"type": "integer", "minimum": 30000, "maximum": 32767},
            },
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.nodePort) || self.type != 'ClusterIP'",
                    "message": "nodePort requires service.type NodePort or LoadBalancer",
                    "fieldPath": ".nodePort",
                }
            ],
        },
    },
}

_FIGURES: dict[str, Any] = {
    "requests": {"type": "integer"},
    "successes": {"type": "integer"},
    "p95Milliseconds": {"type": "number"},
}

# status.history[].outcome (operators.webserver.rollout keeps them).
ROLLOUT_OUTCOMES = ("Progressing", "Available", "ProgressDeadlineExceeded", "RolledBack", "Superseded")

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer", "description": "Active pods controlled by this WebServer."},
        "readyReplicas": {"type": "integer"},
        "availableReplicas": {"type": "integer"},
        "updatedReplicas": {"type": "integer", "description": "Active pods with the current template."},
        "count": {"type": "integer", "description": "Same as replicas (kept from the original API)."},
        "observedGeneration": {"type": "integer"},
        "selector": {
            "type": "string",
            "description": "Label selector of the pods, for the scale subresource.",
        },
        "conditions": CONDITIONS_SCHEMA,
        "revision": {
            "type": "integer",
            "description": "Revision number of the template the pods are being moved to (or run).",
        },
        "lastRolloutOutcome": {
            "type": "string",
            "description": "Outcome of the current revision: " + ", ".join(ROLLOUT_OUTCOMES) + ".",
        },
        "history": {
            "type": "array",
            "maxItems": 10,
            "description": (
                "The last 10 revisions, oldest first (the last is the current one): template hash, "
                "the template fields that changed, when, the outcome, and the template's spec fields "
                "when at most 4 KiB (copy them back into spec to roll back by hand)."
            ),
            "items": {
                "type": "object",
                "properties": {
                    "revision": {"type": "integer"},
                    "templateHash": {"type": "string"},
                    "changed": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Template fields that differ from the revision before.",
                    },
                    "startedAt": {"type": "string", "format": "date-time"},
                    "finishedAt": {"type": "string", "format": "date-time"},
                    "outcome": {"type": "string", "enum": list(ROLLOUT_OUTCOMES)},
                    "rollbackOf": {
                        "type": "integer",
                        "description": "Set on an automatic rollback: the revision whose template it runs.",
                    },
                    "template": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "description": (
                            "The spec fields of this revision's pod template (configHash: the "
                            "referenced ConfigMaps' content)."
                        ),
                    },
                },
            },
        },
        "progress": {
            "type": "object",
            "description": "The current rollout's last progress (the deadline counts from at).",
            "properties": {
                "templateHash": {"type": "string"},
                "at": {"type": "string", "format": "date-time"},
                "available": {"type": "integer"},
                "old": {"type": "integer"},
                "paused": {"type": "boolean"},
            },
        },
        "canary": {
            "type": "object",
            "description": (
                "Set while a Canary rollout runs: its revision, the step (steps: how many), since "
                "when, the weight in force and the split it makes against the stable revision."
            ),
            "properties": {
                "revision": {"type": "integer"},
                "step": {"type": "integer"},
                "steps": {"type": "integer"},
                "stepStartedAt": {"type": "string", "format": "date-time"},
                "weight": {"type": "integer"},
                "canaryHash": {"type": "string"},
                "stableHash": {"type": "string"},
                "stableRevision": {"type": "integer"},
                "canaryPods": {"type": "integer"},
                "stablePods": {"type": "integer"},
                "analyzing": {
                    "type": "boolean",
                    "description": "The step's split is made and waits for the analysis to pass.",
                },
                "analysis": {
                    "type": "object",
                    "description": (
                        "The analysis of the step: requests, successes and p95 of the canary and "
                        "the stable pods, the verdict (Pending, Pass, Fail) and the figures said."
                    ),
                    "properties": {
                        "step": {"type": "integer"},
                        "canary": {"type": "object", "properties": _FIGURES},
                        "stable": {"type": "object", "properties": _FIGURES},
                        "verdict": {"type": "string", "enum": ["Pending", "Pass", "Fail"]},
                        "message": {"type": "string"},
                    },
                },
            },
        },
        "rollback": {
            "type": "object",
            "description": (
                "Set while an automatic rollback is in effect: the spec's template (fromHash) was "
                "given up for revision toRevision; cleared when the spec's template changes "
                "(fromSpecHash: its hash without the referenced ConfigMaps' content, which an edit "
                "of a ConfigMap leaves as it is)."
            ),
            "properties": {
                "fromHash": {"type": "string"},
                "fromSpecHash": {"type": "string"},
                "analysis": {
                    "type": "string",
                    "description": "Set when a canary analysis failed: its figures.",
                },
                "manual": {
                    "type": "boolean",
                    "description": "A fast rollback asked for by spec.rollout.rollbackTo.",
                },
                "requested": {
                    "type": "integer",
                    "description": "The rollbackTo revision asked for (0: the previous one).",
                },
                "toRevision": {"type": "integer"},
            },
        },
    },
}

CRD = CRDSpec(
    group=GROUP,
    version=VERSION,
    kind=KIND,
    plural=PLURAL,
    spec_schema=SPEC_SCHEMA,
    status_schema=STATUS_SCHEMA,
    short_names=("ws",),
    categories=("all", "k8s-operators-py"),
    printer_columns=(
        {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Current", "type": "integer", "jsonPath": ".status.replicas"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        {"name": "Revision", "type": "integer", "jsonPath": ".status.revision", "priority": 1},
        {"name": "Rollout", "type": "string", "jsonPath": ".status.lastRolloutOutcome", "priority": 1},
    ),
    scale={
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    },
    # *.k8s.io is a protected group: the API server rejects the CRD without this annotation.
    annotations={"api-approved.kubernetes.io": "unapproved, tutorial-compatible API group"},
    object_validations=name_rules(
        "has(self.spec.service) && has(self.spec.service.enabled) && self.spec.service.enabled"
    ),
)


def _deadline_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None and int(deadline) <= int(spec.get("minReadySeconds") or 0):
        return [FieldError("spec.progressDeadlineSeconds", DEADLINE_AFTER_MIN_READY)]
    return []


def _rollback_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    options = spec.get("rollout") or {}
    errors = [
        FieldError(f"spec.rollout.canary.steps[{i}]", STEP_ONE_OF)
        for i, step in enumerate((options.get("canary") or {}).get("steps") or ())
        if ("weight" in step) == ("pause" in step)
    ]
    check = (options.get("canary") or {}).get("analysis") or {}
    if int(check.get("timeoutSeconds", 2)) > int(check.get("intervalSeconds", 5)):
        errors.append(FieldError("spec.rollout.canary.analysis.timeoutSeconds", TIMEOUT_WITHIN_INTERVAL))
    if options.get("strategy") == "Canary" and not (options.get("canary") or {}).get("steps"):
        errors.append(FieldError("spec.rollout.canary", CANARY_NEEDS_STEPS))
    if options.get("rollbackTo") is not None and options.get("paused") is True:
        errors.append(FieldError("spec.rollout.rollbackTo", ROLLBACK_NOT_PAUSED))
    return errors


def _qualified(key: str) -> bool:
    return bool(re.match(QUALIFIED_NAME, key)) and ("/" not in key or key.index("/") <= 253)


def _reserved_label(key: str) -> bool:
    return key in RESERVED_LABELS or key.startswith(RESERVED_LABEL_PREFIXES)


def _one_of(item: Mapping[str, Any], first: str, second: str) -> bool:
    return (first in item) != (second in item)


def rule_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    """The spec's CEL rules of ``CONFIGURATION_SCHEMA``, checked in Python: what the API
    server enforces at admission, for objects that reached the controller without it (stored
    before the CRD had the rule, or the schema relaxed by hand). Called after the OpenAPI
    schema's own checks have passed, so types are as declared."""
    errors: list[FieldError] = []
    for i, env in enumerate(spec.get("env") or ()):
        where = f"spec.env[{i}]"
        if "value" in env and "valueFrom" in env:
            errors.append(FieldError(where, "an environment variable has a value or a valueFrom, not both"))
        source = env.get("valueFrom")
        if source is not None and not _one_of(source, "configMapKeyRef", "secretKeyRef"):
            errors.append(
                FieldError(
                    f"{where}.valueFrom", "valueFrom needs exactly one of configMapKeyRef and secretKeyRef"
                )
            )
    for i, ref in enumerate(spec.get("envFrom") or ()):
        if not _one_of(ref, "configMapRef", "secretRef"):
            errors.append(
                FieldError(
                    f"spec.envFrom[{i}]", "envFrom entries need exactly one of configMapRef and secretRef"
                )
            )
    return (
        errors
        + _volume_errors(spec)
        + _pod_metadata_errors(spec)
        + _deadline_errors(spec)
        + _rollback_errors(spec)
    )


def _volume_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    volumes = spec.get("volumes") or ()
    for i, volume in enumerate(volumes):
        if not _one_of(volume, "configMap", "secret"):
            errors.append(
                FieldError(f"spec.volumes[{i}]", "a volume needs exactly one of configMap and secret")
            )
        if str(volume.get("name", "")).startswith("kube-api-access-"):
            errors.append(
                FieldError(
                    f"spec.volumes[{i}].name", "volume names starting kube-api-access- are the API token's"
                )
            )
    paths = [v.get("mountPath") for v in volumes]
    if len(set(paths)) != len(paths):
        errors.append(FieldError("spec.volumes", "volumes must have different mountPaths"))
    return errors


def _pod_metadata_errors(spec: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    meta = spec.get("podMetadata") or {}
    for part in ("labels", "annotations"):
        keys = list((meta.get(part) or {}).keys())
        if not all(_qualified(k) for k in keys):
            errors.append(FieldError(f"spec.podMetadata.{part}", QUALIFIED_NAME_MESSAGE))
    if any(_reserved_label(k) for k in (meta.get("labels") or {})):
        errors.append(FieldError("spec.podMetadata.labels", RESERVED_LABELS_MESSAGE))
    if RESTARTED_AT in (meta.get("annotations") or {}):
        errors.append(
            FieldError("spec.podMetadata.annotations", f"{RESTARTED_AT} is set from spec.restartedAt")
        )
    return errors
