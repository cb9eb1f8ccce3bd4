"""The fake API server of the unit tests answers as kube-apiserver does.

Each scenario sends the same requests through the real client to the local control plane and
through ``tests.framework.fakekube.FakeKube``, and the two transcripts must be equal: what
each write answered (the fields the operators read) and each refusal (status, reason, message,
causes), UIDs and resourceVersions masked. The unit tests built on the fake can then be trusted
on exactly these rules; what the fake does not model is listed in its module docstring.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kubernetes import client, config

from shared.api.errors import ApiError
from shared.client import kube as kube_module
from shared.client.kube import KubeClient, namespaced
from tests.framework.fakekube import FakeKube

WS = "demo.k8s.io/v1alpha1"
Scenario = Callable[[KubeClient, str, list[Any]], Awaitable[None]]
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
VERSION = re.compile(r"(ResourceVersion in (?:the precondition|record) \()\d+")


def mask(text: str) -> str:
    return VERSION.sub(r"\1<rv>", UID.sub("<uid>", text))


async def step(log: list[Any], call: Awaitable[dict[str, Any]], *fields: str) -> dict[str, Any] | None:
    """Send one request; log its answer's ``fields`` (dotted paths) or its refusal."""
    try:
        answer = await call
    except ApiError as exc:
        causes = [mask(c.get("message", "")) for c in (exc.body.get("details") or {}).get("causes") or []]
        log.append(("error", exc.status, exc.reason, mask(exc.message), causes))
        return None
    seen = {}
    for dotted in fields:
        value: Any = answer
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        seen[dotted] = mask(value) if isinstance(value, str) else value
    log.append(("ok", seen))
    return answer


def webserver(name: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": WS,
        "kind": "WebServer",
        "metadata": {"name": name},
        "spec": {"replicas": replicas},
        **extra,
    }


def ws_path(ns: str, name: str = "") -> str:
    return namespaced(ns, "webservers", name, WS)


async def create_get_and_already_exists(kube: KubeClient, ns: str, log: list[Any]) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}
    await step(log, kube.create(namespaced(ns, "configmaps"), cm), "metadata.name", "metadata.generation")
    await step(log, kube.create(namespaced(ns, "configmaps"), cm))
    await step(log, kube.get(namespaced(ns, "configmaps", "missing")))
    await step(log, kube.create(ws_path(ns), webserver("w")), "metadata.generation", "kind", "apiVersion")
    await step(log, kube.create(ws_path(ns), webserver("w")))
    await step(log, kube.get(ws_path(ns, "missing")))
    await step(log, kube.get(namespaced(ns, "nosuchthings", "x")))
    await step(log, kube.get(namespaced(ns, "configmaps", "c") + "/status"))


async def generate_name(kube: KubeClient, ns: str, log: list[Any]) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}}
    made = await kube.create(namespaced(ns, "configmaps"), body)
    name = made["metadata"]["name"]
    log.append((name.startswith("gen-"), len(name)))


