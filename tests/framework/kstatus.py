"""Judge objects the way Flux health checks, Helm 4 ``--wait``, kpt and Config Sync do.

Runs the real kstatus library (sigs.k8s.io/cli-utils ``status.Compute``) through our small
command ``localcluster/go/kstatus``, built from its pinned module on first use (``localcluster.gotools``).
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from localcluster import gotools


@functools.cache
def binary() -> Path:
    return gotools.ensure("kstatus")


def compute(*objects: Mapping[str, Any]) -> list[dict[str, str]]:
    """kstatus' result for each object: ``{"kind", "name", "status", "message"}``."""
    out = subprocess.run(
        [str(binary())],
        input="\n".join(json.dumps(o) for o in objects),
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, f"kstatus failed: {out.stderr}"
    return [json.loads(line) for line in out.stdout.splitlines()]


def status_of(obj: Mapping[str, Any]) -> str:
    """kstatus' status (Current, InProgress, Failed, Terminating...) of one object."""
    (result,) = compute(obj)
    return result["status"]
