"""The admission policies cover every spec field that makes an operator act for its author
(walked from the CRD schemas, so a new field naming a Secret or ConfigMap fails here until it is
checked), and their CEL is what the integration tests run (tests/integration/test_access.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from operators import description
from operators.netperf import access as netperf_access
from operators.tdset import access as tdset_access
from operators.webserver import access as webserver_access
from shared.api import access

REFERENCE_KEYS = {
    "secret": "Secret",
    "secretKeyRef": "Secret",
    "secretRef": "Secret",
    "configMap": "ConfigMap",
    "configMapKeyRef": "ConfigMap",
    "configMapRef": "ConfigMap",
}


def _walk(schema: Mapping[str, Any], path: str) -> Iterator[tuple[str, str]]:
    """(path, key) of every property of ``schema`` whose key names a Secret or a ConfigMap."""
    for key, prop in (schema.get("properties") or {}).items():
        here = f"{path}.{key}"
        if key in REFERENCE_KEYS:
            yield here, key
        yield from _walk(prop, here)
    if "items" in schema:
        yield from _walk(schema["items"], f"{path}[]")


def _fields(policies: tuple[access.AccessPolicy, ...], kind: str) -> set[str]:
    out = set()
    for policy in policies:
        if policy.references and policy.references.kind == kind:
            out |= {s.field for s in policy.references.sources}
        out |= {r.field for r in policy.rights if kind.lower() in r.resource}
    return out


def test_every_webserver_field_naming_a_secret_or_configmap_is_checked():
    found = list(_walk(description("webserver").crd.spec_schema, "spec"))
    assert found
    for kind in ("Secret", "ConfigMap"):
        want = {path for path, key in found if REFERENCE_KEYS[key] == kind}
        assert _fields(webserver_access.POLICIES, kind) == want


def test_every_tdset_field_naming_a_configmap_is_checked():
    found = {path for path, key in _walk(description("tdset").crd.spec_schema, "spec")}
    assert found == {"spec.holidays.configMapRef"} == _fields(tdset_access.POLICIES, "ConfigMap")


def test_the_known_scale_targets_are_the_ones_the_tdset_operator_may_scale():
    scalable = {f"{r.group}/{r.kind}": r.plural for r in description("tdset").resources if r.scale}
    assert scalable == tdset_access.KNOWN_PLURALS


def test_the_webserver_lists_are_bounded_by_the_schema():
    secrets = webserver_access.POLICIES[0].references
    assert secrets is not None
    schema = description("webserver").crd.spec_schema["properties"]
    assert secrets.most == sum(schema[f]["maxItems"] for f in ("volumes", "env", "envFrom"))


def test_the_netperf_image_rule_admits_only_the_projects_image_repository():
    (policy,) = netperf_access.POLICIES
    image = next(r for r in policy.rights if r.field.startswith("spec.image"))
    assert f"'{netperf_access.OWN_IMAGE}:'" in image.when and f"'{netperf_access.OWN_IMAGE}@'" in image.when
    assert netperf_access.OWN_IMAGE == "ghcr.io/k8s-operators-py/netperf"


def test_a_policy_checks_each_right_in_an_expression_of_its_own_naming_it_when_refused():
    crd = description("tdset").crd
    for policy in tdset_access.POLICIES:
        vap, binding = access.admission_policy("p", "tdset", crd, policy, {})
        assert binding["spec"] == {"policyName": vap["metadata"]["name"], "validationActions": ["Deny"]}
        assert vap["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["tdsets"]
        # Status and scale are subresources: never matched, so the operator's writes pass.
        assert vap["spec"]["failurePolicy"] == "Fail"
        for validation, right in zip(vap["spec"]["validations"], policy.rights, strict=True):
            assert validation["expression"].count(".check(") == 1
            assert f"'{right.verb}'" in validation["expression"]
            assert "request.userInfo.username" in validation["messageExpression"]
            assert f"needs {right.verb} on" in validation["messageExpression"]


def test_a_list_of_names_is_checked_once_per_distinct_name_up_to_the_budget():
    crd = description("webserver").crd
    vap, _ = access.admission_policy("p", "webserver", crd, webserver_access.POLICIES[0], {})
    checks = [v for v in vap["spec"]["validations"] if ".check(" in v["expression"]]
    assert len(checks) == access.MAX_DISTINCT
    # 350,000 per check of the 10,000,000 a policy evaluation may spend.
    assert access.MAX_DISTINCT * 350_000 < 10_000_000
    assert (
        f"size(variables.distinct) <= {access.MAX_DISTINCT}" in vap["spec"]["validations"][-1]["expression"]
    )
