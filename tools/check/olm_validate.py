"""``make validate``: the OLM tools' own verdicts on the bundle and the catalog, printed in full.

    operator-sdk bundle validate ./bundle --select-optional suite=operatorframework
    opm validate catalog

Fails when either tool fails, and also when operator-sdk prints any warning: a bundle users
install from a catalog should pass OperatorHub's checks cleanly.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from localcluster.gotools import ensure

REPO = Path(__file__).resolve().parents[2]


def run(argv: list[str]) -> tuple[int, str]:
    start = time.monotonic()
    print(f"$ {' '.join([Path(argv[0]).name, *argv[1:]])}", flush=True)
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    out = (proc.stdout + proc.stderr).strip()
    print(out or "(no output)")
    print(f"exit {proc.returncode} after {time.monotonic() - start:.1f}s", flush=True)
    return proc.returncode, out


def main() -> int:
    sdk = ensure("operator-sdk")
    rc, out = run(
        [str(sdk), "bundle", "validate", "./bundle", "--select-optional", "suite=operatorframework"]
    )
    warnings = [line for line in out.splitlines() if "level=warning" in line or line.startswith("WARN")]
    failed = rc != 0 or bool(warnings)
    if warnings:
        print(
            f"{len(warnings)} warning(s) from operator-sdk: the bundle must validate cleanly", file=sys.stderr
        )
    rc, _ = run([str(ensure("opm")), "validate", "catalog"])
    return 1 if failed or rc != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
