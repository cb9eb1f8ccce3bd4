"""The dev cluster's container registry: the CNCF distribution registry, over TLS, push and pull.

    python -m localcluster.registry [--dir DIR] [--port PORT]     serve until Ctrl-C
    python -m localcluster.registry --dir DIR --push ARCHIVE=REF  push OCI archives, print digests, stop

``Registry`` runs ``registry serve`` (distribution v3, built by ``localcluster.gotools``) as a
host process on ``127.0.0.1`` with a certificate from ``localcluster.pki`` and storage under its
directory. Images keep their public names under one prefix per upstream host (``ghcr.io/a/b:1``
is ``<address>/ghcr.io/a/b:1``, ``Registry.local_ref``); containerd reaches them as a mirror of
``ghcr.io``, ``quay.io`` and ``docker.io`` (``Registry.write_hosts_config``), containers/image
tools through a ``registries.conf`` mirror. ``Registry.push`` copies an OCI archive with
``skopeo copy --preserve-digests``, so the digest built is the digest pulled; ``Registry.pulls``
reads the access log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from localcluster import pki
from localcluster.process import Component, free_port, log

DOCKER_HUB = "docker.io"
# Where docker.io's API really lives (containerd's hosts.toml ``server`` for docker.io).
DOCKER_HUB_SERVER = "https://registry-1.docker.io"
DEFAULT_MIRRORED = ("ghcr.io", "quay.io", "docker.io")
HOST = "127.0.0.1"

_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
# One line of the registry's access log (Apache combined format, gorilla/handlers).
_ACCESS = re.compile(
    r'"(?P<method>GET|HEAD) /v2/(?P<name>.+)/manifests/(?P<ref>[^ ?/]+)(?:\?\S*)? HTTP/[\d.]+" 200 '
)


# --- references --------------------------------------------------------------------------------


def _canonical_domain(domain: str) -> str:
    return DOCKER_HUB if domain in ("index.docker.io", "registry-1.docker.io") else domain


def _join(domain: str, path: str) -> str:
    """Repository ``path`` on registry ``domain``, with Docker Hub's implicit ``library/``."""
    domain = _canonical_domain(domain)
    if domain == DOCKER_HUB and "/" not in path:
        path = "library/" + path
    return f"{domain}/{path}"


def split_reference(ref: str) -> tuple[str, str | None, str | None]:
    """``(repository, tag, digest)`` of an image reference, the repository normalised as Docker
    does: ``busybox:1`` -> ``("docker.io/library/busybox", "1", None)``. Raises ValueError."""
    name, digest = ref, None
    if "@" in ref:
        name, digest = ref.split("@", 1)
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"invalid digest in image reference {ref!r}")
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name, tag = name.rsplit(":", 1)
        if not _TAG.fullmatch(tag):
            raise ValueError(f"invalid tag in image reference {ref!r}")
    first, sep, rest = name.partition("/")
    # Docker's rule: the first component is a registry host if it looks like one.
    if sep and (any(c in first for c in ".:") or first == "localhost" or first != first.lower()):
        domain, path = first, rest
    else:
        domain, path = DOCKER_HUB, name
    if not path or not all(_PATH_COMPONENT.fullmatch(p) for p in path.split("/")):
        raise ValueError(f"invalid repository name in image reference {ref!r}")
    return _join(domain, path), tag, digest


