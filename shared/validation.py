"""Validate a custom resource against its CRD's own OpenAPI v3 schema, with jsonschema.

The API server already enforces the schema (and CEL rules) at admission, but objects written
before a CRD upgrade, or with a schema relaxed by hand, still reach the controller. Checking
the very same schema here (one source, never a hand-written copy) lets the controller report
the field path in a ``Degraded`` condition instead of crashing or guessing.

The CRD dialect differs from JSON Schema in a few keywords, translated here:
``nullable: true`` (null allowed), ``x-kubernetes-int-or-string`` (integer or string).
OpenAPI 3.0 uses boolean ``exclusiveMinimum``/``exclusiveMaximum``, as JSON Schema draft 4 does,
so draft 4 is the matching validator. CEL rules (``x-kubernetes-validations``) are enforced by
the API server only.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from shared import conditions
from shared.crd import create_only_rule


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def _translate(node: Any) -> Any:
    if isinstance(node, list):
        return [_translate(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _translate(v) for k, v in node.items()}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def openapi_schema(crd: Mapping[str, Any], version: str | None = None) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of ``version`` (default: the storage version) of a CRD."""
    versions = crd["spec"]["versions"]
    chosen = next(
        (v for v in versions if (v["name"] == version if version else v.get("storage"))),
        None,
    )
    if chosen is None:
        raise KeyError(f"CRD {crd['metadata']['name']} has no version {version or '(storage)'}")
    return copy.deepcopy(chosen["schema"]["openAPIV3Schema"])


def _path(root: str, parts: Iterable[Any]) -> str:
    out = root
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


class SchemaValidator:
    """Validates one part of an object (``spec`` by default) against a CRD schema."""

    def __init__(self, object_schema: Mapping[str, Any], field: str = "spec") -> None:
        self.field = field
        schema = _translate(dict(object_schema))
        sub = schema.get("properties", {}).get(field)
        if sub is None:
            raise KeyError(f"schema has no property {field!r}")
        jsonschema.Draft4Validator.check_schema(sub)
        self._validator = jsonschema.Draft4Validator(sub)

    @classmethod
    def from_crd(
        cls, crd: Mapping[str, Any], version: str | None = None, field: str = "spec"
    ) -> SchemaValidator:
        return cls(openapi_schema(crd, version), field)

    def errors(self, value: Any) -> list[FieldError]:
        """All violations, sorted by field path; empty when ``value`` is valid."""
        found = [
            FieldError(_path(self.field, err.absolute_path), err.message)
            for err in self._validator.iter_errors(value if value is not None else {})
        ]
        return sorted(set(found), key=lambda e: (e.path, e.message))


MAX_NAME_LENGTH = 63
NAME_TOO_LONG = (
    "must be at most 63 characters: it is the app.kubernetes.io/instance label value of every "
    "child, and label values are limited to 63"
)
NAME_DOTTED = "must not contain '.' when a Service is requested: a Service name is a DNS label"


def name_errors(name: str, *, service: bool) -> list[FieldError]:
    """What the CRD's create-only name rules (:func:`name_rules`) reject, for objects stored
    before those rules existed: the controller reports them as Degraded instead of retrying
    children the API server can only refuse."""
    found = []
    if len(name) > MAX_NAME_LENGTH:
        found.append(FieldError("metadata.name", NAME_TOO_LONG))
    if service and "." in name:
        found.append(FieldError("metadata.name", NAME_DOTTED))
    return found


def name_rules(service_requested: str | None = None) -> list[dict[str, Any]]:
    """The same checks as CEL at admission; ``service_requested`` is the CEL condition under
    which the object asks for a Service (None: it never does)."""
    rules = [
        create_only_rule(f"self.metadata.name.size() <= {MAX_NAME_LENGTH}", f"metadata.name {NAME_TOO_LONG}")
    ]
    if service_requested:
        rules.append(
            create_only_rule(
                f"!({service_requested}) || !self.metadata.name.contains('.')", f"metadata.name {NAME_DOTTED}"
            )
        )
    return rules


def degraded(errors: list[FieldError], *, generation: int, now: datetime.datetime) -> conditions.Condition:
    """The ``Degraded`` condition for a validation result (True with the paths when invalid)."""
    if errors:
        return conditions.make(
            conditions.DEGRADED,
            True,
            "InvalidSpec",
            "; ".join(str(e) for e in errors),
            generation=generation,
            now=now,
        )
    return conditions.make(
        conditions.DEGRADED, False, "SpecValid", "spec matches the schema", generation=generation, now=now
    )
