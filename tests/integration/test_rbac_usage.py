"""RBAC proof, second half: every verb the CSV grants an operator was needed.

The operators' integration tests (the modules before this one) run each operator as its own
ServiceAccount holding exactly the CSV's rules, so a missing verb fails those tests with 403.
The API server of the local control plane writes an audit log of every request by those
ServiceAccounts (``localcluster.cluster.AUDIT_POLICY``). This module runs last and compares,
per operator, the (API group, resource[/subresource], verb) triples the log shows with the ones
the CSV grants: a granted triple nobody used is an unneeded permission.

That is how the set of calls each operator makes is derived: observed, not declared. It
covers the calls the integration tests provoke, which is why there are tests for the rare
paths too (a pod or Deployment that already exists and is someone else's: ``get``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from localcluster.cluster import AUDITED_NAMESPACE
from tests.integration.conftest import Cluster, csv_permissions

Triple = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def granted(rules: list[dict[str, Any]]) -> set[Triple]:
    return {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def observed(cluster: Cluster) -> tuple[dict[str, set[Triple]], list[dict[str, Any]]]:
    """Used triples per ServiceAccount, and the requests RBAC refused."""
    used: dict[str, set[Triple]] = defaultdict(set)
    refused = []
    prefix = f"system:serviceaccount:{AUDITED_NAMESPACE}:"
    for line in cluster.need_local().audit_log.read_text().splitlines():
        event = json.loads(line)
        user = event.get("user", {}).get("username", "")
        ref = event.get("objectRef")
        if not user.startswith(prefix) or ref is None:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        # RBAC's own verdict; a 403 can also mean "namespace is being terminated" (test teardown).
        if event.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid":
            refused.append(event)
            continue
        used[user.removeprefix(prefix)].add((ref.get("apiGroup", ""), resource, event["verb"]))
    return used, refused


def test_every_granted_verb_was_used_and_none_was_refused(cluster):
    used, refused = observed(cluster)
    assert used, "no requests by operator ServiceAccounts in the audit log"
    assert not refused, [(e["user"]["username"], e["verb"], e["objectRef"]) for e in refused[:5]]
    for account, rules in csv_permissions().items():
        if account not in used:
            continue  # that operator's tests did not run in this session
        unused = granted(rules) - used[account]
        assert not unused, f"{account}: granted but never used: {sorted(unused)}"
        assert used[account] <= granted(rules)
