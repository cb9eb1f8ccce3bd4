"""The floor of a TDSet boundary: the same writes as the operator's flips, with no operator.

    python -m tools.bench.flip_floor --kubeconfig K --namespace NS --targets T.json --replicas 2
                                     [--at UNIX_TIME] [--connections 1000]

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from localcluster.binaries import run_go
from localcluster.gotools import cache_root
from shared.client.kube import CONNECTIONS
from tools.bench.lib import percentile

GO_MODULE = Path(__file__).resolve().parent / "go" / "flipfloor"
WARM_UP = 4.0  # seconds before the instant that the connections are opened


def go_binary() -> Path:
    """The Go floor client, built from ``GO_MODULE`` unless the cache has this version of it."""
    sources = [GO_MODULE / "go.mod", GO_MODULE / "go.sum", *sorted(GO_MODULE.glob("*.go"))]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    target = cache_root() / f"flipfloor-{digest}" / "flipfloor"
    if os.access(target, os.X_OK):
        return target
    partial = target.parent.with_name(target.parent.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    run_go(
        ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(partial / "flipfloor"), "."],
        GO_MODULE,
        "building flipfloor",
    )
    shutil.rmtree(target.parent, ignore_errors=True)
    partial.rename(target.parent)
    return target


async def flip_all(args: argparse.Namespace) -> dict[str, object]:
    from shared.api.errors import ApiError
    from shared.client.kube import KubeClient

    uids: dict[str, str] = json.loads(Path(args.targets).read_text())
    connections = args.connections
    kube = KubeClient(qps=0, connections=connections)
    base = f"/apis/apps/v1/namespaces/{args.namespace}/deployments"
    try:
        await kube.load()
        # The pool's connections up (TLS done) shortly before the instant, within aiohttp's
        # keep-alive of 15 s: as many GETs at once as there are connections.
        if args.at:
            await asyncio.sleep(max(0.0, args.at - WARM_UP - time.time()))
        await asyncio.gather(*(kube.get(base, params={"limit": "1"}) for _ in range(connections)))
        if args.at:
            await asyncio.sleep(max(0.0, args.at - time.time()))
        late = time.time() - args.at if args.at else 0.0
        start = time.monotonic()
        latencies: list[float] = []
        errors: list[str] = []

        async def flip(name: str, uid: str) -> None:
            t0 = time.monotonic()
            try:
                await kube.merge_patch(
                    f"{base}/{name}/scale", {"metadata": {"uid": uid}, "spec": {"replicas": args.replicas}}
                )
            except ApiError as exc:
                errors.append(str(exc))
            latencies.append(time.monotonic() - t0)

        await asyncio.gather(*(flip(name, uid) for name, uid in uids.items()))
        took = time.monotonic() - start
    finally:
        await kube.close()
    return {
        "client": f"python (shared.client.kube, {connections} connections)",
        "sent": len(uids),
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "late_start_s": late,
        "took_s": took,
        "latency_p50": percentile(latencies, 50),
        "latency_p99": percentile(latencies, 99),
    }


def main() -> None:
    """What ``tools.bench.tdset_boundary`` ``--floor python`` runs at each boundary, in a process of
    its own (as the operator is): the client waits until ``--at``, then PATCHes ``/scale`` of every
    Deployment in ``--targets`` (a JSON object, name -> UID) all at once, the body the operator's
    flip sends (``{"metadata": {"uid": ...}, "spec": {"replicas": N}}``, a merge patch with the UID
    as the precondition), and prints one JSON line: how late it started, how long the writes took,
    their latencies and errors. The client is the operator's own
    (``shared.client.kube.KubeClient``, no client-side rate limit) with ``--connections``
    in its pool (default: the operator's 100), every one of them opened by a GET just before the
    instant, as a busy operator's are: a connection per write (``--connections 1000``) made the
    API server and the client do 1000 TLS handshakes at the boundary: 17.9 s for the 1000 writes on
    the loaded machine, against 12.6 s with 100 warm ones at the next boundary (docs/benchmarks.md).

    ``--floor go`` runs the Go equivalent instead: ``tools/bench/go/flipfloor`` (client-go, HTTP/2,
    QPS -1, all writes at once unless its ``--concurrency`` bounds them), built by
    ``go_binary`` into ``~/.cache/k8s-operators-py/tools/flipfloor-<hash>/`` (``$GOTOOLS_CACHE``
    overrides) from its pinned ``go.mod``/``go.sum``; never part of ``make test``.
    """
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--targets", required=True, help="JSON file: Deployment name -> UID")
    parser.add_argument("--replicas", type=int, required=True)
    parser.add_argument("--at", type=float, default=0.0, help="Unix time to send the writes at (0: now)")
    parser.add_argument(
        "--connections", type=int, default=CONNECTIONS, help="the client's pool, opened first"
    )
    args = parser.parse_args()
    os.environ["KUBECONFIG"] = args.kubeconfig
    print(json.dumps(asyncio.run(flip_all(args))), flush=True)


if __name__ == "__main__":
    main()