async def stale_update_conflicts(kube: KubeClient, ns: str, log: list[Any]) -> None:
    cm = await kube.create(
        namespaced(ns, "configmaps"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    )
    path = namespaced(ns, "configmaps", "c")
    await step(log, kube.replace(path, {**cm, "data": {"a": "1"}}), "data")
    await step(log, kube.replace(path, {**cm, "data": {"a": "2"}}))  # cm's resourceVersion is stale now
    unconditional = {**cm, "metadata": {"name": "c"}, "data": {"a": "3"}}
    await step(log, kube.replace(path, unconditional), "data")
    ws = await kube.create(ws_path(ns), webserver("w"))
    unconditional_ws = {**ws, "metadata": {"name": "w"}, "spec": {"replicas": 2}}
    await step(log, kube.replace(ws_path(ns, "w"), unconditional_ws))
    await step(log, kube.replace(ws_path(ns, "w"), {**ws, "spec": {"replicas": 3}}), "metadata.generation")
    await step(log, kube.replace(ws_path(ns, "w"), {**ws, "spec": {"replicas": 4}}))
    other = {**ws, "metadata": {**ws["metadata"], "uid": "00000000-0000-4000-8000-000000000000"}}
    await step(log, kube.replace(ws_path(ns, "w"), other))


async def generation_and_status_subresource(kube: KubeClient, ns: str, log: list[Any]) -> None:
    fields = ("metadata.generation", "spec", "status", "metadata.labels")
    await step(log, kube.create(ws_path(ns), webserver("w", status={"replicas": 5})), *fields)
    path = ws_path(ns, "w")
    await step(log, kube.merge_patch(path, {"metadata": {"labels": {"a": "b"}}}), *fields)
    await step(log, kube.merge_patch(path, {"spec": {"replicas": 2}}), *fields)
    await step(log, kube.merge_patch(path, {"status": {"replicas": 7}}), *fields)
    await step(log, kube.merge_patch(path + "/status", {"status": {"replicas": 1}}), *fields)
    await step(
        log,
        kube.merge_patch(path + "/status", {"metadata": {"labels": {"c": "d"}}, "spec": {"replicas": 9}}),
        *fields,
    )
    await step(log, kube.get(path + "/status"), *fields)
    await step(log, kube.get(path + "/scale"), "kind", "apiVersion", "spec", "status")
    await step(log, kube.merge_patch(path + "/scale", {"spec": {"replicas": 4}}), "spec")
    await step(log, kube.get(path), *fields)


async def uid_preconditions_on_patches(kube: KubeClient, ns: str, log: list[Any]) -> None:
    ws = await kube.create(ws_path(ns), webserver("w"))
    path, uid = ws_path(ns, "w"), ws["metadata"]["uid"]
    other = "00000000-0000-4000-8000-000000000000"
    status = [{"op": "add", "path": "/status", "value": {"replicas": 2}}]
    await step(log, kube.json_patch(path + "/status", status, uid=uid), "status")
    await step(log, kube.json_patch(path + "/status", status, uid=other))
    await step(
        log,
        kube.merge_patch(path + "/status", {"metadata": {"uid": other}, "status": {"replicas": 3}}),
        "status",
    )
    await step(log, kube.merge_patch(path, {"metadata": {"uid": other, "labels": {"a": "b"}}}))
    await step(
        log, kube.merge_patch(path, {"metadata": {"uid": uid, "labels": {"a": "b"}}}), "metadata.labels"
    )
    await step(log, kube.merge_patch(path, {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 2}}))
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"selector": {"a": "b"}, "ports": [{"port": 80}]},
    }
    made = await kube.create(namespaced(ns, "services"), svc)
    ops = [{"op": "add", "path": "/spec/selector", "value": {"x": "y"}}]
    await step(log, kube.json_patch(namespaced(ns, "services", "s"), ops, uid=other))
    await step(
        log,
        kube.json_patch(namespaced(ns, "services", "s"), ops, uid=made["metadata"]["uid"]),
        "spec.selector",
    )
    await step(
        log, kube.json_patch(namespaced(ns, "services", "s"), [{"op": "remove", "path": "/spec/nothing"}])
    )
    await step(log, kube.merge_patch(namespaced(ns, "services", "s"), {"metadata": {"uid": other}}))


async def delete_preconditions(kube: KubeClient, ns: str, log: list[Any]) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    made = await kube.create(namespaced(ns, "configmaps"), cm)
    path = namespaced(ns, "configmaps", "c")
    other = "00000000-0000-4000-8000-000000000000"
    await step(log, kube.delete(path, {"preconditions": {"uid": other}}))
    await kube.merge_patch(path, {"data": {"a": "1"}})
    stale = made["metadata"]["resourceVersion"]
    await step(log, kube.delete(path, {"preconditions": {"resourceVersion": stale}}))
    await step(log, kube.delete(path, {"preconditions": {"uid": made["metadata"]["uid"]}}), "kind", "status")
    await step(log, kube.delete(path))
    ws = await kube.create(ws_path(ns), webserver("w"))
    await step(log, kube.delete(ws_path(ns, "w"), {"preconditions": {"uid": other}}))
    await step(
        log,
        kube.delete(ws_path(ns, "w"), {"preconditions": {"uid": ws["metadata"]["uid"]}}),
        "kind",
        "status",
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "finalizers": ["example.com/hold"]},
        # Never scheduled: the deletion then has no grace period (nothing runs it).
        "spec": {"containers": [{"name": "c", "image": "x"}], "nodeSelector": {"example.com/none": "x"}},
    }
    await kube.create(namespaced(ns, "pods"), pod)
    await step(log, kube.delete(namespaced(ns, "pods", "p"), {"preconditions": {"uid": other}}))
    gone = await step(log, kube.delete(namespaced(ns, "pods", "p")), "kind", "metadata.finalizers")
    log.append(bool(gone and gone["metadata"].get("deletionTimestamp")))
    await step(
        log, kube.json_patch(namespaced(ns, "pods", "p"), [{"op": "remove", "path": "/metadata/finalizers"}])
    )
    await step(log, kube.get(namespaced(ns, "pods", "p")))


