"""An SPDX software bill of materials per image, written by syft from the image's OCI archive.

    python -m localcluster.sbom ARCHIVE [--ref REF]     write ARCHIVE's SBOM, print its path

``ensure_sbom`` runs syft (built from the pinned Go module, ``localcluster.gotools``)
on the OCI archive ``localcluster.images`` saves after each build, with every layer scanned
(``--scope all-layers``), and writes SPDX 2.3 JSON next to the archive (``<archive>.spdx.json``).
The SBOM is rewritten only when the archive changed (its SHA-256 is recorded beside it). The
SBOM lists the Debian packages (dpkg's database) and the Python distributions (``*.dist-info``
in the virtualenv) of the image; the same file is what ``cosign attest --type spdxjson`` attaches
to the image in the registry (``localcluster.signing``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster import gotools

SUFFIX = ".spdx.json"


@dataclass(frozen=True)
class Package:
    """One package an SBOM names: its name, version and the kind syft found it as."""

    name: str
    version: str
    kind: str  # "deb", "python", ... (the purl type)


def sbom_path(archive: Path) -> Path:
    return archive.with_name(archive.name + SUFFIX)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_sbom(archive: Path, ref: str | None = None) -> Path:
    """The SPDX JSON SBOM of the OCI archive ``archive`` (syft runs only when the archive changed).

    ``ref`` names the image in the SBOM (its ``name`` field); default: the archive's file name.
    """
    out = sbom_path(archive)
    stamp = out.with_name(out.name + ".sha256")
    archive_sum = _sha256(archive)
    if out.exists() and stamp.exists() and stamp.read_text().strip() == archive_sum:
        return out
    partial = out.with_name(out.name + ".partial")
    env = {
        **os.environ,
        # Offline and quiet: no update check, no remote lookups of licences or versions.
        "SYFT_CHECK_FOR_APP_UPDATE": "false",
        "SYFT_GOLANG_SEARCH_REMOTE_LICENSES": "false",
        "SYFT_JAVA_USE_NETWORK": "false",
        "SYFT_PYTHON_SEARCH_REMOTE_LICENSES": "false",
    }
    cmd = [
        str(gotools.ensure("syft")),
        "scan",
        f"oci-archive:{archive}",
        "--scope",
        "all-layers",
        "--source-name",
        ref or archive.stem,
        "-o",
        f"spdx-json={partial}",
        "--quiet",
    ]
    subprocess.run(cmd, env=env, check=True, timeout=1800, stdout=subprocess.DEVNULL)
    partial.rename(out)
    stamp.write_text(archive_sum + "\n")
    return out


def packages(sbom: Path | dict[str, Any]) -> list[Package]:
    """The packages an SPDX JSON SBOM names, with the purl type syft gave each (deb, pypi, ...)."""
    doc = json.loads(sbom.read_text()) if isinstance(sbom, Path) else sbom
    found = []
    for pkg in doc.get("packages", []):
        kind = ""
        for ref in pkg.get("externalRefs", []):
            if ref.get("referenceType") == "purl":
                kind = ref["referenceLocator"].removeprefix("pkg:").split("/", 1)[0]
        found.append(Package(pkg["name"], pkg.get("versionInfo", ""), kind))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("--ref", help="the image's name in the SBOM")
    args = parser.parse_args(argv)
    print(ensure_sbom(args.archive, args.ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
