"""Events under abuse: a failing object's retries, and one namespace flooding Events beside a quiet one.

    python -m tools.bench.events [--retries 200] [--flood 10000]

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from typing import Any

from kubernetes import client, config

from shared.client.events import EventRecorder
from shared.client.kube import KubeClient
from tools.bench.lib import control_plane, load, operator_kubeconfig, say


class Timed(KubeClient):
    """The real client, noting each write's method, namespace and when its answer came."""

    def __init__(self, cfg: client.Configuration) -> None:
        super().__init__(cfg)
        self.t0 = time.monotonic()
        self.writes: list[tuple[str, str, float]] = []

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
        answer = await super().request(method, path, body, **kw)
        self.writes.append((method, path.split("/")[4], time.monotonic() - self.t0))
        return answer


def about(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "demo.k8s.io/v1alpha1",
        "kind": "WebServer",
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())},
    }


async def retries(cfg: client.Configuration, core: client.CoreV1Api, namespace: str, n: int) -> None:
    kube = Timed(cfg)
    recorder = EventRecorder(kube, "bench-events")
    body = about(namespace, "failing")
    for _ in range(n):
        recorder.record(body, type="Warning", reason="ServiceConflict", message="service failing is not ours")
        await recorder.flush()
    await recorder.close()
    await kube.close()
    events = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.uid={body['metadata']['uid']}"
    )
    counts = [e.count for e in events.items]
    posts = sum(1 for m, _, _ in kube.writes if m == "POST")
    patches = sum(1 for m, _, _ in kube.writes if m == "PATCH")
    say(
        f"retries: {n} occurrences -> {len(counts)} Event(s) with count {counts}; "
        f"{posts} POST + {patches} PATCH; {recorder.filtered} dropped by the spam filter"
    )


async def flood(cfg: client.Configuration, core: client.CoreV1Api, quiet: str, noisy: str, n: int) -> None:
    kube = Timed(cfg)
    recorder = EventRecorder(kube, "bench-events")
    start = time.monotonic() - kube.t0
    recorder.record(about(quiet, "web"), type="Warning", reason="Failed", message="quota")
    for i in range(n):
        recorder.record(about(noisy, f"w{i}"), type="Warning", reason="Failed", message="quota")
    await recorder.flush()
    await recorder.close()
    await kube.close()
    (quiet_at,) = [(i, t) for i, (_, ns, t) in enumerate(kube.writes) if ns == quiet]
    noisy_posted = sum(1 for _, ns, _ in kube.writes if ns == noisy)
    on_server = len(core.list_namespaced_event(quiet).items)
    say(
        f"flood: quiet Event on the server after {quiet_at[1] - start:.3f} s, {quiet_at[0]} writes before it "
        f"({on_server} Event in the quiet namespace); noisy: {n} recorded, {noisy_posted} posted, "
        f"{recorder.dropped} dropped; drained in {kube.writes[-1][2] - start:.1f} s"
    )


def main() -> None:
    """Starts the local control plane (``tools.bench.lib.control_plane``, one kwok node) and runs
    the operators' Event recorder (``shared.client.events.EventRecorder``, defaults as
    shipped) in this process, as a user with the WebServer operator's CSV rules:

    - **retries**: one object reports the same Warning ``--retries`` times, each after the previous
      was written (a pass failing the same way on every retry). Reported: the Events on the API
      server about it, their count, the writes (POST, PATCH) it cost, the occurrences the spam
      filter dropped.
    - **flood**: the quiet namespace's Event is recorded, then ``--flood`` Events about distinct
      objects of the noisy namespace, all before the recorder writes once (as a burst of failures
      between two turns of the event loop). Reported: how long until the quiet Event was on the API
      server and how many writes went out before it, how many of the flood were dropped and how
      many posted, and how long the whole flood took to drain.
    """
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--retries", type=int, default=200, help="occurrences of the failing object's Warning")
    p.add_argument("--flood", type=int, default=10000, help="Events the noisy namespace records at once")
    args = p.parse_args()
    with control_plane(nodes=1, pods_per_node=110) as cl:
        path, _ = operator_kubeconfig(cl, "webserver")
        admin = config.new_client_from_config(config_file=str(cl.kubeconfig))
        core = client.CoreV1Api(admin)
        names = {}
        for role in ("failing", "quiet", "noisy"):
            names[role] = f"bench-{role}-{uuid.uuid4().hex[:5]}"
            core.create_namespace({"metadata": {"name": names[role]}})
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=cfg)  # type: ignore[no-untyped-call]
        say(load())
        asyncio.run(retries(cfg, core, names["failing"], args.retries))
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(path), client_configuration=cfg)  # type: ignore[no-untyped-call]
        asyncio.run(flood(cfg, core, names["quiet"], names["noisy"], args.flood))
        say(load())


if __name__ == "__main__":
    main()
