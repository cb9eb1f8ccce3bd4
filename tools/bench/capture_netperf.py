"""Capture real client termination messages for the parser's unit tests.

    sudo python -m tools.bench.capture_netperf [--out tests/unit/netperf/fixtures] [--only CASE ...]
    python -m tools.bench.capture_netperf --loopback [--only CASE ...]

Starts a local control plane with this machine as its real node (root; ``localcluster.node``),
imports the netperf image (``make images``), and runs exactly the pods the operator creates:
one server pod (``desired.server_pod``) and, per case, a client pod (``desired.client_pod``)
aimed at the server, at an address where nothing listens, or at a name that does not resolve.
What kubelet puts in each client's termination message is saved as the case's fixture.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config

from localcluster import cluster as localcluster
from localcluster import node as realnode
from localcluster.images import ensure_images
from operators.netperf import desired

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "capture"
CASES: dict[str, tuple[dict[str, Any], str | None]] = {
    # target None: the server pod's IP.
    "tcp_stream": ({"testType": "TCP_STREAM", "duration": 2, "samples": 3}, None),
    "tcp_rr": ({"testType": "TCP_RR", "duration": 2, "samples": 3}, None),
    "udp_stream": ({"testType": "UDP_STREAM", "duration": 2, "samples": 3, "messageSize": 1400}, None),
    "tcp_crr": ({"testType": "TCP_CRR", "duration": 2, "samples": 3}, None),
    "udp_rr": ({"testType": "UDP_RR", "duration": 2, "samples": 3}, None),
    "tcp_stream_parallel": ({"testType": "TCP_STREAM", "duration": 2, "samples": 3, "parallel": 4}, None),
    "no_server": ({"testType": "TCP_STREAM", "duration": 1, "samples": 2}, "10.123.255.254"),
    "unresolvable": ({"testType": "TCP_STREAM", "duration": 1, "samples": 2}, "no-such-host.invalid"),
}


def owner(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "app.example.com/v1alpha1",
        "kind": "Netperf",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": "capture", "generation": 1},
    }


def no_owner(pod: dict[str, Any]) -> dict[str, Any]:
    """There is no Netperf object here: drop the owner reference the builder sets."""
    pod["metadata"].pop("ownerReferences", None)
    return pod


def wait(what: str, probe: Any, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out waiting for {what}")


LOOPBACK_PORT = 12877  # not netserver's default: a netserver of the host may hold that


def loopback(out: Path, cases: dict[str, tuple[dict[str, Any], str | None]]) -> None:
    """Run each case's client command here, against a netserver started on 127.0.0.1."""
    server = subprocess.Popen(["netserver", "-D", "-p", str(LOOPBACK_PORT)])
    try:
        time.sleep(0.5)  # a setup step, not an assertion: netserver binds before the first case
        for name, (spec, target) in cases.items():
            pod = desired.client_pod(owner(name.replace("_", "-")), spec, target or "127.0.0.1")
            command = pod["spec"]["containers"][0]["command"]
            port = command.index(str(desired.CONTROL_PORT))
            command[port] = str(LOOPBACK_PORT)
            with tempfile.NamedTemporaryFile("r") as result:
                env = {**os.environ, **{e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}}
                env["NETPERF_RESULT"] = result.name
                code = subprocess.run(command, env=env, check=False).returncode
                text = Path(result.name).read_text()
            (out / f"{name}.txt").write_text(text)
            print(f"{name}: exit {code}, {len(text)} bytes -> {out / (name + '.txt')}", flush=True)
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    """``--loopback`` (no root, no cluster): the same client command (``desired.client_pod``'s) runs
    here against a local ``netserver`` on 127.0.0.1 (the host's netperf, which must be the image's
    version: Debian's 2.7.0), writing to a file instead of the termination log. The keyval format is
    netperf's own either way; only the figures differ (loopback, not a pod link).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "unit" / "netperf" / "fixtures")
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), help="cases to capture (default: all)")
    parser.add_argument("--loopback", action="store_true", help="run the client command here, no cluster")
    args = parser.parse_args()
    cases = {k: v for k, v in CASES.items() if not args.only or k in args.only}
    if args.loopback:
        args.out.mkdir(parents=True, exist_ok=True)
        loopback(args.out, cases)
        return
    if reason := realnode.unavailable_reason():
        raise SystemExit(f"cannot capture: {reason}")
    args.out.mkdir(parents=True, exist_ok=True)
    archives = ensure_images(["netperf"])
    image = next(iter(archives))
    with localcluster.running(nodes=0, real_node=True) as local:
        assert local.node is not None
        local.node.import_images(archives.values())
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(local.kubeconfig)))
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        wait("default ServiceAccount", lambda: core.list_namespaced_service_account(NAMESPACE).items)
        server = no_owner(desired.server_pod(owner("cap"), {"image": image}))
        core.create_namespaced_pod(NAMESPACE, server)

        def server_ip() -> str | None:
            pod = core.read_namespaced_pod(server["metadata"]["name"], NAMESPACE)
            ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
            return pod.status.pod_ip if ready else None

        ip = wait("the server pod Ready", server_ip)
        for name, (spec, target) in cases.items():
            pod = no_owner(
                desired.client_pod(owner(name.replace("_", "-")), {**spec, "image": image}, target or ip)
            )
            core.create_namespaced_pod(NAMESPACE, pod)

            def terminated(pod_name: str = pod["metadata"]["name"]) -> Any:
                statuses = core.read_namespaced_pod(pod_name, NAMESPACE).status.container_statuses or []
                return statuses and statuses[0].state.terminated

            state = wait(f"{name}'s client to finish", terminated)
            text = state.message or ""
            (args.out / f"{name}.txt").write_text(text)
            print(
                f"{name}: exit {state.exit_code}, {len(text)} bytes -> {args.out / (name + '.txt')}",
                flush=True,
            )


if __name__ == "__main__":
    main()
