"""Build (or find) the control-plane binaries: kube-apiserver, kube-controller-manager,
kube-scheduler, etcd and kwok; and, for a real worker node, kubelet and kube-proxy.

No registry reachable from our machines ships these binaries, but ``k8s.io/kubernetes`` is on
the Go module proxy. ``go install k8s.io/kubernetes/cmd/...@v`` is refused because the
kubernetes ``go.mod`` replaces its staging modules with local paths, so we generate a small
wrapper module that requires ``k8s.io/kubernetes`` and replaces every staging module with its
published ``v0.Y.Z`` tag (the list is read from the chosen release's own ``go.mod``, because it
changes between releases). etcd is built from the same module graph with a three-line ``main``,
so we get exactly the etcd version that kubernetes selected.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The one place the versions are pinned; override with the environment variables of the same
# name (``make test K8S_VERSION=v1.35.4``). 1.34 keeps the preinstalled kubectl (1.33 newest)
# within the supported one-minor skew.
DEFAULT_K8S_VERSION = "v1.34.4"
DEFAULT_KWOK_VERSION = "v0.7.0"

KUBE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ALL_COMPONENTS = (*KUBE_COMPONENTS, "etcd", "kwok")
# A real worker node (localcluster.node); built on request only: most runs need kwok alone.
NODE_COMPONENTS = ("kubelet", "kube-proxy")


def k8s_version() -> str:
    return os.environ.get("K8S_VERSION") or DEFAULT_K8S_VERSION


def kwok_version() -> str:
    return os.environ.get("KWOK_VERSION") or DEFAULT_KWOK_VERSION


def cache_root() -> Path:
    env = os.environ.get("LOCALCLUSTER_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "k8s-operators-py" / "testbin"


@dataclass(frozen=True)
class Binaries:
    """Paths of the five executables a local control plane needs (plus kubelet and kube-proxy
    when built with ``ensure_binaries(node=True)``)."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def missing(self, names: tuple[str, ...] = ALL_COMPONENTS) -> list[str]:
        return [n for n in names if not os.access(self.path(n), os.X_OK)]

    @property
    def has_node(self) -> bool:
        return not self.missing(NODE_COMPONENTS)


def log(msg: str) -> None:
    print(f"[testbin] {msg}", file=sys.stderr, flush=True)


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    # Never let go fetch a different toolchain: only modules come from the proxy.
    env["GOTOOLCHAIN"] = "local"
    env["CGO_ENABLED"] = "0"
    env.setdefault("GOFLAGS", "-buildvcs=false")
    return env


