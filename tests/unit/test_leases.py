"""shared.api.leases: the Lease's default name and the elector's RBAC rules."""

from shared.api import leases


def test_rules_limit_reads_and_updates_to_the_operators_own_lease():
    assert leases.rules("webserver") == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["webserver-leader"],
            "verbs": ["get", "update"],
        },
    ]


def test_the_default_lease_is_named_after_the_app():
    assert leases.lease_name("webserver") == "webserver-leader"
