"""Overhead of a Netperf run: time from CR creation to ``Done`` minus the test's own duration.

    sudo python -m tools.bench.netperf_overhead [--runs 5] [--duration 2] [--samples 1]

Starts the local control plane with the bundle's CRDs and this machine as its real node
(``localcluster.node``: root), imports the netperf image (``make images``), runs the Netperf
operator, then creates Netperfs one after the other and times, with a watch, the moment each
reaches ``Done``. The overhead is that time minus ``samples x duration`` (what netperf itself
runs): pod creation, scheduling, image start on the real node, status writes.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from kubernetes import client, config, watch

from localcluster import cluster as localcluster
from localcluster.images import ensure_images
from tests.framework.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[2]
GROUP, VERSION, PLURAL = "app.example.com", "v1alpha1", "netperfs"


def one_run(api: client.ApiClient, ns: str, name: str, spec: dict[str, object]) -> float:
    co = client.CustomObjectsApi(api)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Netperf", "metadata": {"name": name}, "spec": spec}
    t0 = time.monotonic()
    co.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
    w = watch.Watch()
    for event in w.stream(co.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL, timeout_seconds=300):
        obj = event["object"]
        phase = (obj.get("status") or {}).get("status")
        if obj["metadata"]["name"] == name and phase in ("Done", "Error"):
            w.stop()
            if phase == "Error":
                raise SystemExit(f"{name} ended in Error: {obj['status'].get('message')}")
            return time.monotonic() - t0
    raise SystemExit(f"{name} did not finish")


@contextlib.contextmanager
def real_node_operator(pod_ingress_rate: int | None = None) -> Iterator[tuple[client.ApiClient, str, str]]:
    """The local control plane with this machine as its real node (traffic into its pods shaped to
    ``pod_ingress_rate`` bits/s, if given), the netperf image imported and the Netperf operator
    running from this tree: (API client, a fresh namespace, the image)."""
    crds = sorted((REPO / "bundle" / "manifests").glob("*.yaml"))
    archives = ensure_images(["netperf"])
    with localcluster.running(crds=crds, nodes=0, real_node=True, pod_ingress_rate=pod_ingress_rate) as cl:
        assert cl.node is not None
        cl.node.import_images(archives.values())
        api = config.new_client_from_config(config_file=str(cl.kubeconfig))
        ns = f"bench-np-{uuid.uuid4().hex[:6]}"
        client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
        op = OperatorProcess(
            "operators.netperf", cl.kubeconfig, Path(tempfile.mkdtemp()) / "netperf.log"
        ).start()
        try:
            yield api, ns, next(iter(archives))
        finally:
            op.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--duration", type=int, default=2)
    parser.add_argument("--samples", type=int, default=1)
    args = parser.parse_args()
    with real_node_operator() as (api, ns, image):
        spec: dict[str, object] = {"placement": "SameNode", "image": image}
        spec |= {"duration": args.duration, "samples": args.samples}
        test_time = args.duration * args.samples
        overheads = []
        for i in range(args.runs):
            total = one_run(api, ns, f"b{i}", spec)
            overheads.append(total - test_time)
            print(
                f"[bench] run {i + 1}: creation -> Done {total:.2f}s, overhead {overheads[-1]:.2f}s",
                flush=True,
            )
    print(
        f"Netperf overhead (creation -> Done minus {args.samples} x {args.duration}s), {args.runs} runs: "
        f"min {min(overheads):.2f}s median {statistics.median(overheads):.2f}s max {max(overheads):.2f}s"
    )


if __name__ == "__main__":
    main()