def run_go(args: list[str], cwd: Path, label: str, **extra_env: str) -> None:
    """Run a go command, printing a heartbeat with elapsed time and packages compiled."""
    start = time.monotonic()
    proc = subprocess.Popen(
        ["go", *args],
        cwd=cwd,
        env={**_go_env(), **extra_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(20):
            log(f"{label}: {len(lines)} packages so far, {time.monotonic() - start:.0f}s elapsed")

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip())
    rc = proc.wait()
    done.set()
    if rc != 0:
        tail = "\n".join(lines[-40:])
        raise RuntimeError(f"{label} failed (go {' '.join(args[:2])} exit {rc}):\n{tail}")
    log(f"{label}: done in {time.monotonic() - start:.0f}s")


def _staging_modules(kubernetes_gomod: str) -> list[str]:
    """Modules the kubernetes go.mod replaces with ``./staging/...`` paths."""
    return sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", kubernetes_gomod, re.M)))


def wrapper_gomod(version: str, kubernetes_gomod: str) -> str:
    """The go.mod of the wrapper module that makes ``k8s.io/kubernetes`` buildable."""
    staging_tag = "v0." + version.removeprefix("v").split(".", 1)[1]
    replaces = "\n".join(f"\t{m} => {m} {staging_tag}" for m in _staging_modules(kubernetes_gomod))
    return (
        "module localcluster/testbin\n\n"
        "go 1.24\n\n"
        f"require k8s.io/kubernetes {version}\n\n"
        f"replace (\n{replaces}\n)\n"
    )


TOOLS_GO = """//go:build tools

// Package tools pins the kubernetes commands so that go mod tidy keeps their dependencies
// (go.sum entries included: without them go build of kubelet fails on a missing checksum).
package tools

import (
\t_ "k8s.io/kubernetes/cmd/kube-apiserver"
\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"
\t_ "k8s.io/kubernetes/cmd/kube-proxy"
\t_ "k8s.io/kubernetes/cmd/kube-scheduler"
\t_ "k8s.io/kubernetes/cmd/kubelet"
)
"""

ETCD_MAIN = """// Command etcd is etcd's own main, at the version kubernetes selects.
package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""


def _ldflags(version: str) -> str:
    major, minor = version.removeprefix("v").split(".")[:2]
    build_date = "2000-01-01T00:00:00Z"  # fixed: keeps rebuilds byte-identical
    flags = ["-s", "-w"]
    # Without these the binaries report v0.0.0-master, which confuses kubectl's version
    # dispatcher and kwok.
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.buildDate={build_date}",
        ]
    return " ".join(flags)


def _prepare_wrapper(version: str) -> Path:
    """The wrapper module's source dir, with go.mod/go.sum resolved for every command we build."""
    src = cache_root() / f"src-kubernetes-{version}"
    src.mkdir(parents=True, exist_ok=True)
    log(f"fetching k8s.io/kubernetes {version} go.mod from the module proxy")
    info = subprocess.run(
        ["go", "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
        cwd=src,
        env=_go_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    gomod_path = Path(json.loads(info.stdout)["GoMod"])
    (src / "go.mod").write_text(wrapper_gomod(version, gomod_path.read_text()))
    (src / "tools.go").write_text(TOOLS_GO)
    (src / "cmd" / "etcd").mkdir(parents=True, exist_ok=True)
    (src / "cmd" / "etcd" / "main.go").write_text(ETCD_MAIN)
    run_go(["mod", "tidy"], src, "resolving module graph (go mod tidy)")
    return src


def _build_kube_commands(version: str, src: Path, out: Path, names: tuple[str, ...]) -> None:
    tags = "selinux,notest"
    for name in names:
        run_go(
            ["build", "-v", "-trimpath", "-tags", tags, "-ldflags", _ldflags(version),
             "-o", str(out / name), f"k8s.io/kubernetes/cmd/{name}"],
            src,
            f"building {name} {version}",
        )  # fmt: skip


def _build_kube(version: str, out: Path) -> None:
    src = _prepare_wrapper(version)
    _build_kube_commands(version, src, out, KUBE_COMPONENTS)
    run_go(
        ["build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"), "./cmd/etcd"],
        src,
        "building etcd (version selected by kubernetes)",
    )


def _build_node(version: str, out: Path) -> None:
    _build_kube_commands(version, _prepare_wrapper(version), out, NODE_COMPONENTS)


def _build_kwok(version: str, out: Path) -> None:
    gobin = out / ".gobin"
    gobin.mkdir(parents=True, exist_ok=True)
    # go install of a versioned package must run outside any module; out's parent is not one.
    run_go(
        ["install", "-v", "-trimpath", "-ldflags", "-s -w", f"sigs.k8s.io/kwok/cmd/kwok@{version}"],
        out.parent,
        f"building kwok {version}",
        GOBIN=str(gobin),
    )
    shutil.move(str(gobin / "kwok"), str(out / "kwok"))
    shutil.rmtree(gobin, ignore_errors=True)


def _ensure_entry(
    directory: Path, names: tuple[str, ...], build: Callable[[str, Path], None], ver: str
) -> None:
    if all(os.access(directory / n, os.X_OK) for n in names):
        return
    # Build into a scratch directory and rename: an interrupted build never leaves a
    # half-populated cache entry that a later run would trust.
    tmp = directory.with_name(directory.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"building {', '.join(names)} {ver} into {directory} (first time only; cold builds take a while)")
    build(ver, tmp)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (across processes) while the block runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_binaries(node: bool = False) -> Binaries:
    """Return the binaries, building whatever the version-keyed cache lacks.

    ``node=True`` adds kubelet and kube-proxy (a real worker node, ``localcluster.node``).
    """
    wanted = (*ALL_COMPONENTS, *NODE_COMPONENTS) if node else ALL_COMPONENTS
    user_dir = os.environ.get("LOCALCLUSTER_BIN_DIR")
    if user_dir:
        bins = Binaries(Path(user_dir))
        if missing := bins.missing(wanted):
            raise RuntimeError(f"LOCALCLUSTER_BIN_DIR={user_dir} lacks executables: {', '.join(missing)}")
        log(f"using binaries from LOCALCLUSTER_BIN_DIR={user_dir}")
        return bins

    version, kwok = k8s_version(), kwok_version()
    kube_dir = cache_root() / f"kubernetes-{version}"
    node_dir = cache_root() / f"kubernetes-node-{version}"
    kwok_dir = cache_root() / f"kwok-{kwok}"
    start = time.monotonic()
    entries: list[tuple[Path, tuple[str, ...], Callable[[str, Path], None], str]] = [
        (kube_dir, (*KUBE_COMPONENTS, "etcd"), _build_kube, version),
        (kwok_dir, ("kwok",), _build_kwok, kwok),
    ]
    if node:
        entries.append((node_dir, NODE_COMPONENTS, _build_node, version))
    combined = cache_root() / f"bin-{version}-kwok-{kwok}"
    # One process builds and links at a time: two builders (suites started side by side on a
    # new machine) would share, and delete, each other's ``.partial`` directories.
    with file_lock(combined.with_name(combined.name + ".lock")):
        for directory, names, build, ver in entries:
            _ensure_entry(directory, names, build, ver)
        combined.mkdir(parents=True, exist_ok=True)
        for name in wanted:
            link = combined / name
            home = kwok_dir if name == "kwok" else node_dir if name in NODE_COMPONENTS else kube_dir
            if not link.exists():
                link.unlink(missing_ok=True)  # a dangling link left by a removed cache entry
                link.symlink_to(home / name)
    bins = Binaries(combined)
    if missing := bins.missing(wanted):
        raise RuntimeError(f"binaries missing after build: {', '.join(missing)}")
    log(f"binaries ready in {combined} ({time.monotonic() - start:.1f}s)")
    return bins


def main() -> None:
    """Binaries are cached outside the repository, keyed by version, under
    ``$LOCALCLUSTER_CACHE`` (default ``~/.cache/k8s-operators-py/testbin``); a second call returns
    in well under a second. kubelet and kube-proxy (only needed by ``localcluster.node``) have
    their own entry, ``kubernetes-node-<version>``, built from the same wrapper module and Go caches
    with the same version stamp, so adding them never invalidates the control-plane entry.
    ``LOCALCLUSTER_BIN_DIR`` points at a directory of binaries a user already has and skips
    building altogether.
    """
    bins = ensure_binaries(node=os.geteuid() == 0)
    print(bins.directory)


if __name__ == "__main__":
    main()
