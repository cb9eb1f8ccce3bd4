"""openshift-preflight itself (``preflight check container``) against our own container checks.

Each runnable image is pushed to the real registry and checked by preflight (built from its Go
module) and by tools/check/preflight.py: on every check both implement, the verdicts must agree.
Preflight's remaining container checks need Red Hat's Pyxis service (BasedOnUbi) or an RPM
database (HasModifiedFiles, HasNoProhibitedPackages), so they cannot pass here and are not
compared. Needs root and buildah for the images (as test_images.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import gotools, images
from localcluster.registry import Registry
from tools.check import preflight

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="building images with buildah needs root"),
    pytest.mark.skipif(shutil.which("buildah") is None, reason="buildah is not installed (make system-deps)"),
    pytest.mark.timeout(1800),  # a cold first build of the images (and of preflight) on a busy machine
]
RUNNABLE = [
    s.name for s in images.IMAGES if s.name not in ("k8s-operators-py-bundle", "k8s-operators-py-catalog")
]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    with Registry(tmp_path_factory.mktemp("registry")) as reg:
        yield reg


@pytest.fixture(scope="module")
def built() -> dict[str, Path]:
    archives = images.ensure_images(RUNNABLE, tool="buildah")
    return {name: archives[images.BY_NAME[name].ref()] for name in RUNNABLE}


def run_preflight(ref: str, workdir: Path) -> dict[str, bool]:
    """preflight's verdict per check name: True passed, False failed or errored."""
    artifacts = workdir / "artifacts"
    proc = subprocess.run(
        [
            str(gotools.ensure("preflight")),
            "check",
            "container",
            ref,
            "--insecure",
            "--artifacts",
            str(artifacts),
        ],
        cwd=workdir,
        env={**os.environ, "PFLT_LOGFILE": str(workdir / "preflight.log"), "PFLT_LOGLEVEL": "info"},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    results = next(artifacts.rglob("results.json"), None)
    assert results is not None, (
        f"preflight wrote no results.json (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    )
    doc = json.loads(results.read_text())["results"]
    verdicts = {c["name"]: True for c in doc.get("passed") or []}
    verdicts |= {c["name"]: False for c in (doc.get("failed") or []) + (doc.get("errors") or [])}
    return verdicts


@pytest.mark.parametrize("name", RUNNABLE)
def test_preflight_and_our_checks_agree_and_pass(registry, built, name, tmp_path):
    public_ref = images.BY_NAME[name].ref()
    # One copy for both: the shared image cache may be rewritten meanwhile by another checkout.
    archive = Path(shutil.copyfile(built[name], tmp_path / "image.tar"))
    registry.push(archive, public_ref)
    theirs = run_preflight(registry.local_ref(public_ref), tmp_path)
    ours = {r.check: r.passed for r in preflight.container_checks(preflight.read_archive(archive))}
    assert set(ours) <= set(theirs), f"checks preflight did not run: {sorted(set(ours) - set(theirs))}"
    assert {check: theirs[check] for check in ours} == ours
    assert all(ours.values()), ours
