"""Build (or reuse) the OLM tools from pinned Go modules: ``opm``, ``operator-sdk`` and OLM v0.

    python -m localcluster.gotools                 build opm and operator-sdk, print their paths
    python -m localcluster.gotools olm grpc-health-probe
    python -m localcluster.gotools kstatus robfigcron registry
    python -m localcluster.gotools --which opm     print only that path

What it does and reports, in detail: the docstring of ``main``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from localcluster.binaries import _go_env, file_lock, log, run_go

REPO = Path(__file__).resolve().parents[1]
MODULES = REPO / "localcluster" / "go"
_OLM = "github.com/operator-framework/operator-lifecycle-manager"
# tool -> {binary: package}; a tool is one wrapper module and one cache entry.
TOOLS: dict[str, dict[str, str]] = {
    "opm": {"opm": "github.com/operator-framework/operator-registry/cmd/opm"},
    "operator-sdk": {"operator-sdk": "github.com/operator-framework/operator-sdk/cmd/operator-sdk"},
    "olm": {
        "olm": f"{_OLM}/cmd/olm",
        "catalog": f"{_OLM}/cmd/catalog",
        "cpb": f"{_OLM}/util/cpb",
    },
    "grpc-health-probe": {"grpc_health_probe": "github.com/grpc-ecosystem/grpc-health-probe"},
    "kstatus": {"kstatus": "."},  # main.go in the wrapper module itself
    "robfigcron": {"robfigcron": "."},
    "syft": {"syft": "github.com/anchore/syft/cmd/syft"},
    "cosign": {"cosign": "github.com/sigstore/cosign/v2/cmd/cosign"},
    "preflight": {"preflight": "github.com/redhat-openshift-ecosystem/openshift-preflight/cmd/preflight"},
    "registry": {"registry": "github.com/distribution/distribution/v3/cmd/registry"},
    "imagecopy": {"imagecopy": "."},  # main.go: containers/image's copy under a signature policy
}
DEFAULT_TOOLS = ("opm", "operator-sdk")
# Files copied from a tool's module into its cache entry, so they match the binaries' version.
_MODULE_FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "olm": (
        "github.com/operator-framework/operator-lifecycle-manager",
        (
            "deploy/upstream/quickstart/crds.yaml",
            # OLMConfig is not in the quickstart file; olm-operator needs its CRD.
            "deploy/chart/crds/0000_50_olm_00-olmconfigs.crd.yaml",
        ),
    ),
}
# OLM keeps its catalog in SQLite (json1); everything builds without cgo.
_TAGS = {"olm": "json1,containers_image_openpgp"}


def cache_root() -> Path:
    env = os.environ.get("GOTOOLS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "k8s-operators-py" / "tools"


def module_dir(tool: str) -> Path:
    """The pinned wrapper module of ``tool`` (its go.mod names the version)."""
    return MODULES / tool


def ensure(tool: str) -> Path:
    """The path of ``tool``'s main binary, built from ``localcluster/go/<tool>`` when the cache lacks it.

    Other binaries of the same tool (OLM's ``catalog``) sit in the same directory.
    """
    module = module_dir(tool)
    # Our own Go sources are part of what is built; tools.go only names the pinned packages.
    sources = [module / "go.mod", module / "go.sum"]
    sources += sorted(p for p in module.glob("*.go") if p.name != "tools.go")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:12]
    target = cache_root() / f"{tool}-{digest}" / next(iter(TOOLS[tool]))
    if _built(tool, target):
        return target
    with _locked(target.parent):
        # Another process (a parallel test worker, make) may have built it while we waited.
        if not _built(tool, target):
            _build(tool, module, target)
    return target


def _built(tool: str, target: Path) -> bool:
    return all(os.access(target.parent / name, os.X_OK) for name in TOOLS[tool])


def _locked(directory: Path) -> contextlib.AbstractContextManager[None]:
    """One build of a tool at a time: two would share (and delete) one ``.partial`` directory."""
    return file_lock(directory.with_name(directory.name + ".lock"))


def _build(tool: str, module: Path, target: Path) -> None:
    partial = target.parent.with_name(target.parent.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    log(f"building {tool} from {module.relative_to(REPO)} (first time only; a cold build takes minutes)")
    start = time.monotonic()
    for name, package in TOOLS[tool].items():
        run_go(
            [
                "build",
                "-v",
                "-tags",
                _TAGS.get(tool, "containers_image_openpgp"),
                "-trimpath",
                "-ldflags",
                "-s -w",
                "-o",
                str(partial / name),
                package,
            ],
            module,
            f"building {name}",
        )
    if tool in _MODULE_FILES:
        _copy_module_files(tool, module, partial)
    shutil.rmtree(target.parent, ignore_errors=True)
    partial.rename(target.parent)
    log(f"{tool} ready in {target.parent} ({time.monotonic() - start:.0f}s)")


def _copy_module_files(tool: str, module: Path, into: Path) -> None:
    path, files = _MODULE_FILES[tool]
    out = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Dir}}", path],
        cwd=module,
        env={**_go_env()},
        capture_output=True,
        text=True,
        check=True,
    )
    source = Path(out.stdout.strip())
    (into / "crds").mkdir()
    for rel in files:
        shutil.copyfile(source / rel, into / "crds" / Path(rel).name)


def module_file(tool: str, name: str) -> Path:
    """A file ``_MODULE_FILES`` copied next to ``tool``'s binaries (builds when missing)."""
    return ensure(tool).parent / "crds" / name


def main(argv: list[str] | None = None) -> int:
    """``olm`` is OLM v0 itself: the ``olm`` and ``catalog`` managers and ``cpb`` (the copy tool its
    bundle-unpack Jobs run), built into one cache entry together with the CRDs of the same module
    version (``crds/``). ``grpc-health-probe`` is what upstream's opm image carries for OLM's
    registry-pod probes. Only the OLM install tests need those two (``make olm``). ``kstatus`` is
    our own small command (``localcluster/go/kstatus/main.go``) around ``sigs.k8s.io/cli-utils``'
    kstatus, the readiness rules of Flux, Helm 4 ``--wait``, kpt and Config Sync; the tests of our
    status conditions run it (``make kstatus``). ``robfigcron`` (``localcluster/go/robfigcron/main.go``)
    prints the next run times Kubernetes CronJob's own schedule parser (``github.com/robfig/cron/v3``)
    computes; the differential test of our cron module compares with it (``make robfigcron``).

    They are built here, next to the local cluster, because the cluster runs some of them: OLM
    (``localcluster.olm``) and the opm and OLM stand-in images (``localcluster.images``).
    ``make catalog`` and ``make validate`` (``tools.generate.catalog``,
    ``tools.check.olm_validate``) use the same builds.

    Each tool has a small wrapper module in ``localcluster/go/<tool>/`` (``go.mod``, ``go.sum``,
    ``tools.go``) that pins the tool's version and its whole dependency graph; the build checks
    every module against that ``go.sum``. The binaries are cached under
    ``~/.cache/k8s-operators-py/tools/<tool>-<hash>/`` (``$GOTOOLS_CACHE`` overrides), the hash of
    the pins and of our own sources, so only a changed pin or source rebuilds. Builds are pure Go
    (``CGO_ENABLED=0``, the ``containers_image_openpgp`` tag instead of gpgme) and print progress
    while they run.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tools", nargs="*", help=f"of {sorted(TOOLS)}; default: {' '.join(DEFAULT_TOOLS)}")
    parser.add_argument("--which", choices=sorted(TOOLS), help="print only this tool's path")
    args = parser.parse_args(argv)
    if args.which:
        print(ensure(args.which))
        return 0
    if unknown := set(args.tools) - set(TOOLS):
        parser.error(f"unknown tools {sorted(unknown)}; known: {sorted(TOOLS)}")
    for tool in args.tools or DEFAULT_TOOLS:
        print(ensure(tool))
    return 0


if __name__ == "__main__":
    sys.exit(main())