def normalize_reference(ref: str) -> str:
    """The full form of ``ref``: ``busybox:1`` -> ``docker.io/library/busybox:1``; a reference
    with neither tag nor digest gets ``:latest`` (as ``docker pull`` does)."""
    repository, tag, digest = split_reference(ref)
    if tag is None and digest is None:
        tag = "latest"
    return repository + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def archive_digest(archive: Path) -> str:
    """The manifest digest of the only image in an OCI archive: what ``Registry.push``
    stores and every puller resolves its tag to (``sha256:…``). Raises ValueError otherwise."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise ValueError(f"{archive}: no index.json (not an OCI archive)")
        manifests = json.load(member).get("manifests") or []
    if len(manifests) != 1:
        raise ValueError(f"{archive}: {len(manifests)} images in index.json, expected one")
    return str(manifests[0]["digest"])


# --- the registry -------------------------------------------------------------------------------


def binary() -> Path:
    """The registry binary, built from the pinned module when the tools cache lacks it."""
    from localcluster import gotools

    return gotools.ensure("registry")


@dataclass
class Registry:
    """The distribution registry as a host process under ``directory`` (TLS, push and pull).

    ``with Registry(dir).start() as reg: reg.push(archive, "ghcr.io/a/b:1")``. ``port`` 0 takes a
    free one (from ``LOCALCLUSTER_PORTS``). ``ca`` signs the serving certificate; by default a
    CA of its own. ``ca_file`` is that CA's certificate, ``certs_dir`` a directory with
    only that file (what ``--cert-dir``/``--dest-cert-dir`` of skopeo, buildah and podman want).
    """

    directory: Path
    port: int = 0
    ca: pki.CertificateAuthority = field(default_factory=pki.CertificateAuthority)
    # More DNS names for the serving certificate: how clients that do not dial 127.0.0.1 (pods,
    # through a forwarder and a Service) name the registry.
    names: tuple[str, ...] = ()
    _component: Component | None = field(default=None, init=False, repr=False)

    # -- paths and names

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``, the registry host of every local reference."""
        if not self.port:
            raise RuntimeError("the registry is not started")
        return f"{HOST}:{self.port}"

    @property
    def url(self) -> str:
        return f"https://{self.address}"

    @property
    def certs_dir(self) -> Path:
        return self.directory / "certs.d"

    @property
    def ca_file(self) -> Path:
        return self.certs_dir / "ca.crt"

    @property
    def log_path(self) -> Path:
        return self.directory / "registry.log"

    def local_ref(self, ref: str) -> str:
        """Where ``ref`` lives here: ``ghcr.io/a/b:1`` -> ``127.0.0.1:<port>/ghcr.io/a/b:1``."""
        return f"{self.address}/{normalize_reference(ref)}"

    # -- lifecycle

    def start(self, timeout: float = 60.0) -> Registry:
        """Write the config and certificates, start ``registry serve``, wait for ``/v2/``."""
        if self._component is not None and self._component.alive():
            return self
        exe = binary()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.certs_dir.mkdir(exist_ok=True)
        self.ca_file.write_bytes(self.ca.pair.cert_pem)
        tls = self.directory / "tls"
        tls.mkdir(exist_ok=True)
        cert, key = pki.write(self.ca.serving(["localhost", *self.names], [HOST]), tls, "registry")
        config = {
            "version": 0.1,
            "log": {"level": "info", "formatter": "text", "accesslog": {"disabled": False}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.directory / "storage")},
                "delete": {"enabled": True},
            },
            "http": {
                "addr": self.address,
                "tls": {"certificate": str(cert), "key": str(key)},
                # No debug server: its default port would collide between registries side by side.
            },
        }
        (self.directory / "config.yml").write_text(json.dumps(config, indent=2))  # JSON is YAML
        comp = Component("registry", [str(exe), "serve", str(self.directory / "config.yml")], self.log_path)
        comp.start()
        self._component = comp
        deadline = time.monotonic() + timeout
        while not self._answers():
            if not comp.alive():
                raise RuntimeError(f"the registry exited:\n{comp.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the registry did not answer within {timeout:.0f}s:\n{comp.log_tail()}")
            time.sleep(0.2)
        log(f"registry serving {self.url} (CA {self.ca_file})")
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/v2/", timeout=5, context=self.ssl_context()) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def stop(self) -> None:
        """Stop the process (idempotent); the storage stays until ``directory`` is removed."""
        if self._component is not None:
            self._component.stop()
            self._component = None

    def __enter__(self) -> Registry:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- images

    def push(self, archive: Path, ref: str) -> str:
        """Push the OCI archive's image (its only one) as ``ref``; returns its manifest digest.

        ``ref`` is the public name (``ghcr.io/a/b:1``); it is stored at ``local_ref``.
        """
        digest_file = self.directory / "last-push.digest"
        proc = subprocess.run(
            [
                "skopeo",
                "copy",
                "--quiet",
                "--preserve-digests",
                f"--dest-cert-dir={self.certs_dir}",
                f"--digestfile={digest_file}",
                f"oci-archive:{archive}",
                f"docker://{self.local_ref(ref)}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"skopeo copy {archive} -> {self.local_ref(ref)} failed:\n{proc.stderr}")
        return digest_file.read_text().strip()

    def digest(self, ref: str) -> str:
        """The manifest digest the registry answers for ``ref`` (a HEAD, as a puller resolves)."""
        repository, tag, digest = split_reference(ref)
        accept = ", ".join(
            (
                "application/vnd.oci.image.index.v1+json",
                "application/vnd.oci.image.manifest.v1+json",
                "application/vnd.docker.distribution.manifest.list.v2+json",
                "application/vnd.docker.distribution.manifest.v2+json",
            )
        )
        req = urllib.request.Request(
            f"{self.url}/v2/{repository}/manifests/{digest or tag or 'latest'}",
            method="HEAD",
            headers={"Accept": accept},
        )
        with urllib.request.urlopen(req, timeout=30, context=self.ssl_context()) as resp:
            return str(resp.headers["Docker-Content-Digest"])

    def pulls(self) -> list[tuple[str, str]]:
        """Every manifest fetched with success, ``(method, full reference)``, from the access log:
        ``("GET", "ghcr.io/a/b:1")`` or ``("HEAD", "ghcr.io/a/b@sha256:…")``."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return []
        out = []
        for m in _ACCESS.finditer(text):
            ref = m["ref"]
            out.append((m["method"], f"{m['name']}{'@' if ':' in ref else ':'}{ref}"))
        return out

    # -- containerd

    def write_hosts_config(self, directory: Path, hosts: Sequence[str] = DEFAULT_MIRRORED) -> Path:
        """Write ``directory/<host>/hosts.toml`` for each of ``hosts``: this registry is
        containerd's pull/resolve mirror for them (CRI ``registry.config_path`` = ``directory``),
        trusted through ``ca_file``, each upstream host under its own path prefix."""
        directory = Path(directory)
        for host in map(_canonical_domain, hosts):
            server = DOCKER_HUB_SERVER if host == DOCKER_HUB else f"https://{host}"
            target = directory / host / "hosts.toml"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(
                f"# Written by localcluster.registry: {host} is mirrored by the local registry.\n"
                f"server = {json.dumps(server)}\n"
                "\n"
                f"[host.{json.dumps(f'{self.url}/v2/{host}')}]\n"
                '  capabilities = ["pull", "resolve"]\n'
                f"  ca = {json.dumps(str(self.ca_file))}\n"
                "  override_path = true\n"
            )
        return directory

    def registries_conf(self, hosts: Sequence[str] = DEFAULT_MIRRORED) -> str:
        """A containers-registries.conf(5) making this registry the mirror of ``hosts`` for
        containers/image clients (skopeo, podman, buildah, catalogd); trust the CA separately
        (``/etc/containers/certs.d/<address>/ca.crt`` or ``--cert-dir``)."""
        parts = []
        for host in map(_canonical_domain, hosts):
            parts.append(
                f'[[registry]]\nprefix = "{host}"\nlocation = "{host}"\n\n'
                f'[[registry.mirror]]\nlocation = "{self.address}/{host}"\n'
            )
        return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path(".localcluster/registry"), help="state directory")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--push", nargs="*", default=[], metavar="ARCHIVE=REF", help="push, print, exit")
    args = parser.parse_args(argv)
    reg = Registry(args.dir, args.port).start()
    try:
        if args.push:
            for item in args.push:
                archive, _, ref = item.partition("=")
                print(f"{reg.local_ref(ref)}@{reg.push(Path(archive), ref)}")
            return 0
        print(f"registry {reg.url}  CA {reg.ca_file}  log {reg.log_path}  (Ctrl-C stops)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
        return 0
    finally:
        reg.stop()


if __name__ == "__main__":
    sys.exit(main())
