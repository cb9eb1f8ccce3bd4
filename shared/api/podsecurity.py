"""Security contexts that pass the ``restricted`` Pod Security Standard.

``restricted`` requires: non-root (``runAsNonRoot``, and a non-zero ``runAsUser`` when the
image's user is unknown), no privilege escalation, all capabilities dropped and the
RuntimeDefault (or Localhost) seccomp profile. Operators that create pods use these so their
pods are admitted in namespaces labelled ``pod-security.kubernetes.io/enforce: restricted``.

A pod that needs the host's network (``hostNetwork``) passes neither ``baseline`` nor
``restricted``: ``forbids_host_network`` says from a namespace's labels whether it is refused.
"""

from __future__ import annotations

from typing import Any


def restricted_pod(uid: int) -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restricted_container(*, read_only_root: bool = False) -> dict[str, Any]:
    ctx: dict[str, Any] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    if read_only_root:
        ctx["readOnlyRootFilesystem"] = True
    return ctx


ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
# The levels whose checks forbid host namespaces (hostNetwork, hostPID, hostIPC) and host ports.
FORBID_HOST_NETWORK = ("baseline", "restricted")


def forbids_host_network(namespace_labels: dict[str, str]) -> str | None:
    """The enforced level that refuses a ``hostNetwork`` pod in a namespace with these labels,
    or None. A namespace without the label gets the API server's default level (``privileged``
    unless its admission configuration says otherwise); only admission itself can tell then."""
    level = namespace_labels.get(ENFORCE_LABEL)
    return level if level in FORBID_HOST_NETWORK else None
