"""Validate a custom resource against its CRD's own OpenAPI v3 schema, with jsonschema.

The API server already enforces the schema (and CEL rules) at admission, but objects written
before a CRD upgrade, or with a schema relaxed by hand, still reach the controller. Checking
the very same schema here (one source, never a hand-written copy) lets the controller report
the field path in a ``Degraded`` condition instead of crashing or guessing.

The CRD dialect differs from JSON Schema in a few keywords, translated here:
``nullable: true`` (null allowed), ``x-kubernetes-int-or-string`` (integer or string).
OpenAPI 3.0 uses boolean ``exclusiveMinimum``/``exclusiveMaximum``, as JSON Schema draft 4 does,
so draft 4 is the matching validator. CEL rules (``x-kubernetes-validations``) cannot run here;
the ones built by this module (``RULES``: quantities, resource names, node names, images)
carry a Python twin that ``SchemaValidator`` runs in their place, wherever the schema
uses them. Other CEL rules are enforced by the API server only.
"""

from __future__ import annotations

import copy
import datetime
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
from jsonschema.protocols import Validator

from shared.api import conditions, quantity
from shared.api.crd import create_only_rule, ratcheting_rule


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


# (path relative to the value the rule is on, message) for each violation.
Violations = Iterator[tuple[tuple[str, ...], str]]


@dataclass(frozen=True)
class Rule:
    """A CEL rule for ``x-kubernetes-validations`` and the same check in Python."""

    cel: Mapping[str, Any]
    check: Callable[[Any], Violations]


_TWIN = "x-python-rules"  # the keyword _translate puts known CEL rules under