async def list_selectors(kube: KubeClient, ns: str, log: list[Any]) -> None:
    for name, labels in (("a", {"app": "x", "tier": "web"}), ("b", {"app": "x"}), ("c", {"app": "y"})):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}
        await kube.create(namespaced(ns, "configmaps"), body)
    for selector in ("app=x", "app==x,tier", "app!=x", "!tier", "app in (x,y),tier notin (web)"):
        listing = await kube.get(namespaced(ns, "configmaps"), params={"labelSelector": selector})
        log.append(
            (
                selector,
                sorted(
                    i["metadata"]["name"]
                    for i in listing["items"]
                    if i["metadata"]["name"] in {"a", "b", "c"}
                ),
            )
        )
    listing = await kube.get(namespaced(ns, "configmaps"), params={"fieldSelector": "metadata.name=b"})
    log.append(("metadata.name=b", [i["metadata"]["name"] for i in listing["items"]], listing["kind"]))


async def builtin_kinds(kube: KubeClient, ns: str, log: list[Any]) -> None:
    """Which kinds count generations, and what a delete answers."""
    labels = {"app": "x"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    bodies = [
        (
            "v1",
            "pods",
            {"kind": "Pod", "spec": template["spec"] | {"nodeSelector": {"example.com/none": "x"}}},
        ),
        ("v1", "services", {"kind": "Service", "spec": {"ports": [{"port": 80}]}}),
        ("v1", "secrets", {"kind": "Secret"}),
        ("v1", "serviceaccounts", {"kind": "ServiceAccount"}),
        (
            "v1",
            "persistentvolumeclaims",
            {
                "kind": "PersistentVolumeClaim",
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            },
        ),
        (
            "apps/v1",
            "deployments",
            {
                "kind": "Deployment",
                "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": template},
            },
        ),
        (
            "apps/v1",
            "replicasets",
            {
                "kind": "ReplicaSet",
                "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": template},
            },
        ),
        (
            "apps/v1",
            "statefulsets",
            {
                "kind": "StatefulSet",
                "spec": {
                    "replicas": 0,
                    "serviceName": "s",
                    "selector": {"matchLabels": labels},
                    "template": template,
                },
            },
        ),
        (
            "apps/v1",
            "daemonsets",
            {"kind": "DaemonSet", "spec": {"selector": {"matchLabels": labels}, "template": template}},
        ),
        (
            "batch/v1",
            "jobs",
            {
                "kind": "Job",
                "spec": {
                    "suspend": True,
                    "template": {**template, "spec": {**template["spec"], "restartPolicy": "Never"}},
                },
            },
        ),
        (
            "autoscaling/v2",
            "horizontalpodautoscalers",
            {
                "kind": "HorizontalPodAutoscaler",
                "spec": {
                    "maxReplicas": 2,
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "k"},
                },
            },
        ),
        ("coordination.k8s.io/v1", "leases", {"kind": "Lease", "spec": {}}),
        (
            "policy/v1",
            "poddisruptionbudgets",
            {
                "kind": "PodDisruptionBudget",
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
            },
        ),
        ("networking.k8s.io/v1", "networkpolicies", {"kind": "NetworkPolicy", "spec": {"podSelector": {}}}),
        (
            "events.k8s.io/v1",
            "events",
            {
                "kind": "Event",
                "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "x/y",
                "reportingInstance": "i",
                "action": "A",
                "reason": "R",
                "type": "Normal",
                "regarding": {"kind": "Pod", "name": "p", "namespace": ns},
            },
        ),
    ]
    for group_version, plural, fields in bodies:
        body = {"apiVersion": group_version, "metadata": {"name": "k"}, **fields}
        await step(
            log,
            kube.create(namespaced(ns, plural, group_version=group_version), body),
            "kind",
            "metadata.generation",
        )
        await step(log, kube.delete(namespaced(ns, plural, "k", group_version)), "kind")


async def status_put_no_op_and_finalizers(kube: KubeClient, ns: str, log: list[Any]) -> None:
    ws = await kube.create(ws_path(ns), webserver("w"))
    path = ws_path(ns, "w")
    changed = {
        **ws,
        "spec": {"replicas": 5},
        "status": {"replicas": 1},
        "metadata": {**ws["metadata"], "labels": {"a": "b"}},
    }
    await step(
        log,
        kube.replace(path + "/status", changed),
        "spec.replicas",
        "status",
        "metadata.labels",
        "metadata.generation",
    )
    await step(log, kube.replace(path + "/status", changed))  # stale now
    before = await kube.get(path)
    same = await kube.merge_patch(path, {"spec": {"replicas": before["spec"]["replicas"]}})
    log.append(
        (
            "no-op keeps the resourceVersion",
            same["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"],
        )
    )
    await kube.merge_patch(path, {"metadata": {"finalizers": ["example.com/hold"]}})
    deleting = await step(
        log, kube.delete(path), "kind", "metadata.generation", "metadata.deletionGracePeriodSeconds"
    )
    log.append(bool(deleting and deleting["metadata"].get("deletionTimestamp")))
    await step(log, kube.delete(path), "metadata.generation")  # again: nothing changes
    await step(log, kube.merge_patch(path, {"metadata": {"finalizers": None}}), "kind")
    await step(log, kube.get(path))


