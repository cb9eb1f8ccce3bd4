"""Netperf's figures on the real node, per path and per number of parallel streams.

    sudo python -m tools.bench.netperf_paths [--samples 5] [--duration 3] [--parallel 1,2,4,8]

The set-up of ``tools.bench.netperf_overhead`` (control plane, this machine as its real node,
the Netperf operator from this tree), then one Netperf after the other, each to ``Done``:

- per path (``pod``, ``service``, ``host``): TCP_STREAM (bits/s) and TCP_CRR (connections/s),
  ``--samples`` x ``--duration`` s each, with the mean and its 95 % confidence interval from the
  status; the pod network's links are shaped to 2 Gbit/s as in the end-to-end suite, the host
  network is not;
- TCP_STREAM on the pod and host paths with ``parallel`` 1, 2, 4, 8 (``--parallel``): the sum
  and what each stream got (at most 24 // parallel samples: the CRD's bound on samples x parallel).
"""

from __future__ import annotations

import argparse
from typing import Any

from kubernetes import client

from tools.bench.netperf_overhead import GROUP, PLURAL, VERSION, one_run, real_node_operator

PATHS = ("pod", "service", "host")
MAX_OUTPUTS = 24  # samples x parallel (the CRD's rule)


def status(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    obj = client.CustomObjectsApi(api).get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
    return dict(obj["status"])


def figure(st: dict[str, Any]) -> tuple[float, float, float]:
    """The headline figure's mean and 95 % confidence interval."""
    stats = st.get("throughputBitsPerSec") or st["transactionsPerSec"]
    return stats["mean"], stats["ci95Low"], stats["ci95High"]


def row(label: str, st: dict[str, Any], scale: float, unit: str) -> str:
    mean, low, high = figure(st)
    return f"| {label} | {mean / scale:.3f} {unit} | {low / scale:.3f}-{high / scale:.3f} |"


def main() -> None:
    """Printed as Markdown rows for docs/benchmarks.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--duration", type=int, default=3)
    parser.add_argument("--parallel", default="1,2,4,8")
    args = parser.parse_args()
    rows = []
    with real_node_operator(pod_ingress_rate=2_000_000_000) as (api, ns, image):
        base: dict[str, Any] = {"placement": "SameNode", "image": image}
        base |= {"duration": args.duration, "samples": args.samples}
        for path in PATHS:
            for test_type, scale, unit in (("TCP_STREAM", 1e9, "Gbit/s"), ("TCP_CRR", 1, "conn/s")):
                name = f"{path}-{test_type.lower().replace('_', '-')}"
                one_run(api, ns, name, {**base, "path": path, "testType": test_type})
                rows.append(row(f"{test_type}, path {path}", status(api, ns, name), scale, unit))
                print(f"[bench] {rows[-1]}", flush=True)
        # The pod links are shaped (one stream fills them); the host network is not.
        for path in ("pod", "host"):
            for streams in (int(v) for v in args.parallel.split(",")):
                name = f"{path}-parallel-{streams}"
                # samples x parallel <= 24: every stream's output must fit the termination message.
                samples = min(args.samples, MAX_OUTPUTS // streams)
                spec = {
                    **base,
                    "path": path,
                    "testType": "TCP_STREAM",
                    "parallel": streams,
                    "samples": samples,
                }
                one_run(api, ns, name, spec)
                st = status(api, ns, name)
                each = ", ".join(f"{s['mean'] / 1e9:.3f}" for s in st.get("streams") or [])
                label = f"TCP_STREAM, path {path}, parallel {streams} ({samples} samples)"
                rows.append(row(label, st, 1e9, "Gbit/s") + f" {each} |")
                print(f"[bench] {rows[-1]}", flush=True)
    print(f"| what ({args.samples} x {args.duration} s) | mean | 95 % CI | streams (Gbit/s) |")
    print("| --- | --- | --- | --- |")
    for line in rows:
        print(line if line.count("|") == 5 else line + " |")


if __name__ == "__main__":
    main()