def _translate(node: Any) -> Any:
    if isinstance(node, list):
        return [_translate(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _translate(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    twins = [r["rule"] for r in node.get("x-kubernetes-validations", []) if r["rule"] in _TWINS]
    if twins:
        out[_TWIN] = twins
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


def _run_twins(
    validator: Any, rules: list[str], instance: Any, schema: Any
) -> Iterator[jsonschema.ValidationError]:
    for rule in rules:
        for path, message in _TWINS[rule](instance):
            yield jsonschema.ValidationError(message, path=path)


# extend() is unannotated in types-jsonschema; what it returns is a validator class.
_Validator: type[Validator] = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft4Validator, {_TWIN: _run_twins}
)


class SchemaValidator:
    """Validates one part of an object (``spec`` by default) against a CRD schema."""

    def __init__(self, object_schema: Mapping[str, Any], field: str = "spec") -> None:
        self.field = field
        schema = _translate(dict(object_schema))
        sub = schema.get("properties", {}).get(field)
        if sub is None:
            raise KeyError(f"schema has no property {field!r}")
        jsonschema.Draft4Validator.check_schema(sub)
        self._validator = _Validator(sub)

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
NAME_DIGIT = "must start with a letter when a Service is requested: a Service name is a DNS-1035 label"


def name_errors(name: str, *, service: bool) -> list[FieldError]:
    """What the CRD's create-only name rules (``name_rules``) reject, for objects stored
    before those rules existed: the controller reports them as Degraded instead of retrying
    children the API server can only refuse."""
    found = []
    if len(name) > MAX_NAME_LENGTH:
        found.append(FieldError("metadata.name", NAME_TOO_LONG))
    if service and "." in name:
        found.append(FieldError("metadata.name", NAME_DOTTED))
    if service and not name[:1].isalpha():
        found.append(FieldError("metadata.name", NAME_DIGIT))
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
        rules.append(
            create_only_rule(
                f"!({service_requested}) || self.metadata.name.matches('^[a-z]')",
                f"metadata.name {NAME_DIGIT}",
            )
        )
    return rules


# What a container's resources may name: the standard ones a pod accepts with any value
# (hugepages-* need equal requests and limits in multiples of the page size plus cpu or memory,
# extended resources integers: not what a web server asks for).
RESOURCE_NAMES = ("cpu", "memory", "ephemeral-storage")
_RESOURCE_LIST_CEL = "[" + ", ".join(f"'{n}'" for n in RESOURCE_NAMES) + "]"
QUANTITY_MESSAGE = "must be a non-negative quantity such as 250m, 0.5, 64Mi or 1e3 (exponent below 1000)"
# The API server's parser runs for minutes on some exponents (1e2147483648): never hand it one.
_LONG_EXPONENT = "[eE][+-]?[0-9]{4,}$"


def _valid_quantity(value: Any) -> bool:
    try:
        return not re.search(_LONG_EXPONENT, str(value)) and quantity.parse(value) >= 0
    except quantity.QuantityError:
        return False


def _quantity_violations(value: Any) -> Violations:
    if not _valid_quantity(value):
        yield (), QUANTITY_MESSAGE


def _valid_quantity_cel(value: str) -> str:
    return (
        f"!{value}.matches('{_LONG_EXPONENT}') && isQuantity({value}) && "
        f"!quantity({value}).isLessThan(quantity('0'))"
    )


def _valid_value(field: str, name: str) -> Rule:
    """``<field>[name]`` is a valid quantity, checked from ``resources``: on the map value itself
    the static cost estimate of these unbounded strings is beyond the CEL budget."""

    def violations(resources: Any) -> Violations:
        values = resources.get(field) if isinstance(resources, dict) else None
        if isinstance(values, dict) and name in values and not _valid_quantity(values[name]):
            yield (field, name), QUANTITY_MESSAGE

    value = f"self.{field}['{name}']"
    rule = (
        f"!has(self.{field}) || !('{name}' in self.{field}) || "
        f"(type({value}) == int ? {value} >= 0 : {_valid_quantity_cel(f'string({value})')})"
    )
    return Rule(ratcheting_rule(rule, QUANTITY_MESSAGE, fieldPath=f".{field}['{name}']"), violations)


QUANTITIES = tuple(_valid_value(field, name) for field in ("requests", "limits") for name in RESOURCE_NAMES)
RESOURCE_NAMES_MESSAGE = f"may only name {', '.join(RESOURCE_NAMES)}"


def _resource_name_violations(value: Any) -> Violations:
    unknown = [k for k in value if k not in RESOURCE_NAMES] if isinstance(value, dict) else []
    if unknown:
        yield (), f"{RESOURCE_NAMES_MESSAGE}, not " + ", ".join(f"'{k}'" for k in unknown)


RESOURCE_NAMES_RULE = Rule(
    ratcheting_rule(f"self.all(k, k in {_RESOURCE_LIST_CEL})", RESOURCE_NAMES_MESSAGE),
    _resource_name_violations,
)


def _within_limit(name: str) -> Rule:
    """requests[name] <= limits[name] when both are set and valid (else another rule reports)."""
    message = f"must not be above the {name} limit"

    def violations(resources: Any) -> Violations:
        requests, limits = (
            resources.get(k) if isinstance(resources, dict) else None for k in ("requests", "limits")
        )
        if isinstance(requests, dict) and isinstance(limits, dict) and name in requests and name in limits:
            request, limit = requests[name], limits[name]
            if (
                _valid_quantity(request)
                and _valid_quantity(limit)
                and quantity.parse(request) > quantity.parse(limit)
            ):
                yield ("requests", name), message

    request, limit = f"string(self.requests['{name}'])", f"string(self.limits['{name}'])"
    rule = (
        f"!has(self.requests) || !has(self.limits) || !('{name}' in self.requests) || "
        f"!('{name}' in self.limits) || !({_valid_quantity_cel(request)}) || "
        f"!({_valid_quantity_cel(limit)}) || !quantity({request}).isGreaterThan(quantity({limit}))"
    )
    return Rule(ratcheting_rule(rule, message, fieldPath=f".requests['{name}']"), violations)


REQUESTS_WITHIN_LIMITS = tuple(_within_limit(name) for name in RESOURCE_NAMES)

# IsDNS1123Subdomain, what a pod's node affinity on metadata.name requires.
_NODE_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NODE_NAME_MESSAGE = "must be a node name: DNS labels joined by single dots, e.g. worker-1.example.com"


def _node_name_violations(value: Any) -> Violations:
    if isinstance(value, str) and not re.fullmatch(_NODE_NAME, value):
        yield (), NODE_NAME_MESSAGE


NODE_NAME = Rule(ratcheting_rule(f"self.matches('{_NODE_NAME}')", NODE_NAME_MESSAGE), _node_name_violations)

# Go's unicode.IsSpace, what a pod's image must not start or end with (the CRD pattern's \s is
# RE2's, without \v, NEL, NBSP and the other Unicode spaces).
_SPACES = (
    "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)
IMAGE_MESSAGE = "must not start or end with whitespace"


def _image_violations(value: Any) -> Violations:
    if isinstance(value, str) and value.strip(_SPACES) != value:
        yield (), IMAGE_MESSAGE


IMAGE = Rule(ratcheting_rule("self.trim() == self", IMAGE_MESSAGE), _image_violations)

RULES = (*QUANTITIES, RESOURCE_NAMES_RULE, *REQUESTS_WITHIN_LIMITS, NODE_NAME, IMAGE)
_TWINS: dict[str, Callable[[Any], Violations]] = {r.cel["rule"]: r.check for r in RULES}


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
