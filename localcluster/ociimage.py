"""Tiny OCI image archives written in pure Python, for the real worker node.

No registry is reachable from our machines and the node needs at least a sandbox ("pause")
image, so images made of a few host files are written here directly as an OCI image layout in
a tar archive (one uncompressed layer, a config, a manifest, an index), ready for
``ctr images import`` (``localcluster.node.RealNode.import_images``).

``busybox_image`` makes a one-binary image from Debian's static busybox with every applet
linked, so tests can run ``httpd``, ``wget`` or ``sh`` pods without building anything else.
The archives are deterministic (fixed mtimes, sorted entries): the same inputs give the same
image digest, and a repeated import is a no-op.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import struct
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

BUSYBOX = Path("/bin/busybox")
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"


@dataclass(frozen=True)
class ImageFile:
    """One regular file of an image: its bytes (or a host file to copy) and mode."""

    source: bytes | Path
    mode: int = 0o644

    def data(self) -> bytes:
        return self.source if isinstance(self.source, bytes) else self.source.read_bytes()


def oci_arch() -> str:
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le"}.get(
        machine, machine
    )


def _tar_member(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, size, link
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
    return info


def layer_tar(
    files: Mapping[str, ImageFile], symlinks: Mapping[str, str] = {}, dirs: Sequence[str] = ()
) -> bytes:
    """An uncompressed layer: ``files`` and ``symlinks`` keyed by absolute path, plus ``dirs``."""
    paths = [PurePosixPath(p) for p in (*files, *symlinks, *dirs)]
    directories = {str(parent) for p in paths for parent in p.parents if str(parent) != "/"}
    directories |= {d.rstrip("/") for d in dirs}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in sorted(directories):
            # /tmp as in any distribution image: world-writable with the sticky bit.
            tar.addfile(_tar_member(d.lstrip("/"), tarfile.DIRTYPE, 0o1777 if d == "/tmp" else 0o755))
        for path in sorted(files):
            data = files[path].data()
            info = _tar_member(path.lstrip("/"), tarfile.REGTYPE, files[path].mode, len(data))
            tar.addfile(info, io.BytesIO(data))
        for path in sorted(symlinks):
            tar.addfile(_tar_member(path.lstrip("/"), tarfile.SYMTYPE, 0o777, link=symlinks[path]))
    return buf.getvalue()


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_archive(
    path: Path,
    ref: str,
    layer: bytes,
    *,
    entrypoint: Sequence[str] | None = None,
    cmd: Sequence[str] | None = None,
    env: Sequence[str] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",),
    workdir: str = "/",
    user: str = "",
    labels: Mapping[str, str] | None = None,
) -> Path:
    """Write a one-layer OCI image archive named ``ref`` (e.g. ``localcluster.dev/x:1``)."""
    layer_digest, _ = _blob(layer)
    config: dict[str, Any] = {"Env": list(env), "WorkingDir": workdir}
    if entrypoint is not None:
        config["Entrypoint"] = list(entrypoint)
    if cmd is not None:
        config["Cmd"] = list(cmd)
    if user:
        config["User"] = user
    if labels:
        config["Labels"] = dict(labels)
    config_digest, config_json = _blob(
        _json(
            {
                "architecture": oci_arch(),
                "os": "linux",
                "config": config,
                "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
                "history": [{"created_by": "localcluster.ociimage"}],
            }
        )
    )
    manifest_digest, manifest_json = _blob(
        _json(
            {
                "schemaVersion": 2,
                "mediaType": MEDIA_MANIFEST,
                "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest, "size": len(config_json)},
                "layers": [{"mediaType": MEDIA_LAYER, "digest": layer_digest, "size": len(layer)}],
            }
        )
    )
    tag = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [
            {
                "mediaType": MEDIA_MANIFEST,
                "digest": manifest_digest,
                "size": len(manifest_json),
                "platform": {"architecture": oci_arch(), "os": "linux"},
                # containerd's importer names the image after the first annotation; other
                # tools (skopeo, buildah) read the second, which holds only the tag.
                "annotations": {
                    "io.containerd.image.name": ref,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    entries = {
        "oci-layout": _json({"imageLayoutVersion": "1.0.0"}),
        "index.json": _json(index),
        f"blobs/sha256/{config_digest[7:]}": config_json,
        f"blobs/sha256/{manifest_digest[7:]}": manifest_json,
        f"blobs/sha256/{layer_digest[7:]}": layer,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(_tar_member(d, tarfile.DIRTYPE, 0o755))
        for name, data in entries.items():
            tar.addfile(_tar_member(name, tarfile.REGTYPE, 0o644, len(data)), io.BytesIO(data))
    tmp.rename(path)
    return path


def busybox_applets(busybox: Path = BUSYBOX) -> list[str]:
    out = subprocess.run([str(busybox), "--list"], check=True, capture_output=True, text=True).stdout
    return sorted({a for a in out.split() if a and "/" not in a and a != "busybox"})


def busybox_layer(busybox: Path = BUSYBOX) -> bytes:
    """/bin/busybox (static), /bin/<applet> links, /tmp, and passwd/group for root and nobody."""
    files = {
        "/bin/busybox": ImageFile(busybox, 0o755),
        "/etc/passwd": ImageFile(
            b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"
        ),
        "/etc/group": ImageFile(b"root:x:0:\nnobody:x:65534:\n"),
    }
    links = {f"/bin/{a}": "busybox" for a in busybox_applets(busybox)}
    return layer_tar(files, links, dirs=("/tmp", "/root", "/www"))


def busybox_image(
    path: Path,
    ref: str,
    *,
    entrypoint: Sequence[str] | None = None,
    cmd: Sequence[str] | None = ("sh",),
    busybox: Path = BUSYBOX,
) -> Path:
    """A busybox image (``httpd``, ``wget``, ``sh``, ...): needs ``busybox-static`` on the host."""
    if not busybox_is_static(busybox):
        raise RuntimeError(f"{busybox} is not a static binary (apt-get install busybox-static)")
    return write_archive(path, ref, busybox_layer(busybox), entrypoint=entrypoint, cmd=cmd)


def pause_image(path: Path, ref: str, busybox: Path = BUSYBOX) -> Path:
    """The pod sandbox image: any static binary that sleeps until it is killed will do.

    containerd stops sandboxes with SIGKILL, so PID 1 ignoring SIGTERM does not matter.
    """
    # Keep the name "busybox": it picks the applet from argv[0], and "pause" is none.
    layer = layer_tar({"/bin/busybox": ImageFile(busybox, 0o755)})
    return write_archive(path, ref, layer, entrypoint=["/bin/busybox", "sleep", "infinity"], env=())


def busybox_is_static(busybox: Path = BUSYBOX) -> bool:
    """True when ``busybox`` is an ELF binary without a program interpreter (runs in an empty
    rootfs). Reads the program headers instead of trusting the package name."""
    try:
        data = busybox.read_bytes()
    except OSError:
        return False
    if data[:4] != b"\x7fELF" or data[4] != 2:  # ELFCLASS64 only: all we build images for
        return False
    endian = "<" if data[5] == 1 else ">"
    (phoff,) = struct.unpack_from(endian + "Q", data, 0x20)
    phentsize, phnum = struct.unpack_from(endian + "HH", data, 0x36)
    pt_interp = 3
    return all(
        struct.unpack_from(endian + "I", data, phoff + i * phentsize)[0] != pt_interp for i in range(phnum)
    )
