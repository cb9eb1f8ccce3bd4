"""Namespaces a test owns, and quotas that hold a namespace's pods at a count."""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.framework.waits import wait_for


def fresh_namespace(core: Any, prefix: str, labels: dict[str, str] | None = None) -> str:
    """Create a uniquely named namespace and wait until pods can be created in it.

    Pods are rejected until the ServiceAccount controller has made ``default``.
    """
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
    wait_for(lambda: core.read_namespaced_service_account("default", name), 60, "default ServiceAccount")
    return name


def delete_namespace(core: Any, name: str) -> None:
    """Delete a test's namespace (gone already is fine)."""
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def hold_pods_at(core: Any, namespace: str, pods: int, name: str = "hold") -> None:
    """A ResourceQuota that lets only ``pods`` pods exist in ``namespace``.

    It stops a scale-up at exactly that count for as long as a test needs (creates beyond it are
    refused with 403), so "killed in the middle of a scale-up" is a state, not a race. The
    quota admits nothing until the quota controller has filled in its status: wait for that.
    """
    core.create_namespaced_resource_quota(
        namespace, {"metadata": {"name": name}, "spec": {"hard": {"pods": str(pods)}}}
    )
    wait_for(
        lambda: (
            (core.read_namespaced_resource_quota(name, namespace).status.hard or {}).get("pods") == str(pods)
        ),
        60,
        "the quota's status",
    )
