"""Pure builders of the TDSet's children: Deployment, patch, Service and the HPA floor."""

import dataclasses
import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from operators.tdset import desired
from operators.tdset.desired import AutoscalerView
from shared.api import ownership

OWNER = {
    "apiVersion": "schedule.rs/v1",
    "kind": "TDSet",
    "metadata": {"name": "shop", "namespace": "ns", "uid": "u1"},
}
SPEC = {"container": {"image": "nginx:1.27", "port": 80}, "defaultReplica": 3, "schedulingConfig": []}


def observed(replicas=3, image="nginx:1.27", port=80):
    body = desired.deployment_manifest(OWNER, {"container": {"image": image, "port": port}}, replicas)
    body["metadata"].update(namespace="ns", generation=1)
    return desired.deployment_view(body)


def test_deployment_is_owned_labelled_and_selects_only_its_pods():
    dep = desired.deployment_manifest(OWNER, SPEC, 5)
    assert dep["metadata"]["name"] == "shop"
    assert ownership.is_controlled_by(dep, "u1")
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector == {ownership.NAME: "tdset", ownership.INSTANCE: "shop"}
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()
    assert dep["metadata"]["labels"][ownership.MANAGED_BY_LABEL] == ownership.MANAGED_BY
    assert dep["spec"]["replicas"] == 5
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert (c["image"], c["ports"][0]["containerPort"]) == ("nginx:1.27", 80)


def test_view_reads_back_what_the_manifest_set():
    view = observed(7, "img:2", 8080)
    assert view.fields() == {
        "replicas": 7,
        "image": "img:2",
        "port": 8080,
        "runAsUser": None,
        "automountServiceAccountToken": False,
    }
    assert not view.available and view.ready == 0


def test_view_of_a_rolled_out_available_deployment():
    body = desired.deployment_manifest(OWNER, SPEC, 2)
    body["metadata"]["generation"] = 3
    body["status"] = {
        "observedGeneration": 3,
        "replicas": 2,
        "readyReplicas": 2,
        "updatedReplicas": 2,
        "conditions": [{"type": "Available", "status": "True"}],
    }
    view = desired.deployment_view(body)
    assert view.available and view.rolled_out and (view.ready, view.updated) == (2, 2)
    body["metadata"]["generation"] = 4
    assert not desired.deployment_view(body).rolled_out


def test_patch_is_none_when_nothing_differs():
    assert desired.deployment_patch(observed(), SPEC, 3) is None
    assert desired.deployment_patch(observed(9), SPEC, None) is None


def test_patch_sets_replicas_only_when_they_differ():
    assert desired.deployment_patch(observed(3), SPEC, 5) == {"spec": {"replicas": 5}}


def test_image_or_port_change_replaces_the_container_list():
    for spec in (
        {**SPEC, "container": {"image": "nginx:1.28", "port": 80}},
        {**SPEC, "container": {"image": "nginx:1.27", "port": 8080}},
    ):
        patch = desired.deployment_patch(observed(), spec, None)
        template = {
            "spec": {
                "containers": [desired.container(spec)],
                "securityContext": None,
                "automountServiceAccountToken": False,
            }
        }
        assert patch == {
            "metadata": {"annotations": {desired.APPLIED: desired.template_hash(spec)}},
            "spec": {"template": template},
        }


def test_a_template_rewritten_by_admission_is_not_written_again():
    """A mutating policy pins the image to a digest: the TDSet wrote the template for this spec
    (annotation) and the server stored the digest; comparing with the spec would patch on
    every pass, comparing with what was stored does not — but a later hand edit is drift."""

    def stored_as(image):
        body = desired.deployment_manifest(OWNER, SPEC, 3)  # annotated for nginx:1.27
        body["spec"]["template"]["spec"]["containers"][0]["image"] = image
        body["metadata"].update(namespace="ns", generation=1)
        return desired.deployment_view(body)

    pinned = stored_as("nginx@sha256:abc")
    assert pinned.applied == desired.template_hash(SPEC)
    stored = pinned.template_fields()
    assert desired.deployment_patch(pinned, SPEC, 3, stored) is None
    assert desired.deployment_patch(pinned, SPEC, 3, None) is None  # after a restart: trusted
    edited = stored_as("someone/else:1")
    assert "template" in desired.deployment_patch(edited, SPEC, 3, stored)["spec"]
    changed = {**SPEC, "container": {"image": "nginx:1.28", "port": 80}}
    assert "template" in desired.deployment_patch(pinned, changed, 3, stored)["spec"]


