"""``make manifests``: write each operator's CRD into ``bundle/manifests/`` from its schema.py.

The operators are those registered in ``operators.PACKAGES``; each description names its CRD.

``--check`` exits 1 (and says which file) when a committed CRD differs from what the schema
generates, which is what CI relies on to catch hand edits and forgotten regenerations.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from operators import descriptions
from shared.api.crd import CRDSpec, to_yaml
from tools.generate.sync import sync

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "bundle" / "manifests"


def crd_path(crd: CRDSpec) -> Path:
    # operator-sdk's naming: <group>_<plural>.yaml
    return MANIFESTS / f"{crd.group}_{crd.plural}.yaml"


def render() -> dict[Path, str]:
    """Every registered operator's CRD: path -> YAML."""
    return {crd_path(op.crd): to_yaml(op.crd.manifest()) for op in descriptions()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the files differ instead of writing")
    args = parser.parse_args(argv)
    return sync(render(), check=args.check, what="out of date (run `make manifests`)")


if __name__ == "__main__":
    sys.exit(main())
