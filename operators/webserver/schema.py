"""The WebServer API (``demo.k8s.io/v1alpha1``): the one source of its CRD and validation.

Compatible with the original tutorial operator: ``spec: {replicas: 5}`` keeps working, and
``status.count`` still reports the number of pods. Everything else is optional with defaults
applied by the API server.
"""

from __future__ import annotations

from typing import Any

from shared.api.crd import CONDITIONS_SCHEMA, CRDSpec
from shared.api.validation import IMAGE, QUANTITIES, REQUESTS_WITHIN_LIMITS, RESOURCE_NAMES_RULE, name_rules

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

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Desired state of a group of identical web-server pods.",
    "required": ["replicas"],
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
                "automountServiceAccountToken) replaces the pods, "
                "like a Deployment's RollingUpdate. Unset fields default to 25% of replicas: "
                "maxSurge rounded up, maxUnavailable rounded down."
            ),
            "properties": {
                "maxSurge": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": MAX_REPLICAS,
                    "description": "Pods allowed above replicas while old pods are replaced.",
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
                }
            ],
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
