import datetime

import pytest

from shared.api import validation
from shared.api.validation import FieldError, SchemaValidator, degraded, openapi_schema

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
    """The controller's half of the create-only CEL name rules."""
    assert validation.name_errors("a" * 63, service=True) == []
    (too_long,) = validation.name_errors("a" * 64, service=False)
    assert too_long.path == "metadata.name" and "at most 63" in too_long.message
    assert validation.name_errors("web.v2", service=False) == []  # pods and labels allow dots
    (dotted,) = validation.name_errors("web.v2", service=True)
    assert "must not contain '.'" in dotted.message


def test_name_rules_only_apply_on_create():
    rules = validation.name_rules("has(self.spec.service)")
    assert len(rules) == 3
    assert all(r["optionalOldSelf"] and r["rule"].startswith("oldSelf.hasValue() || (") for r in rules)
    assert len(validation.name_rules()) == 1  # no Service: dots are fine


def test_a_digit_first_name_cannot_carry_a_service():
    """Service names are DNS-1035 labels; pods and Deployments take such names."""
    assert validation.name_errors("1web", service=False) == []
    (digit,) = validation.name_errors("1web", service=True)
    assert digit.path == "metadata.name" and "must start with a letter" in digit.message


def webserver_errors(resources):
    from operators.webserver.schema import CRD

    return [
        str(e) for e in SchemaValidator(CRD.openapi_schema()).errors({"replicas": 1, "resources": resources})
    ]


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"requests": {"cpu": "1E.5"}}, "spec.resources.requests.cpu: must be a non-negative quantity"),
        ({"limits": {"memory": -1}}, "spec.resources.limits.memory: must be a non-negative quantity"),
        ({"limits": {"cpu": "1e2147483648"}}, "spec.resources.limits.cpu: must be a non-negative quantity"),
        (
            {"requests": {"gpu": "1"}},
            "spec.resources.requests: may only name cpu, memory, ephemeral-storage, not 'gpu'",
        ),
        (
            {"limits": {"": "1"}},
            "spec.resources.limits: may only name cpu, memory, ephemeral-storage, not ''",
        ),
        (
            {"requests": {"memory": "1Gi"}, "limits": {"memory": "1000Mi"}},
            "spec.resources.requests.memory: must not be above the memory limit",
        ),
    ],
)
def test_the_controller_runs_the_cel_rules_twins(resources, expected):
    """Jsonschema runs no CEL; the rules built in shared.api.validation carry a Python twin the
    SchemaValidator runs where the schema uses them, so stored objects that predate the rules
    are reported as Degraded with the same field."""
    errors = webserver_errors(resources)
    assert any(e.startswith(expected) for e in errors), errors


def test_resources_a_pod_accepts_have_no_errors():
    resources = {
        "requests": {"cpu": "250m", "memory": 2**26, "ephemeral-storage": "1e3"},
        "limits": {"cpu": "0.25", "memory": "64Mi", "ephemeral-storage": "1k"},
    }
    assert webserver_errors(resources) == []


def test_node_names_and_images_are_checked_like_a_pod_does():
    from operators.netperf.schema import CRD

    errors = SchemaValidator(CRD.openapi_schema()).errors({"serverNode": "a..b", "image": "netperf\u000b"})
    assert "spec.image: must not start or end with whitespace" in [str(e) for e in errors]
    assert "spec.serverNode: must be a node name" in " ".join(str(e) for e in errors)
    assert SchemaValidator(CRD.openapi_schema()).errors({"serverNode": "worker-1.example.com"}) == []