async def refusals_of_malformed_requests(kube: KubeClient, ns: str, log: list[Any]) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "elsewhere"}}
    await step(log, kube.create(namespaced(ns, "configmaps"), cm))
    cm["metadata"]["namespace"] = ns
    await kube.create(namespaced(ns, "configmaps"), cm)
    await step(log, kube.merge_patch(namespaced(ns, "configmaps", "c"), {"metadata": {"name": "d"}}))
    await step(log, kube.replace(namespaced(ns, "configmaps", "c"), {**cm, "metadata": {"name": "d"}}))
    await step(log, kube.get(namespaced(ns, "configmaps", "c") + "/scale"))


async def deployment_scale(kube: KubeClient, ns: str, log: list[Any]) -> None:
    labels = {"app": "x"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": template},
    }
    await kube.create(namespaced(ns, "deployments", group_version="apps/v1"), body)
    path = namespaced(ns, "deployments", "d", "apps/v1") + "/scale"
    await step(log, kube.get(path), "kind", "apiVersion", "spec", "status.selector", "metadata.name")
    await step(log, kube.merge_patch(path, {"spec": {"replicas": 2}}), "kind", "spec")
    await step(
        log, kube.get(namespaced(ns, "deployments", "d", "apps/v1")), "spec.replicas", "metadata.generation"
    )
    # A UID in the Scale is a precondition here (TDSet's one-request flip relies on it), not on a
    # custom resource's /scale.
    other = {"uid": "00000000-0000-4000-8000-000000000000"}
    await step(log, kube.merge_patch(path, {"metadata": other, "spec": {"replicas": 3}}), "spec")
    await kube.create(ws_path(ns), webserver("w"))
    await step(
        log,
        kube.merge_patch(ws_path(ns, "w") + "/scale", {"metadata": other, "spec": {"replicas": 3}}),
        "spec",
    )


async def discovery(kube: KubeClient, ns: str, log: list[Any]) -> None:
    """What TDSet's scale targets are resolved with: a kind's entry and its ``/scale`` one."""
    wanted = {
        "deployments",
        "deployments/scale",
        "statefulsets",
        "statefulsets/scale",
        "replicasets",
        "replicasets/scale",
        "daemonsets",
        "configmaps",
        "webservers",
        "webservers/scale",
    }
    for path in ("/apis/apps/v1", "/api/v1", f"/apis/{WS}", "/apis/nowhere.example.com/v1"):
        found = await step(log, kube.get(path), "kind", "groupVersion")
        if found is not None:
            entries = [
                (r["name"], r["kind"], r.get("group", ""), r.get("version", ""), r["namespaced"])
                for r in found["resources"]
                if r["name"] in wanted
            ]
            log.append(sorted(entries))


SCENARIOS: list[Scenario] = [
    discovery,
    status_put_no_op_and_finalizers,
    refusals_of_malformed_requests,
    deployment_scale,
    builtin_kinds,
    create_get_and_already_exists,
    generate_name,
    stale_update_conflicts,
    generation_and_status_subresource,
    uid_preconditions_on_patches,
    delete_preconditions,
    list_selectors,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_the_fake_answers_as_the_api_server(scenario, cluster, namespace, monkeypatch):
    # The client deletes the credential files of the kubernetes package's loader once it has read
    # them; in this process they are the tests' own.
    monkeypatch.setattr(kube_module, "_forget_credential_files", lambda cfg: None)

    async def transcript(kube: KubeClient) -> list[Any]:
        log: list[Any] = []
        try:
            await scenario(kube, namespace, log)
        finally:
            await kube.close()
        return log

    cfg = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    real = asyncio.run(transcript(KubeClient(cfg)))
    fake = asyncio.run(transcript(FakeKube()))
    # Step by step, so a difference names its step.
    for i, (mine, theirs) in enumerate(zip(fake, real, strict=False)):
        if mine != theirs:
            print(f"step {i}:\n  fake: {mine}\n  real: {theirs}")
    assert fake == real
