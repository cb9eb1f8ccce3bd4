"""Lag from a TDSet window boundary to the Deployment's new replica count.

    python -m tools.bench_tdset_boundary [--tdsets 10] [--boundaries 3]

Starts the local control plane with the bundle's CRDs and one TDSet operator whose clock is
shifted (``OPERATOR_CLOCK_OFFSET``) so that the first boundary is ~15 s after set-up. It
creates ``--tdsets`` TDSets whose windows alternate between 4 and 2 replicas every minute, so
every TDSet flips at each of ``--boundaries`` whole minutes, all at the same instant. A watch
on the Deployments records when each one's ``spec.replicas`` changes; the lag is that instant
(on the operator's shifted clock) minus the boundary. It includes the watch's delivery time,
i.e. it is what a client watching the Deployment sees.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch

from localcluster import cluster as localcluster
from shared.clock import OFFSET_ENV
from tests.integration.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[1]
UTC = datetime.UTC


def spec_flipping_at(first: datetime.datetime, boundaries: int) -> dict[str, Any]:
    """Windows of one minute each from ``first``: 4 replicas, then 2 (default), alternating."""
    windows = []
    for i in range(0, boundaries + 1, 2):
        start = first + datetime.timedelta(minutes=i)
        end = start + datetime.timedelta(minutes=1)
        windows.append(
            {
                "startTime": start.hour,
                "startMinute": start.minute,
                "endTime": end.hour,
                "endMinute": end.minute,
                "replica": 4,
            }
        )
    return {
        "container": {"image": "nginx:1.27", "port": 80},
        "schedulingConfig": windows,
        "defaultReplica": 2,
        "intervalMint": 60,
    }


class ReplicaWatch(threading.Thread):
    """Records (shifted wall time, name, replicas) whenever a Deployment's spec.replicas changes."""

    def __init__(self, api: client.ApiClient, namespace: str, offset: float) -> None:
        super().__init__(daemon=True)
        self.apps, self.namespace, self.offset = client.AppsV1Api(api), namespace, offset
        self.changes: list[tuple[datetime.datetime, str, int]] = []
        self.last: dict[str, int] = {}
        self.watch = watch.Watch()
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            for event in self.watch.stream(self.apps.list_namespaced_deployment, self.namespace):
                seen = datetime.datetime.now(UTC) + datetime.timedelta(seconds=self.offset)
                dep = event["object"]
                name, replicas = dep.metadata.name, dep.spec.replicas
                if self.last.get(name) != replicas:
                    self.last[name] = replicas
                    self.changes.append((seen, name, replicas))
        except Exception:
            if not self.stopping.is_set():  # the cluster going away at the end is expected
                raise

    def stop(self) -> None:
        self.stopping.set()
        self.watch.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tdsets", type=int, default=10, help="TDSets flipping at the same instant")
    parser.add_argument("--boundaries", type=int, default=3, help="consecutive minute boundaries")
    args = parser.parse_args()
    crds = sorted((REPO / "bundle" / "manifests").glob("*.yaml"))
    t0 = time.monotonic()
    with localcluster.running(crds=crds) as cl:
        api = config.new_client_from_config(config_file=str(cl.kubeconfig))
        core, co = client.CoreV1Api(api), client.CustomObjectsApi(api)
        ns = f"bench-tds-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": ns}})
        # Shift the operator's clock to hh:mm:15 now, so hh:(mm+1):00 is ~45 s away, minus start-up.
        now = datetime.datetime.now(UTC)
        offset = (now.replace(second=15, microsecond=0) - now).total_seconds()
        log = Path(tempfile.mkdtemp()) / "tdset.log"
        print(f"[bench] starting the TDSet operator (clock offset {offset:+.1f}s)", flush=True)
        op = OperatorProcess(
            "operators.tdset", cl.kubeconfig, log, namespaces=ns, env={OFFSET_ENV: f"{offset:.6f}"}
        ).start()
        try:
            shifted = datetime.datetime.now(UTC) + datetime.timedelta(seconds=offset)
            first = (shifted + datetime.timedelta(seconds=75)).replace(second=0, microsecond=0)
            spec = spec_flipping_at(first, args.boundaries)
            watcher = ReplicaWatch(api, ns, offset)
            watcher.start()
            for i in range(args.tdsets):
                body = {
                    "apiVersion": "schedule.rs/v1",
                    "kind": "TDSet",
                    "metadata": {"name": f"t{i}"},
                    "spec": spec,
                }
                co.create_namespaced_custom_object("schedule.rs", "v1", ns, "tdsets", body)
            print(
                f"[bench] {args.tdsets} TDSets created; {args.boundaries} boundaries from "
                f"{first:%H:%M}:00 (operator clock); log {log}",
                flush=True,
            )
            lags: list[float] = []
            for b in range(args.boundaries):
                boundary = first + datetime.timedelta(minutes=b)
                want = 4 if b % 2 == 0 else 2
                deadline = time.monotonic() + (boundary - shifted).total_seconds() + 120
                while True:
                    flips = [
                        (seen - boundary).total_seconds()
                        for seen, _, replicas in list(watcher.changes)
                        if seen >= boundary - datetime.timedelta(seconds=1) and replicas == want
                    ]
                    if len(flips) >= args.tdsets or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                if len(flips) < args.tdsets:
                    raise SystemExit(f"only {len(flips)} of {args.tdsets} Deployments flipped at {boundary}")
                lags.extend(flips)
                print(
                    f"[bench] boundary {boundary:%H:%M:%S} -> {want} replicas: lag min {min(flips):.3f}s "
                    f"median {statistics.median(flips):.3f}s max {max(flips):.3f}s "
                    f"({time.monotonic() - t0:.0f}s elapsed)",
                    flush=True,
                )
            early = [lag for lag in lags if lag < 0]
            print(
                f"boundary -> Deployment replicas, {len(lags)} flips ({args.tdsets} TDSets x "
                f"{args.boundaries} boundaries): min {min(lags):.3f}s median {statistics.median(lags):.3f}s "
                f"max {max(lags):.3f}s; early flips: {len(early)}"
            )
            watcher.stop()
        finally:
            op.stop()


if __name__ == "__main__":
    main()
