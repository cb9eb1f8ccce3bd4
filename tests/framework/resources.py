"""One custom resource kind in a test cluster: create, read and change its objects by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes import client

from tests.framework.cluster import Cluster


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str

    def create(self, cluster: Cluster, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        body = {
            "apiVersion": f"{self.group}/{self.version}",
            "kind": self.kind,
            "metadata": {"name": name},
            "spec": spec,
        }
        return client.CustomObjectsApi(cluster.api).create_namespaced_custom_object(
            self.group, self.version, namespace, self.plural, body
        )

    def get(self, cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
        return client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
            self.group, self.version, namespace, self.plural, name
        )

    def patch_spec(self, cluster: Cluster, namespace: str, name: str, spec: dict[str, Any]) -> None:
        client.CustomObjectsApi(cluster.api).patch_namespaced_custom_object(
            self.group, self.version, namespace, self.plural, name, {"spec": spec}
        )
