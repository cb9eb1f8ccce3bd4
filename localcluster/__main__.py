"""Command line of the local control plane.

    python -m localcluster build [--node]        build/reuse the binaries, print their directory
                                                 (--node: kubelet and kube-proxy too; default
                                                 when running as root)
    python -m localcluster up [--workdir D]      start the control plane, wait for Ctrl-C
    python -m localcluster run --operators DIR   the above, plus CRDs and every operator package
                                                 in DIR that has a __main__.py (``make run``)

``up``/``run --real-node`` add this machine as a real worker node (containerd, kubelet,
kube-proxy; root only, else the kwok nodes alone with a log line saying why);
``--image-archive X.tar`` (repeatable) imports an OCI/docker image archive into it.

``run`` honours ``USE_EXISTING_CLUSTER=1``: then nothing is started, the CRDs go to the cluster
of the current kubeconfig and the operators run against it.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from localcluster import netperf_pods
from localcluster.binaries import ensure_binaries
from localcluster.cluster import DEFAULT_NODES, LocalCluster, free_port, in_use_kubeconfig, log, start


def _operators(directory: Path) -> list[str]:
    return sorted(p.parent.name for p in directory.glob("*/__main__.py"))


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handler(signum: int, _: FrameType | None) -> None:
        log(f"got {signal.Signals(signum).name}, shutting down")
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    while not stop.wait(1):
        pass


def _print_howto(kubeconfig: Path, operators: list[str]) -> None:
    print(
        "\n"
        "Cluster is up. In another shell:\n"
        f"  export KUBECONFIG={kubeconfig}\n"
        "  kubectl get nodes\n"
        "  kubectl get crds\n"
        + "".join(f"  kubectl get {op} -A\n" for op in operators)
        + f"Operators running: {', '.join(operators) if operators else 'none yet'}\n"
        "Press Ctrl-C to stop everything.\n",
        flush=True,
    )


def _start_netperf_runner(kubeconfig: Path) -> netperf_pods.NetperfPodRunner | None:
    """Netperf pods run for real here when this machine can (see localcluster.netperf_pods)."""
    reason = netperf_pods.unavailable_reason()
    if reason:
        log(
            f"netperf pods will NOT run: {reason}. Netperfs will end in Error (timeout) "
            "instead of showing a measured number."
        )
        return None
    from kubernetes import config

    log("netperf pods run for real in network namespaces on this machine (development aid)")
    return netperf_pods.NetperfPodRunner(config.new_client_from_config(config_file=str(kubeconfig))).start()


def _real_node_possible(args: argparse.Namespace) -> bool:
    """--real-node, unless this machine cannot: then say why and go on with kwok nodes only."""
    if not args.real_node:
        return False
    from localcluster import node

    if reason := node.unavailable_reason():
        log(f"real node NOT started: {reason}; continuing with the {args.nodes} kwok nodes only")
        return False
    return True


def _import_images(local: LocalCluster, archives: list[Path]) -> None:
    """The busybox image (always: handy for trying pods) and the archives given, into the node."""
    if local.node is None:
        if archives:
            log("--image-archive ignored: no real node to import into")
        return
    local.node.busybox_image()
    local.node.import_images(archives)


def cmd_up(args: argparse.Namespace) -> int:
    crds = [Path(p) for pattern in args.crds for p in sorted(glob.glob(pattern))]
    operators = _operators(Path(args.operators)) if args.operators else []
    local: LocalCluster | None = None
    if os.environ.get("USE_EXISTING_CLUSTER") == "1":
        path = in_use_kubeconfig()
        if not path:
            log("USE_EXISTING_CLUSTER=1 but no kubeconfig ($KUBECONFIG or ~/.kube/config)")
            return 2
        kubeconfig = Path(path)
        if crds:
            from localcluster import kube

            api = kube.Client(kubeconfig)
            api.wait_crd_established([n for p in crds for n in api.apply_crd_file(p)], 60)
    else:
        workdir = Path(args.workdir).resolve()
        # A fresh cluster each time: old etcd data would not match the new certificates.
        shutil.rmtree(workdir, ignore_errors=True)
        local = start(workdir=workdir, nodes=args.nodes, crds=crds, real_node=_real_node_possible(args))
        kubeconfig = local.kubeconfig
        _import_images(local, [Path(a) for a in args.image_archive])

    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    runner = None
    try:
        if "netperf" in operators and local is not None:
            runner = _start_netperf_runner(kubeconfig)
        for op in operators:
            env = {
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "METRICS_PORT": str(free_port()),
                "HEALTH_PORT": str(free_port()),
            }
            log(f"starting operator {op} (metrics :{env['METRICS_PORT']}, probes :{env['HEALTH_PORT']})")
            procs.append(
                (op, subprocess.Popen([sys.executable, "-m", f"{Path(args.operators).name}.{op}"], env=env))
            )
        _print_howto(kubeconfig, operators)
        _wait_for_signal()
    finally:
        if runner is not None:
            runner.stop()
        for op, proc in reversed(procs):
            log(f"stopping operator {op} (pid {proc.pid})")
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if local is not None:
            local.down()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="localcluster", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build or reuse the control-plane binaries")
    build.add_argument(
        "--node",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also kubelet and kube-proxy for a real worker node (default: only when running as root)",
    )
    for name in ("up", "run"):
        p = sub.add_parser(name, help="start the control plane and wait for Ctrl-C")
        p.add_argument(
            "--workdir", default=".localcluster", help="state, logs and kubeconfig (default: %(default)s)"
        )
        p.add_argument(
            "--nodes", type=int, default=DEFAULT_NODES, help="kwok fake nodes (default: %(default)s)"
        )
        p.add_argument("--crds", action="append", default=[], help="glob of CRD YAML files to install")
        p.add_argument(
            "--real-node",
            action="store_true",
            help="also run this machine as a real worker node (root; containerd, kubelet, kube-proxy)",
        )
        p.add_argument(
            "--image-archive",
            action="append",
            default=[],
            help="OCI/docker image archive to import into the real node (repeatable)",
        )
        p.add_argument(
            "--operators", default="" if name == "up" else "operators", help="operator packages dir"
        )
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    if args.command == "build":
        node = args.node if args.node is not None else os.geteuid() == 0
        print(ensure_binaries(node=node).directory)
        log(f"done in {time.monotonic() - t0:.1f}s")
        return 0
    return cmd_up(args)


if __name__ == "__main__":
    sys.exit(main())
