"""A minimal operator built only from ``shared``, to test the shared runtime on a real API.

Primary objects are ConfigMaps labelled ``demo=yes``; each gets one child Pod. Every pod event
the operator receives is logged as ``SEEN pod <name>``, so a test can prove the server-side
label selector keeps foreign pods out of the watch.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
from kubernetes import client, config

from shared.api import ownership
from shared.controller import caches
from shared.controller.reconcile import reconciler
from shared.controller.runtime import Runtime, parse_options

APP = "demo"
runtime = Runtime(
    app=APP, controllers=("demo",), child_resources=("pods",), options=parse_options(None, prog=APP)
)
log = logging.getLogger("demo")

children = caches.OwnerCache(lambda b: b["metadata"]["name"])


@kopf.on.event("pods")
def seen(type: str | None, body: kopf.Body, **_: Any) -> None:
    children.observe(type, body)
    log.info(f"SEEN pod {body['metadata']['name']}")


@kopf.on.create("configmaps", labels={"demo": "yes"})
@reconciler("demo", runtime.metrics)
def create_child(body: kopf.Body, namespace: str, **_: Any) -> None:
    if children.children(namespace, body["metadata"]["uid"]):
        return
    pod = ownership.adopt(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{body['metadata']['name']}-child"},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        },
        body,
        APP,
        "child",
    )
    config.load_kube_config()
    client.CoreV1Api().create_namespaced_pod(namespace, pod)


if __name__ == "__main__":
    runtime.run()
