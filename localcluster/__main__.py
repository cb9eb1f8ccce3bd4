"""Command line of the local control plane.

    python -m localcluster build [--node]        build/reuse the binaries, print their directory
                                                 (--node: kubelet and kube-proxy too; default
                                                 when running as root)
    python -m localcluster up [--workdir D]      start the control plane, wait for Ctrl-C
    python -m localcluster run --operators DIR   the above, plus CRDs and every operator package
                                                 in DIR that has a __main__.py (``make run``)

What it does and reports, in detail: the docstring of ``main``.
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

from localcluster.binaries import ensure_binaries
from localcluster.cluster import DEFAULT_NODES, LocalCluster, in_use_kubeconfig, start
from localcluster.process import free_port, log


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


def _real_node_possible(args: argparse.Namespace) -> bool:
    """--real-node (``run``: by default), unless this machine cannot: then say why, use kwok."""
    if args.real_node is False or (args.real_node is None and args.command != "run"):
        return False
    from localcluster import node

    if reason := node.unavailable_reason():
        log(
            f"real node NOT started: {reason}; continuing with kwok nodes only "
            "(pods there only pretend to run: nothing serves, Netperfs end in Error)"
        )
        return False
    log("this machine runs as a real worker node: pods really run (images from `make images`)")
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
        real = _real_node_possible(args)
        if real and args.nodes is None:
            args.nodes = 0  # pods of the examples must land on the node that runs them
        nodes = DEFAULT_NODES if args.nodes is None else args.nodes
        local = start(workdir=workdir, nodes=nodes, crds=crds, real_node=real)
        kubeconfig = local.kubeconfig
        archives = [Path(a) for a in args.image_archive]
        if real and args.command == "run":
            from localcluster.images import ensure_images

            log("building (or reusing) every image of the project for the real node (make images)")
            archives += ensure_images().values()
        _import_images(local, archives)

    procs: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        for op in operators:
            env = {
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "METRICS_PORT": str(free_port()),
                "HEALTH_PORT": str(free_port()),
            }
            ports = f"metrics :{env['METRICS_PORT']} (HTTPS), probes :{env['HEALTH_PORT']}"
            log(f"starting operator {op} ({ports})")
            procs.append(
                (op, subprocess.Popen([sys.executable, "-m", f"{Path(args.operators).name}.{op}"], env=env))
            )
        _print_howto(kubeconfig, operators)
        _wait_for_signal()
    finally:
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
    """``run`` (``make run``) adds this machine as a real worker node when it can (root: containerd,
    kubelet, kube-proxy), with no kwok nodes unless ``--nodes`` asks, and imports every image
    ``make images`` builds, so the examples really serve and measure; otherwise it says why and
    uses kwok nodes. ``up --real-node`` does the same for ``up``; ``--image-archive X.tar``
    (repeatable) imports an OCI/docker image archive into the node.

    ``run`` honours ``USE_EXISTING_CLUSTER=1``: then nothing is started, the CRDs go to the cluster
    of the current kubeconfig and the operators run against it.
    """
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
            "--nodes",
            type=int,
            default=None,
            help=f"kwok fake nodes (default: {DEFAULT_NODES}, or 0 next to a real node)",
        )
        p.add_argument("--crds", action="append", default=[], help="glob of CRD YAML files to install")
        p.add_argument(
            "--real-node",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="run this machine as a real worker node (root; containerd, kubelet, kube-proxy; "
            "default: for `run` when possible, never for `up`)",
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
