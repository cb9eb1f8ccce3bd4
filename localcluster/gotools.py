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
from dataclasses import dataclass
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
    "olmv1": {
        "olmv1-tool": ".",
        "catalogd": "github.com/operator-framework/operator-controller/cmd/catalogd",
        "operator-controller": "github.com/operator-framework/operator-controller/cmd/operator-controller",
    },
    # Built in a checkout of the repository (GIT_SOURCES): its commands are modules of their own.
    "cert-manager": {
        "controller": "cmd/controller",
        "webhook": "cmd/webhook",
        "cainjector": "cmd/cainjector",
    },
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
    "olmv1": ("github.com/operator-framework/operator-controller", ("manifests/standard.yaml",)),
}


@dataclass(frozen=True)
class GitSource:
    """A module the Go module proxy cannot serve, checked out from its repository at a pinned tag.

    ``$<env>`` names another clone URL or a local path (a mirror) for the same repository; the
    checkout must still be the pinned commit.
    """

    url: str
    tag: str
    commit: str
    env: str

    def checkout(self) -> Path:
        url = os.environ.get(self.env) or self.url
        name = f"{self.url.rstrip('/').rsplit('/', 1)[-1]}-{self.tag}"
        directory = cache_root() / "src" / name
        with file_lock(directory.with_name(name + ".lock")):
            if not (directory / ".git").is_dir():
                shutil.rmtree(directory, ignore_errors=True)
                log(f"checking out {self.url} {self.tag} (from {url})")
                clone = subprocess.run(
                    ["git", "clone", "--quiet", "--depth", "1", "--branch", self.tag, url, str(directory)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if clone.returncode != 0:
                    raise SystemExit(
                        f"cannot clone {url} at {self.tag}: {clone.stderr.strip()}\n"
                        f"Set {self.env} to a reachable clone (URL or path) of {self.url}."
                    )
            head = subprocess.run(
                ["git", "-C", str(directory), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
            ).stdout.strip()
        if head != self.commit:
            raise SystemExit(f"{directory} is at {head}, not {self.url} {self.tag} ({self.commit})")
        return directory


# Tools (or a tool's dependencies) from git: the proxy here has no module for cert-manager's
# commands (each is a module whose path is not its directory's, so no proxy can serve it), and
# pkg.package-operator.run (operator-controller's boxcutter) is not a host the proxy may fetch.
GIT_SOURCES: dict[str, GitSource] = {
    "cert-manager": GitSource(
        "https://github.com/cert-manager/cert-manager",
        "v1.18.2",
        "686afa62160249022a0205d3a9bf5f059476c684",
        "CERT_MANAGER_GIT",
    ),
}
# module path -> source, put in place with a ``replace`` at build time (``-modfile``).
GIT_REPLACES: dict[str, dict[str, GitSource]] = {
    "olmv1": {
        "pkg.package-operator.run/boxcutter": GitSource(
            "https://github.com/package-operator/boxcutter",
            "v0.14.0",
            "a89690bf19079c6fa85d6e71903971c2476c04a1",
            "BOXCUTTER_GIT",
        ),
    },
}
# OLM keeps its catalog in SQLite (json1); everything builds without cgo.
_TAGS = {"olm": "json1,containers_image_openpgp", "cert-manager": ""}


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
    sources = [p for p in (module / "go.mod", module / "go.sum", module / "README.md") if p.exists()]
    sources += sorted(p for p in module.glob("*.go") if p.name != "tools.go")
    pins = [GIT_SOURCES.get(tool), *GIT_REPLACES.get(tool, {}).items()]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources) + repr(pins).encode()).hexdigest()[:12]
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
    tags = _TAGS.get(tool, "containers_image_openpgp")
    flags = [*(["-tags", tags] if tags else []), "-trimpath", "-ldflags", "-s -w"]
    if tool in GIT_REPLACES:
        flags.append(f"-modfile={_replaced_modfile(tool, module, partial)}")
    checkout = GIT_SOURCES[tool].checkout() if tool in GIT_SOURCES else None
    for name, package in TOOLS[tool].items():
        if checkout is not None:  # package is a command's module directory in the checkout
            run_go(
                ["build", "-v", *flags, "-o", str(partial / name), "."],
                checkout / package,
                f"building {name}",
            )
        else:
            run_go(["build", "-v", *flags, "-o", str(partial / name), package], module, f"building {name}")
    if tool in _MODULE_FILES:
        _copy_module_files(tool, module, partial, [f for f in flags if f.startswith("-modfile=")])
    shutil.rmtree(target.parent, ignore_errors=True)
    partial.rename(target.parent)
    for leftover in partial.parent.glob(f"{partial.name}-go.*"):
        leftover.unlink()
    log(f"{tool} ready in {target.parent} ({time.monotonic() - start:.0f}s)")


def _replaced_modfile(tool: str, module: Path, partial: Path) -> Path:
    """A copy of ``module``'s go.mod (and go.sum) with ``replace`` lines to the git checkouts."""
    modfile = partial.parent / f"{partial.name}-go.mod"
    text = (module / "go.mod").read_text()
    for path, source in GIT_REPLACES[tool].items():
        text += f"\nreplace {path} => {source.checkout()}\n"
    modfile.write_text(text)
    shutil.copyfile(module / "go.sum", modfile.with_suffix(".sum"))
    return modfile


def _copy_module_files(tool: str, module: Path, into: Path, flags: list[str]) -> None:
    path, files = _MODULE_FILES[tool]
    out = subprocess.run(
        ["go", "list", *flags, "-m", "-f", "{{.Dir}}", path],
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


def git_checkout(tool: str) -> Path:
    """The checkout a ``GIT_SOURCES`` tool is built from (its charts, CRDs, manifests)."""
    return GIT_SOURCES[tool].checkout()


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
