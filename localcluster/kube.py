"""The few API calls the control-plane bootstrap needs, on the official kubernetes client.

And ``kubectl``, for what is done the way a user would type it (apply a file, wait).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException


def kubectl(kubeconfig: Path, *args: str, check: bool = True, timeout: float = 300) -> str:
    """Run kubectl against ``kubeconfig``; its stdout. With ``check``, a failure raises with stderr."""
    proc = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr or proc.stdout}")
    return proc.stdout


class Client:
    def __init__(self, kubeconfig: Path) -> None:
        self.api = config.new_client_from_config(config_file=str(kubeconfig))

    def ensure_node(self, body: dict[str, Any]) -> None:
        try:
            client.CoreV1Api(self.api).create_node(body)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def apply_crd_file(self, path: Path) -> list[str]:
        """Create or replace every CRD in a YAML file; returns their names."""
        ext = client.ApiextensionsV1Api(self.api)
        names = []
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            name = doc["metadata"]["name"]
            try:
                current = ext.read_custom_resource_definition(name)
                doc["metadata"]["resourceVersion"] = current.metadata.resource_version
                ext.replace_custom_resource_definition(name, doc)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                ext.create_custom_resource_definition(doc)
            names.append(name)
        return names

    def wait_crd_established(self, names: list[str], timeout: float) -> None:
        ext = client.ApiextensionsV1Api(self.api)
        deadline = time.monotonic() + timeout
        pending = set(names)
        while pending:
            for name in list(pending):
                crd = ext.read_custom_resource_definition(name)
                conds = {c.type: c.status for c in (crd.status.conditions or [])}
                if conds.get("Established") == "True":
                    pending.discard(name)
            if pending and time.monotonic() > deadline:
                raise TimeoutError(f"CRDs not Established within {timeout:.0f}s: {sorted(pending)}")
            if pending:
                time.sleep(0.2)

    def ready_nodes(self) -> set[str]:
        nodes = client.CoreV1Api(self.api).list_node()
        ready = set()
        for node in nodes.items:
            conds = {c.type: c.status for c in (node.status.conditions or [])}
            if conds.get("Ready") == "True":
                ready.add(node.metadata.name)
        return ready
