import datetime

import pytest

from shared import validation
from shared.validation import FieldError, SchemaValidator, degraded, openapi_schema

CRD = {
    "metadata": {"name": "things.example.com"},
    "spec": {
        "versions": [
            {"name": "v1alpha1", "storage": False, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {
                "name": "v1",
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["replicas"],
                                "properties": {
                                    "replicas": {"type": "integer", "minimum": 0},
                                    "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                                    "port": {"x-kubernetes-int-or-string": True},
                                    "image": {"type": "string", "nullable": True},
                                    "windows": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {"start": {"type": "integer", "maximum": 23}},
                                        },
                                    },
                                },
                            }
                        },
                    }
                },
            },
        ]
    },
}


@pytest.fixture
def validator():
    return SchemaValidator.from_crd(CRD)


def test_valid_spec_has_no_errors(validator):
    spec = {"replicas": 0, "ratio": 0.5, "port": "http", "image": None, "windows": [{"start": 23}]}
    assert validator.errors(spec) == []
    assert validator.errors({"replicas": 2, "port": 8080, "unknownFieldsArePruned": 1}) == []


def test_errors_carry_field_paths(validator):
    errors = validator.errors({"replicas": -1, "windows": [{"start": 5}, {"start": 24}]})
    assert [e.path for e in errors] == ["spec.replicas", "spec.windows[1].start"]
    assert "minimum of 0" in errors[0].message
    assert str(errors[1]).startswith("spec.windows[1].start: 24 is greater than the maximum of 23")


def test_missing_required_and_wrong_types(validator):
    errors = validator.errors({"port": 1.5, "ratio": 0})
    paths = {e.path for e in errors}
    assert paths == {"spec", "spec.port", "spec.ratio"}
    assert any("'replicas' is a required property" in e.message for e in errors)


def test_none_spec_is_checked_as_empty(validator):
    assert [e.path for e in validator.errors(None)] == ["spec"]


def test_explicit_version_and_missing_version():
    assert openapi_schema(CRD, "v1alpha1") == {"type": "object"}
    with pytest.raises(KeyError):
        openapi_schema(CRD, "v2")
    with pytest.raises(KeyError):
        SchemaValidator({"type": "object", "properties": {}})


def test_degraded_condition_reports_paths():
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    bad = degraded([FieldError("spec.replicas", "is negative")], generation=3, now=now)
    assert bad["status"] == "True" and bad["reason"] == "InvalidSpec"
    assert bad["message"] == "spec.replicas: is negative"
    assert bad["observedGeneration"] == 3
    good = degraded([], generation=3, now=now)
    assert good["status"] == "False"


def test_names_children_cannot_carry_are_errors_at_metadata_name():
    """#15.8: the controller's half of the create-only CEL name rules."""
    assert validation.name_errors("a" * 63, service=True) == []
    (too_long,) = validation.name_errors("a" * 64, service=False)
    assert too_long.path == "metadata.name" and "at most 63" in too_long.message
    assert validation.name_errors("web.v2", service=False) == []  # pods and labels allow dots
    (dotted,) = validation.name_errors("web.v2", service=True)
    assert "must not contain '.'" in dotted.message


def test_name_rules_only_apply_on_create():
    rules = validation.name_rules("has(self.spec.service)")
    assert len(rules) == 2
    assert all(r["optionalOldSelf"] and r["rule"].startswith("oldSelf.hasValue() || (") for r in rules)
    assert len(validation.name_rules()) == 1  # no Service: dots are fine
