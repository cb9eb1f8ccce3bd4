"""Capture real client termination messages for the parser's unit tests.

    sudo python -m tools.capture_netperf [--out tests/unit/netperf/fixtures]

Builds the client pod the operator would create for each test type, runs its container
command exactly as written (the sh loop around netperf) in a network namespace joined by a
veth pair to one running ``netserver -D``, and saves what the pod's termination message would
hold. Error cases are captured the same way: no netserver at the address, an unresolvable
host. Needs root, iproute2 and Debian's netperf (``make system-deps``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from localcluster.netperf_pods import add_netns, container_argv, container_env, unavailable_reason, wire
from operators.netperf import desired

REPO = Path(__file__).resolve().parents[1]
SERVER_IP, CLIENT_IP = "10.213.0.1", "10.213.0.2"
OWNER = {
    "apiVersion": "app.example.com/v1alpha1",
    "kind": "Netperf",
    "metadata": {"name": "cap", "uid": "u", "generation": 1},
}
CASES = {
    "tcp_stream": ({"testType": "TCP_STREAM", "duration": 2, "samples": 3}, SERVER_IP),
    "tcp_rr": ({"testType": "TCP_RR", "duration": 2, "samples": 3}, SERVER_IP),
    "udp_stream": ({"testType": "UDP_STREAM", "duration": 2, "samples": 3, "messageSize": 1400}, SERVER_IP),
    "no_server": ({"testType": "TCP_STREAM", "duration": 1, "samples": 2}, "10.213.0.9"),
    "unresolvable": ({"testType": "TCP_STREAM", "duration": 1, "samples": 2}, "no-such-host.invalid"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "unit" / "netperf" / "fixtures")
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        raise SystemExit(f"cannot capture: {reason}")
    args.out.mkdir(parents=True, exist_ok=True)
    server_ns, client_ns = "capture-netperf-s", "capture-netperf-c"
    for ns in (server_ns, client_ns):
        add_netns(ns)
    wire(server_ns, SERVER_IP, client_ns, CLIENT_IP)
    server = subprocess.Popen(["ip", "netns", "exec", server_ns, "netserver", "-D", "-p", "12865"])
    try:
        for name, (spec, target) in CASES.items():
            pod = desired.client_pod(
                {**OWNER, "metadata": {**OWNER["metadata"], "namespace": "x"}}, spec, target
            )
            container = pod["spec"]["containers"][0]
            fd, result = tempfile.mkstemp()
            os.close(fd)
            proc = subprocess.run(
                ["ip", "netns", "exec", client_ns, *container_argv(container)],
                env=container_env(container, {"NETPERF_RESULT": result}),
                check=False,
            )
            text = Path(result).read_text()
            os.unlink(result)
            (args.out / f"{name}.txt").write_text(text)
            print(
                f"{name}: exit {proc.returncode}, {len(text)} bytes -> {args.out / (name + '.txt')}",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(10)
        for ns in (server_ns, client_ns):
            subprocess.run(["ip", "netns", "delete", ns], check=False)


if __name__ == "__main__":
    main()