def test_a_deployment_written_before_the_annotation_is_compared_field_by_field():
    """An unannotated Deployment with the same fields (and an unnamed port) is current; one
    with another image is patched, and so is one written before pods stopped getting a token."""
    body = desired.deployment_manifest(OWNER, SPEC, 3)
    body["metadata"].pop("annotations")
    body["spec"]["template"]["spec"]["containers"][0]["ports"][0].pop("name")
    old = desired.deployment_view(body)
    assert old.applied is None and old.port_name is None
    assert desired.deployment_patch(old, SPEC, 3) is None
    assert desired.deployment_patch(old, {**SPEC, "container": {"image": "x:1", "port": 80}}, 3)
    body["spec"]["template"]["spec"].pop("automountServiceAccountToken")
    patch = desired.deployment_patch(desired.deployment_view(body), SPEC, 3)
    assert patch["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_patches_carry_the_deployments_uid_as_a_precondition():
    body = desired.deployment_manifest(OWNER, SPEC, 3)
    body["metadata"].update(namespace="ns", generation=1, uid="d1")
    assert desired.deployment_patch(desired.deployment_view(body), SPEC, 5) == {
        "metadata": {"uid": "d1"},
        "spec": {"replicas": 5},
    }


def test_service_only_when_asked_and_targets_the_named_container_port():
    assert desired.service_manifest(OWNER, SPEC) is None
    svc = desired.service_manifest(OWNER, {**SPEC, "service": {"port": 8000}})
    assert svc is not None and ownership.is_controlled_by(svc, "u1")
    assert svc["spec"]["ports"][0]["port"] == 8000
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    assert desired.container(SPEC)["ports"][0]["name"] == "http"
    assert svc["spec"]["selector"] == desired.selector_labels("shop")


def settled(body, **status):
    body["metadata"].update(namespace="ns", generation=1)
    body["status"] = {"observedGeneration": 1, **status}
    return desired.deployment_view(body)


def test_the_service_switches_to_the_port_name_only_once_every_pod_has_it():
    """A Deployment from before the port was named: its Service keeps the number through the
    rollout that names it (the old pods have no port of that name), then targets the name."""
    named = desired.deployment_manifest(OWNER, {**SPEC, "container": {"image": "nginx:1.27", "port": 81}}, 2)
    rolling = settled(named, replicas=3, updatedReplicas=1)
    assert desired.service_target_port(rolling, 80) == 80
    done = settled(desired.deployment_manifest(OWNER, SPEC, 2), replicas=2, updatedReplicas=2)
    assert desired.service_target_port(done, 80) == "http"
    # a new Service of a new TDSet targets the name at once; a named one keeps it
    assert desired.service_target_port(rolling, None) == "http"
    assert desired.service_target_port(rolling, "http") == "http"
    unnamed = desired.deployment_manifest(OWNER, SPEC, 2)
    unnamed["spec"]["template"]["spec"]["containers"][0]["ports"][0].pop("name")
    assert desired.service_target_port(settled(unnamed, replicas=2, updatedReplicas=2), None) == 80


def hpa_body(target_kind="Deployment", target="shop", api_version="apps/v1", min_r=None, max_r=10):
    spec = {
        "scaleTargetRef": {"kind": target_kind, "name": target, "apiVersion": api_version},
        "maxReplicas": max_r,
    }
    if min_r is not None:
        spec["minReplicas"] = min_r
    return {"metadata": {"name": "h", "namespace": "ns"}, "spec": spec}


def test_autoscaler_view_only_targets_deployments():
    assert desired.autoscaler_view(hpa_body()).target == "shop"
    assert desired.autoscaler_view(hpa_body(target_kind="StatefulSet")).target is None
    assert desired.autoscaler_view(hpa_body(api_version="example.com/v1")).target is None
    # minReplicas defaults to 1 in the API
    assert desired.autoscaler_view(hpa_body()).min_replicas == 1


def test_autoscaler_for_picks_the_first_by_name_targeting_the_deployment():
    views = [
        AutoscalerView("ns", "b", "shop", 1, 5),
        AutoscalerView("ns", "a", "other", 1, 5),
        AutoscalerView("ns", "c", "shop", 1, 5),
    ]
    found = desired.autoscaler_for(views, "shop")
    assert found is not None and found.name == "b"
    assert desired.autoscaler_for(views, "nothing") is None


@given(scheduled=st.integers(0, 200), max_replicas=st.integers(1, 100))
def test_autoscaler_floor_is_within_the_hpa_bounds_and_says_why_when_clamped(scheduled, max_replicas):
    floor, why = desired.autoscaler_floor(scheduled, AutoscalerView("ns", "h", "shop", 1, max_replicas))
    assert 1 <= floor <= max_replicas
    assert (why is None) == (floor == scheduled)
    if why is not None:
        assert str(scheduled) in why and "h" in why


@pytest.mark.parametrize(("scheduled", "floor"), [(0, 1), (4, 4), (12, 10)])
def test_autoscaler_floor_examples(scheduled, floor):
    assert desired.autoscaler_floor(scheduled, AutoscalerView("ns", "h", "shop", 1, 10))[0] == floor


def test_run_as_user_gives_restricted_pods_and_only_then():
    """A TDSet in a namespace enforcing ``restricted`` needs restricted pods."""
    spec = {
        **SPEC,
        "container": {"image": "nginxinc/nginx-unprivileged:1.27", "port": 8080, "runAsUser": 101},
    }
    pod = desired.deployment_manifest(OWNER, spec, 1)["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 101,
        "runAsGroup": 101,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }
    # Without it the template is what it always was: no rollout of existing TDSets on upgrade.
    plain = desired.deployment_manifest(OWNER, SPEC, 1)["spec"]["template"]["spec"]
    assert "securityContext" not in plain and "securityContext" not in plain["containers"][0]


def test_setting_and_unsetting_run_as_user_patches_the_pod_security_context():
    spec = {**SPEC, "container": {**SPEC["container"], "runAsUser": 101}}
    patch = desired.deployment_patch(observed(), spec, None)
    assert patch["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 101
    body = desired.deployment_manifest(OWNER, spec, 3)
    body["metadata"].update(namespace="ns", generation=1)
    restricted = desired.deployment_view(body)
    assert restricted.run_as_user == 101
    assert desired.deployment_patch(restricted, spec, 3) is None
    restricted = dataclasses.replace(restricted, applied=None)  # written before the annotation
    assert desired.deployment_patch(restricted, spec, 3) is None
    unset = desired.deployment_patch(restricted, SPEC, None)
    assert unset["spec"]["template"]["spec"]["securityContext"] is None


def test_floor_patch_remembers_the_users_value_once_and_restore_gives_it_back():
    hpa = desired.autoscaler_view(
        {
            "metadata": {"name": "h", "namespace": "ns"},
            "spec": {
                "minReplicas": 2,
                "maxReplicas": 9,
                "scaleTargetRef": {"kind": "Deployment", "apiVersion": "apps/v1", "name": "shop"},
            },
        }
    )
    patch = desired.floor_patch(hpa, "u1", 5)
    assert patch == {
        "metadata": {"annotations": {desired.FLOOR_OWNER: "u1", desired.ORIGINAL_MIN: "2"}},
        "spec": {"minReplicas": 5},
    }
    raised = desired.autoscaler_view(
        {
            "metadata": {"name": "h", "namespace": "ns", **patch["metadata"]},
            "spec": {"minReplicas": 5, "maxReplicas": 9},
        }
    )
    assert (raised.floor_owner, raised.original_min) == ("u1", 2)
    # A later floor (or a re-created TDSet) keeps the user's own 2, not the raised 5.
    assert desired.floor_patch(raised, "u2", 7)["metadata"]["annotations"][desired.ORIGINAL_MIN] == "2"
    assert desired.restore_patch(raised) == {
        "metadata": {
            "annotations": {desired.FLOOR_OWNER: None, desired.ORIGINAL_MIN: None, desired.ORIGINAL_MAX: None}
        },
        "spec": {"minReplicas": 2},
    }


def test_pods_mount_no_service_account_token_unless_asked():
    """The Deployment's pods get no ServiceAccount token unless the TDSet asks for one."""
    pod = desired.deployment_manifest(OWNER, SPEC, 1)["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    off = {**SPEC, "container": {**SPEC["container"], "automountServiceAccountToken": False}}
    assert desired.template_hash(off) == desired.template_hash(SPEC)  # the schema's default
    on = {**SPEC, "container": {**SPEC["container"], "automountServiceAccountToken": True}}
    body = desired.deployment_manifest(OWNER, on, 1)
    assert body["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    # Asking for it, and no longer asking, are template changes: the Deployment rolls.
    patch = desired.deployment_patch(observed(), on, None)
    assert patch["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    assert patch["metadata"]["annotations"] == {desired.APPLIED: desired.template_hash(on)}
    body["metadata"].update(namespace="ns", generation=1)
    with_token = desired.deployment_view(body)
    assert with_token.automount_token is True and desired.deployment_patch(with_token, on, 1) is None
    back = desired.deployment_patch(with_token, SPEC, None)
    assert back["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    # Only an explicit true mounts one: a value that slipped past the schema does not.
    odd = {**SPEC, "container": {**SPEC["container"], "automountServiceAccountToken": "yes"}}
    assert desired.automount_token(odd) is False


def test_a_deployment_annotated_by_a_release_before_the_token_default_is_patched_once():
    """Its annotation holds the hash of a template without the field: the upgrade writes the
    template once (docs/operations/upgrades.md), then the new annotation holds."""
    body = desired.deployment_manifest(OWNER, SPEC, 3)
    body["spec"]["template"]["spec"].pop("automountServiceAccountToken")
    before = {"container": desired.container(SPEC), "securityContext": None}
    old_hash = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:16]
    body["metadata"].update(namespace="ns", generation=1, annotations={desired.APPLIED: old_hash})
    old = desired.deployment_view(body)
    patch = desired.deployment_patch(old, SPEC, 3)
    assert patch["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert patch["metadata"]["annotations"] == {desired.APPLIED: desired.template_hash(SPEC)}
    assert desired.deployment_patch(observed(), SPEC, 3) is None


def test_a_policy_that_rewrites_the_token_field_is_not_fought():
    """A mutating admission policy forces the field off: what the server stored for our write
    is what we compare with, so no pass writes the template again — until someone edits it."""
    on = {**SPEC, "container": {**SPEC["container"], "automountServiceAccountToken": True}}
    body = desired.deployment_manifest(OWNER, on, 3)
    body["spec"]["template"]["spec"]["automountServiceAccountToken"] = False  # the policy's
    body["metadata"].update(namespace="ns", generation=1)
    forced = desired.deployment_view(body)
    stored = forced.template_fields()
    assert desired.deployment_patch(forced, on, 3, stored) is None
    edited = dataclasses.replace(forced, automount_token=None)
    assert "template" in desired.deployment_patch(edited, on, 3, stored)["spec"]
