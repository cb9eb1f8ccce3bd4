"""Build CustomResourceDefinition manifests from an operator's schema module.

Each operator keeps its API in one Python module (``operators/<op>/schema.py``): the
OpenAPI schema of ``spec`` and ``status``, printer columns, subresources. From it,
``make manifests`` writes the CRD YAML into ``bundle/manifests/`` and the controller validates
specs with the same schema (``shared.api.validation``), so the two can never drift.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

# ``status.conditions`` as metav1.Condition, a list-map keyed by type (so server-side apply and
# kubectl treat entries as a map).
CONDITIONS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["type", "status", "lastTransitionTime", "reason", "message"],
        "properties": {
            "type": {"type": "string", "maxLength": 316},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "observedGeneration": {"type": "integer", "minimum": 0},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string", "maxLength": 1024, "minLength": 1},
            "message": {"type": "string", "maxLength": 32768},
        },
    },
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
}


def create_only_rule(rule: str, message: str) -> dict[str, Any]:
    """A CEL rule checked when an object is created, never on its updates.

    For what cannot change after creation (the name): a stored object that predates the rule
    keeps accepting status and spec updates, so adding such a rule breaks no upgrade
    (``tools.check.crd_compat`` accepts it). Needs Kubernetes >= 1.30 (``optionalOldSelf``).
    """
    return {"rule": f"oldSelf.hasValue() || ({rule})", "optionalOldSelf": True, "message": message}


RATCHET_PREFIX = "(oldSelf.hasValue() && oldSelf.value() == self) || "


def ratcheting_rule(rule: str, message: str, **extra: str) -> dict[str, Any]:
    """A CEL rule checked when a field is set or changed, never while it keeps its value.

    For tightening the validation of an existing field: a stored object that predates the rule
    keeps accepting every update that leaves the field as it is (the API server's own
    validation ratcheting, spelled out so it holds whatever its feature gate), while a new or
    changed value must pass. ``tools.check.crd_compat`` accepts it. ``extra``: ``messageExpression``,
    ``fieldPath``, ``reason``.
    """
    return {"rule": f"{RATCHET_PREFIX}({rule})", "optionalOldSelf": True, "message": message, **extra}


@dataclass(frozen=True)
class CRDSpec:
    group: str
    version: str
    kind: str
    plural: str
    spec_schema: Mapping[str, Any]
    status_schema: Mapping[str, Any]
    short_names: Sequence[str] = ()
    categories: Sequence[str] = ()
    printer_columns: Sequence[Mapping[str, Any]] = ()
    scale: Mapping[str, str] | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    spec_validations: Sequence[Mapping[str, str]] = ()
    # Rules on the whole object (``self.metadata.name`` is only visible there).
    object_validations: Sequence[Mapping[str, Any]] = ()

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    def openapi_schema(self) -> dict[str, Any]:
        spec = dict(self.spec_schema)
        if self.spec_validations:
            spec["x-kubernetes-validations"] = [dict(v) for v in self.spec_validations]
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": spec,
                "status": dict(self.status_schema),
            },
            "required": ["spec"],
        }
        if self.object_validations:
            schema["x-kubernetes-validations"] = [dict(v) for v in self.object_validations]
        return schema

    def manifest(self) -> dict[str, Any]:
        subresources: dict[str, Any] = {"status": {}}
        if self.scale:
            subresources["scale"] = dict(self.scale)
        names: dict[str, Any] = {
            "kind": self.kind,
            "listKind": f"{self.kind}List",
            "plural": self.plural,
            "singular": self.singular,
        }
        if self.short_names:
            names["shortNames"] = list(self.short_names)
        if self.categories:
            names["categories"] = list(self.categories)
        metadata: dict[str, Any] = {"name": self.name}
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        version: dict[str, Any] = {
            "name": self.version,
            "served": True,
            "storage": True,
            "schema": {"openAPIV3Schema": self.openapi_schema()},
            "subresources": subresources,
        }
        if self.printer_columns:
            version["additionalPrinterColumns"] = [dict(c) for c in self.printer_columns]
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": metadata,
            "spec": {"group": self.group, "scope": "Namespaced", "names": names, "versions": [version]},
        }


GENERATED = "# Generated by `make manifests` from the operator's schema.py. Do not edit.\n"


def to_yaml(manifest: Mapping[str, Any], header: str = GENERATED) -> str:
    return header + yaml.safe_dump(dict(manifest), sort_keys=False, width=100)
