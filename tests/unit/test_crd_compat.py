"""The CRD compatibility check: the repo passes it, and every forbidden change is caught."""

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.api.crd import create_only_rule
from tools.check import crd_compat

REPO = Path(__file__).resolve().parents[2]
RELEASED = yaml.safe_load((REPO / "api-history" / "0.1.0" / "demo.k8s.io_webservers.yaml").read_text())
NAME = "webservers.demo.k8s.io"


def spec(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def mutated(change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    new = copy.deepcopy(RELEASED)
    change(new)
    return new


def test_the_generated_crds_are_compatible_with_every_release():
    assert crd_compat.check() == []
    assert {p.name for p in (REPO / "api-history").iterdir() if p.is_dir()} >= {"0.1.0"}


def test_a_crd_no_longer_generated_is_a_finding(tmp_path):
    (tmp_path / "current").mkdir()
    assert crd_compat.check(REPO / "api-history", tmp_path / "current") == [
        f"0.1.0: {n} released but no longer generated"
        for n in ("netperfs.app.example.com", "webservers.demo.k8s.io", "tdsets.schedule.rs")
    ]


FORBIDDEN = {
    "field removed": (lambda c: spec(c)["properties"].pop("port"), "v1alpha1 .spec.port: removed"),
    "type changed": (
        lambda c: spec(c)["properties"]["port"].update(type="string"),
        ".spec.port: type changed",
    ),
    "newly required": (lambda c: spec(c)["required"].append("image"), ".spec: newly required ['image']"),
    "maximum lowered": (
        lambda c: spec(c)["properties"]["replicas"].update(maximum=50),
        ".spec.replicas: maximum lowered 1000 -> 50",
    ),
    "minimum raised": (
        lambda c: spec(c)["properties"]["replicas"].update(minimum=1),
        ".spec.replicas: minimum raised 0 -> 1",
    ),
    "maxLength added": (
        lambda c: spec(c)["properties"]["resources"].update(maxProperties=1),
        ".spec.resources: maxProperties lowered None -> 1",
    ),
    "pattern changed": (
        lambda c: spec(c)["properties"]["image"].update(pattern="^[a-z]+$"),
        ".spec.image: pattern changed",
    ),
    "pattern added": (
        lambda c: spec(c)["properties"]["runAsUser"].update(pattern="^1$"),
        ".spec.runAsUser: pattern added",
    ),
    "enum added": (
        lambda c: spec(c)["properties"]["image"].update(enum=["nginx"]),
        ".spec.image: enum added ['nginx']",
    ),
    "CEL rule on an existing field": (
        lambda c: spec(c)["properties"]["port"].update(
            {"x-kubernetes-validations": [{"rule": "self != 22"}]}
        ),
        ".spec.port: CEL rules added on an existing field ['self != 22']",
    ),
    "nested field removed": (
        lambda c: spec(c)["properties"]["resources"]["properties"].pop("limits"),
        ".spec.resources.limits: removed",
    ),
    "additionalProperties tightened": (
        lambda c: spec(c)["properties"]["resources"]["properties"]["requests"]["additionalProperties"].update(
            pattern="^[0-9]+$"
        ),
        ".spec.resources.requests.*: pattern changed",
    ),
    "version no longer served": (lambda c: c["spec"]["versions"][0].update(served=False), "no longer served"),
    "version removed": (lambda c: c["spec"]["versions"][0].update(name="v1"), "v1alpha1: version removed"),
    "storage moved": (
        lambda c: c["spec"]["versions"][0].update(storage=False),
        "no longer the storage version",
    ),
    "scope changed": (lambda c: c["spec"].update(scope="Cluster"), "scope changed 'Namespaced' -> 'Cluster'"),
    "kind renamed": (lambda c: c["spec"]["names"].update(kind="Web"), "names.kind changed"),
}


@pytest.mark.parametrize("change", sorted(FORBIDDEN))
def test_a_forbidden_change_is_found(change):
    mutate, expected = FORBIDDEN[change]
    found = crd_compat.problems(RELEASED, mutated(mutate))
    assert any(f.startswith(NAME) and expected in f for f in found), found


ALLOWED = {
    "new optional field": lambda c: spec(c)["properties"].update(
        {
            "tls": {
                "type": "boolean",
                "default": False,
                "x-kubernetes-validations": [{"rule": "self || !self"}],
            }
        }
    ),
    "maximum relaxed": lambda c: spec(c)["properties"]["replicas"].update(maximum=5000),
    "minimum relaxed": lambda c: spec(c)["properties"]["port"].update(minimum=0),
    "description changed": lambda c: spec(c).update(description="something else"),
    "enum widened": lambda c: spec(c)["properties"]["service"]["properties"]["type"]["enum"].append(
        "ExternalName"
    ),
    "required relaxed": lambda c: spec(c)["required"].clear(),
}


@pytest.mark.parametrize("change", sorted(ALLOWED))
def test_an_allowed_change_is_not_a_finding(change):
    assert crd_compat.problems(RELEASED, mutated(ALLOWED[change])) == []


def test_a_removed_cel_rule_is_allowed():
    crds = [yaml.safe_load(p.read_text()) for p in (REPO / "api-history" / "0.1.0").glob("*.yaml")]
    with_rules = [c for c in crds if "x-kubernetes-validations" in yaml.safe_dump(c)]
    assert with_rules, "no released CRD has a CEL rule to remove"

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            node.pop("x-kubernetes-validations", None)
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    for crd in with_rules:
        relaxed = copy.deepcopy(crd)
        strip(relaxed)
        assert crd_compat.problems(crd, relaxed) == []
        assert crd_compat.problems(relaxed, crd) != []  # and adding them back is a tightening


def test_a_create_only_rule_on_the_whole_object_breaks_no_upgrade():
    def add(rule: dict[str, Any]) -> Callable[[dict[str, Any]], object]:
        return lambda crd: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].update(
            {"x-kubernetes-validations": [rule]}
        )

    create_only = create_only_rule("self.metadata.name.size() <= 63", "too long")
    assert crd_compat.problems(RELEASED, mutated(add(create_only))) == []
    plain = {"rule": "self.metadata.name.size() <= 63", "message": "too long"}
    (problem,) = crd_compat.problems(RELEASED, mutated(add(plain)))
    assert "CEL rules added" in problem


def test_a_ratcheting_rule_on_an_existing_field_breaks_no_upgrade():
    """A stored object keeps every update that leaves the field alone; a plain rule does not."""
    from shared.api.crd import ratcheting_rule

    def add(rule: dict[str, Any]) -> Callable[[dict[str, Any]], object]:
        return lambda crd: spec(crd)["properties"]["replicas"].update({"x-kubernetes-validations": [rule]})

    assert crd_compat.problems(RELEASED, mutated(add(ratcheting_rule("self % 2 == 0", "even")))) == []
    (problem,) = crd_compat.problems(RELEASED, mutated(add({"rule": "self % 2 == 0", "message": "even"})))
    assert "CEL rules added" in problem
