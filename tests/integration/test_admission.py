"""Specs whose children can never exist are refused at admission with the field and what is
wrong, and stored objects stay writable while the field is left alone (the rules ratchet)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.framework import netperfs, tdsets, webservers

KINDS = {
    "webserver": (webservers.GROUP, webservers.VERSION, webservers.PLURAL, "WebServer"),
    "tdset": (tdsets.GROUP, tdsets.VERSION, tdsets.PLURAL, "TDSet"),
    "netperf": (netperfs.GROUP, netperfs.VERSION, netperfs.PLURAL, "Netperf"),
}


def create(cluster, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    group, version, plural, kind_name = KINDS[kind]
    body = {"apiVersion": f"{group}/{version}", "kind": kind_name, "metadata": {"name": name}, "spec": spec}
    return client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
        group, version, namespace, plural, body
    )


def refused(cluster, namespace: str, kind: str, name: str, spec: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as err:
        create(cluster, namespace, kind, name, spec)
    assert err.value.status == 422, err.value.body
    return str(err.value.body)


def web(resources: dict[str, Any]) -> dict[str, Any]:
    return {"replicas": 1, "resources": resources}


REFUSED = {
    "webserver-digit-name-service": (
        "webserver",
        "1web",
        {"replicas": 1, "service": {"enabled": True}},
        ["metadata.name", "must start with a letter when a Service is requested"],
    ),
    "tdset-digit-name-service": (
        "tdset",
        "2shop",
        tdsets.steady(1, service={"port": 80}),
        ["metadata.name", "must start with a letter when a Service is requested"],
    ),
    "cpu-fractional-exponent": (
        "webserver",
        "w",
        web({"requests": {"cpu": "1E.5"}}),
        ["spec.resources.requests[cpu]", "must be a non-negative quantity"],
    ),
    "cpu-negative-string": (
        "webserver",
        "w",
        web({"limits": {"cpu": "-1"}}),
        ["spec.resources.limits[cpu]", "must be a non-negative quantity"],
    ),
    "memory-negative-integer": (
        "webserver",
        "w",
        web({"requests": {"memory": -5}}),
        ["spec.resources.requests[memory]", "must be a non-negative quantity"],
    ),
    "exponent-the-parser-hangs-on": (
        "webserver",
        "w",
        web({"requests": {"cpu": "1e2147483648"}}),
        ["spec.resources.requests[cpu]", "exponent below 1000"],
    ),
    "unknown-resource": (
        "webserver",
        "w",
        web({"requests": {"gpu": "1"}}),
        ["spec.resources.requests", "may only name cpu, memory, ephemeral-storage"],
    ),
    "empty-resource-name": (
        "webserver",
        "w",
        web({"limits": {"": "1"}}),
        ["spec.resources.limits", "may only name cpu, memory, ephemeral-storage"],
    ),
    "request-above-limit": (
        "webserver",
        "w",
        web({"requests": {"cpu": "1500m", "memory": "64Mi"}, "limits": {"cpu": 1, "memory": "1Gi"}}),
        ["spec.resources.requests[cpu]", "must not be above the cpu limit"],
    ),
    "netperf-node-with-empty-label": (
        "netperf",
        "np",
        {"serverNode": "node..example"},
        ["spec.serverNode", "must be a node name"],
    ),
    "image-ending-in-a-vertical-tab": (
        "tdset",
        "shop",
        {**tdsets.steady(1), "container": {"image": "nginx\u000b", "port": 80}},
        ["spec.container.image", "must not start or end with whitespace"],
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_specs_whose_children_could_never_be_created_are_refused(cluster, namespace, case):
    kind, name, spec, fragments = REFUSED[case]
    body = refused(cluster, namespace, kind, name, spec)
    for fragment in fragments:
        assert fragment in body, body


def test_limits_and_requests_pods_accept_are_accepted(cluster, namespace):
    spec = web(
        {
            "requests": {"cpu": "250m", "memory": 64 * 2**20, "ephemeral-storage": "1e3"},
            "limits": {"cpu": "0.25", "memory": "64Mi", "ephemeral-storage": "1k"},
        }
    )
    assert create(cluster, namespace, "webserver", "w", spec)["spec"]["resources"] == spec["resources"]


def test_the_rules_check_updates_that_change_the_field(cluster, namespace):
    """They ratchet (a stored object keeps taking updates that leave the field alone, as
    crd_compat requires) but are not create-only: a changed value must be valid."""
    group, version, plural, _ = KINDS["webserver"]
    api = client.CustomObjectsApi(cluster.api)
    create(cluster, namespace, "webserver", "w", web({"limits": {"cpu": "1"}}))
    api.patch_namespaced_custom_object(group, version, namespace, plural, "w", {"spec": {"replicas": 2}})
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_custom_object(
            group, version, namespace, plural, "w", {"spec": {"resources": {"limits": {"cpu": "-1"}}}}
        )
    assert err.value.status == 422 and "spec.resources.limits[cpu]" in str(err.value.body)
