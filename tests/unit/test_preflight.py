"""preflight's offline checks (tools/check/preflight.py) on CSVs and OCI archives made here."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from localcluster.ociimage import ImageFile, layer_tar, write_archive
from tools.check import preflight

DIGEST = "sha256:" + "a" * 64
REQUIRED_LABELS = {label: f"a {label}" for label in preflight.REQUIRED_LABELS}


def csv(**annotations: str) -> dict[str, Any]:
    image = f"registry.example/op@{DIGEST}"
    operand = f"registry.example/operand@{DIGEST}"
    return {
        "metadata": {
            "annotations": {f"{preflight.FEATURE}{k.replace('_', '-')}": v for k, v in annotations.items()}
        },
        "spec": {
            "relatedImages": [{"name": "op", "image": image}, {"name": "operand", "image": operand}],
            "install": {
                "spec": {
                    "deployments": [
                        {
                            "spec": {
                                "template": {
                                    "spec": {
                                        "containers": [
                                            {
                                                "image": image,
                                                "env": [{"name": "RELATED_IMAGE_OPERAND", "value": operand}],
                                            }
                                        ]
                                    }
                                }
                            }
                        }
                    ]
                }
            },
        },
    }


ALL_FEATURES = {f.replace("-", "_"): "false" for f in preflight.REQUIRED_FEATURES} | {"disconnected": "true"}


def verdicts(doc: dict[str, Any]) -> dict[str, bool]:
    return {r.check: r.passed for r in preflight.operator_checks(doc)}


def test_a_disconnected_csv_with_pinned_related_images_passes_every_operator_check():
    assert verdicts(csv(**ALL_FEATURES)) == dict.fromkeys(preflight.OPERATOR_CHECKS, True)


def test_the_real_bundle_is_checked_by_the_same_rules():
    results = preflight.operator_checks(preflight.load_csv())
    assert [r.check for r in results] == list(preflight.OPERATOR_CHECKS)


@pytest.mark.parametrize("feature", preflight.REQUIRED_FEATURES)
def test_each_required_feature_annotation_missing_fails(feature):
    annotations = {k: v for k, v in ALL_FEATURES.items() if k != feature.replace("-", "_")}
    assert verdicts(csv(**annotations))["RequiredAnnotations"] is False


@given(st.text(min_size=1).filter(lambda v: v not in ("true", "false")))
def test_a_feature_annotation_other_than_true_or_false_fails(value):
    assert verdicts(csv(**{**ALL_FEATURES, "proxy_aware": value}))["RequiredAnnotations"] is False


def test_a_related_image_by_tag_breaks_the_restricted_network_guidelines():
    doc = csv(**ALL_FEATURES)
    doc["spec"]["relatedImages"][1]["image"] = "registry.example/operand:1.0"
    result = verdicts(doc)
    assert result["FollowsRestrictedNetworkEnablementGuidelines"] is False
    assert result["AllImageRefsInRelatedImages"] is False  # the env still names the digest


def test_no_related_image_env_breaks_the_restricted_network_guidelines():
    doc = csv(**ALL_FEATURES)
    container = doc["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]["containers"][0]
    container["env"] = []
    assert verdicts(doc)["FollowsRestrictedNetworkEnablementGuidelines"] is False


def test_not_claiming_disconnected_fails_the_guidelines():
    assert (
        verdicts(csv(**{**ALL_FEATURES, "disconnected": "false"}))[
            "FollowsRestrictedNetworkEnablementGuidelines"
        ]
        is False
    )


def test_an_image_the_deployment_runs_outside_related_images_fails():
    doc = csv(**ALL_FEATURES)
    doc["spec"]["relatedImages"] = doc["spec"]["relatedImages"][:1]
    assert verdicts(doc)["AllImageRefsInRelatedImages"] is False


def test_more_than_one_scc_requested_fails():
    doc = csv(**ALL_FEATURES)
    rule = {
        "apiGroups": ["security.openshift.io"],
        "resources": ["securitycontextconstraints"],
        "verbs": ["use"],
    }
    one, two = copy.deepcopy(doc), copy.deepcopy(doc)
    one["spec"]["install"]["spec"]["clusterPermissions"] = [
        {"rules": [{**rule, "resourceNames": ["restricted-v2"]}]}
    ]
    two["spec"]["install"]["spec"]["clusterPermissions"] = [
        {"rules": [{**rule, "resourceNames": ["a", "b"]}]}
    ]
    assert verdicts(one)["SecurityContextConstraintsInCSV"] is True
    assert verdicts(two)["SecurityContextConstraintsInCSV"] is False


def archive(
    tmp_path: Path, ref: str = "registry.example/img:1.0", *, user: str = "65532", labels=None, files=None
) -> Path:
    files = files if files is not None else {"/licenses/LICENSE": ImageFile(b"Apache-2.0\n")}
    path = tmp_path / "img.tar"
    write_archive(
        path, ref, layer_tar(files), user=user, labels=REQUIRED_LABELS if labels is None else labels
    )
    return path


def container_verdicts(path: Path) -> dict[str, bool]:
    return {r.check: r.passed for r in preflight.container_checks(preflight.read_archive(path))}


def test_a_labelled_non_root_image_with_licenses_passes_every_container_check(tmp_path):
    assert container_verdicts(archive(tmp_path)) == dict.fromkeys(preflight.CONTAINER_CHECKS, True)


@pytest.mark.parametrize("user", ["", "0", "root", "0:0", "root:root"])
def test_root_users_fail(tmp_path, user):
    assert container_verdicts(archive(tmp_path, user=user))["RunAsNonRoot"] is False


@pytest.mark.parametrize("label", preflight.REQUIRED_LABELS)
def test_each_missing_label_fails(tmp_path, label):
    labels = {k: v for k, v in REQUIRED_LABELS.items() if k != label}
    assert container_verdicts(archive(tmp_path, labels=labels))["HasRequiredLabel"] is False


def test_a_vendor_naming_red_hat_is_prohibited(tmp_path):
    labels = {**REQUIRED_LABELS, "vendor": "Red Hat, Inc."}
    assert container_verdicts(archive(tmp_path, labels=labels))["HasNoProhibitedLabels"] is False


@pytest.mark.parametrize(
    "files",
    [{}, {"/licenses/EMPTY": ImageFile(b"")}, {"/licenses": ImageFile(b"a file, not a directory")}],
    ids=["none", "empty", "not-a-directory"],
)
def test_licenses_missing_empty_or_a_file_fails(tmp_path, files):
    files = {**files, "/etc/hostname": ImageFile(b"x\n")}
    assert container_verdicts(archive(tmp_path, files=files))["HasLicense"] is False


def test_latest_is_not_a_unique_tag(tmp_path):
    assert container_verdicts(archive(tmp_path, "registry.example/img:latest"))["HasUniqueTag"] is False


def test_whiteouts_remove_files_of_lower_layers():
    files: dict[str, int] = {}
    import tarfile

    for name, kind in [
        ("licenses", tarfile.DIRTYPE),
        ("licenses/LICENSE", tarfile.REGTYPE),
        ("licenses/.wh.LICENSE", tarfile.REGTYPE),
    ]:
        member = tarfile.TarInfo(name)
        member.type = kind
        member.size = 10 if name == "licenses/LICENSE" else 0
        preflight._apply(files, member)
    assert files == {"licenses": -1}


@pytest.mark.parametrize(
    ("text", "violates"),
    [
        ("Red Hat", True),
        ("redhat-operator", True),
        ("acme for Red Hat OpenShift", False),
        ("acme, for Red Hat, by Red Hat", True),
        ("k8s-operators-py", False),
        ("shredhat", True),
    ],
)
def test_red_hat_trademark_rule_is_preflights(text, violates):
    assert preflight.violates_red_hat_trademark(text) is violates


def test_a_container_named_after_red_hat_is_prohibited(tmp_path):
    path = archive(tmp_path, "registry.example/redhat-thing:1.0")
    assert container_verdicts(path)["HasProhibitedContainerName"] is False


def test_the_restricted_network_check_is_optional_as_in_preflight():
    results = {
        r.check: r for r in preflight.operator_checks(csv(**{**ALL_FEATURES, "disconnected": "false"}))
    }
    assert not results["FollowsRestrictedNetworkEnablementGuidelines"].passed
    assert not results["FollowsRestrictedNetworkEnablementGuidelines"].enforced
    assert all(
        r.enforced for name, r in results.items() if name != "FollowsRestrictedNetworkEnablementGuidelines"
    )


def test_the_committed_bundle_passes_every_enforced_operator_check():
    failed = [
        r.line() for r in preflight.operator_checks(preflight.load_csv()) if r.enforced and not r.passed
    ]
    assert not failed, failed
