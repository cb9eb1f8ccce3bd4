"""Build (or reuse) the OLM tools from pinned Go modules: ``opm`` and ``operator-sdk``.

    python -m tools.gotools            print the directory with both binaries
    python -m tools.gotools --which opm

Each tool has a small wrapper module in ``tools/go/<tool>/`` (``go.mod``, ``go.sum``,
``tools.go``) that pins the tool's version and its whole dependency graph; the build checks
every module against that ``go.sum``. The binaries are cached under
``~/.cache/k8s-operators-py/tools/<tool>-<hash of go.sum>/`` (``$GOTOOLS_CACHE`` overrides), so
only a changed pin rebuilds. Builds are pure Go (``CGO_ENABLED=0``, the
``containers_image_openpgp`` tag instead of gpgme) and print progress while they run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

from localcluster.binaries import log, run_go

REPO = Path(__file__).resolve().parents[1]
MODULES = REPO / "tools" / "go"
TOOLS = {
    "opm": "github.com/operator-framework/operator-registry/cmd/opm",
    "operator-sdk": "github.com/operator-framework/operator-sdk/cmd/operator-sdk",
}


def cache_root() -> Path:
    env = os.environ.get("GOTOOLS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "k8s-operators-py" / "tools"


def ensure(tool: str) -> Path:
    """The path of ``tool``, built from ``tools/go/<tool>`` when the cache lacks it."""
    module = MODULES / tool
    digest = hashlib.sha256((module / "go.mod").read_bytes() + (module / "go.sum").read_bytes()).hexdigest()[
        :12
    ]
    target = cache_root() / f"{tool}-{digest}" / tool
    if os.access(target, os.X_OK):
        return target
    partial = target.parent.with_name(target.parent.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    log(f"building {tool} from {module.relative_to(REPO)} (first time only; a cold build takes minutes)")
    start = time.monotonic()
    run_go(
        [
            "build",
            "-v",
            "-tags",
            "containers_image_openpgp",
            "-trimpath",
            "-ldflags",
            "-s -w",
            "-o",
            str(partial / tool),
            TOOLS[tool],
        ],
        module,
        f"building {tool}",
    )
    shutil.rmtree(target.parent, ignore_errors=True)
    partial.rename(target.parent)
    log(f"{tool} ready in {target.parent} ({time.monotonic() - start:.0f}s)")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--which", choices=sorted(TOOLS), help="print only this tool's path")
    args = parser.parse_args(argv)
    if args.which:
        print(ensure(args.which))
        return 0
    for tool in [t for t in TOOLS if (MODULES / t / "go.mod").exists()]:
        print(ensure(tool))
    return 0


if __name__ == "__main__":
    sys.exit(main())
