"""A stand-in for a container registry: serves OCI image archives read-only over plain HTTP.

Why it exists: this machine has no internet and no registry, yet a real kubelet+containerd node
(``localcluster.node``) has to *pull* images. Importing archives with ``ctr images import``
is not enough once a pod says ``imagePullPolicy: Always`` (OLM sets that on the pods it makes
for tag references): kubelet then asks containerd to resolve and pull the reference every
time. containerd is pointed here instead, through ``config_path`` ``hosts.toml`` files that
make this server a pull/resolve mirror of ``ghcr.io``, ``quay.io`` and ``docker.io``
(``ImageRegistry.write_hosts_config``).
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import re
import sys
import tarfile
import threading
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, cast
from urllib.parse import parse_qs, unquote, urlsplit

API_VERSION_HEADER = ("Docker-Distribution-API-Version", "registry/2.0")
DOCKER_HUB = "docker.io"
# Where docker.io's API really lives (containerd's hosts.toml ``server`` for docker.io).
DOCKER_HUB_SERVER = "https://registry-1.docker.io"
DEFAULT_MIRRORED = ("ghcr.io", "quay.io", "docker.io")

MEDIA_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MEDIA_DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
INDEX_MEDIA_TYPES = frozenset({MEDIA_OCI_INDEX, MEDIA_DOCKER_LIST})

# Annotations naming an image in index.json: containerd's (always a full reference) and the OCI
# one (a full reference from buildah/podman, often only a tag from skopeo and others).
ANNOTATION_CONTAINERD_NAME = "io.containerd.image.name"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"

_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_ROUTE = re.compile(r"/v2/(?P<name>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)")
_TAGS_ROUTE = re.compile(r"/v2/(?P<name>.+)/tags/list")
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")
_CHUNK = 1 << 20
_MAX_MANIFEST = 4 << 20


def _log(msg: str) -> None:
    print(f"[localcluster registry] {msg}", file=sys.stderr, flush=True)


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


# --- archives ----------------------------------------------------------------------------------


def _stat_key(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@dataclass(frozen=True)
class _Member:
    offset: int
    size: int


@dataclass(eq=False)
class _Archive:
    """An indexed OCI archive: where each blob sits in the tar, and which blobs are manifests."""

    path: Path
    ref: str | None  # as passed to add(): re-used when the archive is re-read
    stat: tuple[int, int, int, int]
    blobs: dict[str, _Member]
    # Every manifest and image index reachable from index.json -> its media type.
    manifests: dict[str, str]
    images: list[tuple[dict[str, Any], str]]  # index.json's descriptors, with media types

    @classmethod
    def read(cls, path: Path, ref: str | None) -> _Archive:
        path = Path(path).absolute()
        stat = _stat_key(path)
        files: dict[str, _Member] = {}
        links: dict[str, str] = {}
        with path.open("rb") as f:
            try:
                tar = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 - closed just below
            except tarfile.TarError as e:
                raise ValueError(f"{path}: not an uncompressed tar archive ({e})") from e
            with tar:
                for member in tar:
                    name = posixpath.normpath(member.name).lstrip("/")
                    if member.isreg() and member.sparse is None:
                        files[name] = _Member(member.offset_data, member.size)
                    elif member.islnk():
                        links[name] = posixpath.normpath(member.linkname).lstrip("/")
            for name, target in links.items():
                if target in files:
                    files[name] = files[target]
            if "index.json" not in files:
                raise ValueError(f"{path}: no index.json, not an OCI image layout archive")
            blobs = {
                f"{parts[1]}:{parts[2]}": m
                for name, m in files.items()
                if len(parts := name.split("/")) == 3 and parts[0] == "blobs"
            }
            archive = cls(path, ref, stat, blobs, {}, [])
            index = archive._json(f, files["index.json"], "index.json")
            for desc in index.get("manifests") or []:
                archive.images.append((desc, archive._walk(f, desc, top=True)))
        if not archive.images:
            raise ValueError(f"{path}: index.json lists no images")
        return archive

    def _json(self, f: BinaryIO, member: _Member, what: str) -> dict[str, Any]:
        if member.size > _MAX_MANIFEST:
            raise ValueError(f"{self.path}: {what} is too large for a manifest ({member.size} bytes)")
        f.seek(member.offset)
        try:
            doc = json.loads(f.read(member.size))
        except ValueError as e:
            raise ValueError(f"{self.path}: {what} is not JSON ({e})") from e
        if not isinstance(doc, dict):
            raise ValueError(f"{self.path}: {what} is not a JSON object")
        return doc

    def _walk(self, f: BinaryIO, desc: dict[str, Any], *, top: bool) -> str:
        """Record the manifest ``desc`` points at (and, for an index, the manifests it lists that
        the archive holds: archives of one platform of a multi-platform image are common)."""
        digest = desc.get("digest")
        if not isinstance(digest, str) or digest not in self.blobs:
            raise ValueError(f"{self.path}: index.json names blob {digest!r}, which is not in the archive")
        doc = self._json(f, self.blobs[digest], f"manifest {digest}")
        media = desc.get("mediaType") or doc.get("mediaType")
        if not isinstance(media, str) or not media:
            media = MEDIA_OCI_INDEX if "manifests" in doc else MEDIA_OCI_MANIFEST
        self.manifests[digest] = media
        if media in INDEX_MEDIA_TYPES or (top and "manifests" in doc and "layers" not in doc):
            for child in doc.get("manifests") or []:
                if isinstance(child, dict) and child.get("digest") in self.blobs:
                    self._walk(f, child, top=False)
        return media

    def changed(self) -> bool:
        try:
            return _stat_key(self.path) != self.stat
        except OSError:
            return True

    def names(self) -> list[tuple[str, str, str, str]]:
        """``(repository, tag, manifest digest, media type)`` of every image to serve."""
        if self.ref is not None:
            if len(self.images) != 1:
                raise ValueError(
                    f"{self.path}: index.json lists {len(self.images)} images, ref= can name only one"
                )
            desc, media = self.images[0]
            repository, tag, digest = split_reference(self.ref)
            if digest is not None:
                raise ValueError(f"ref must name a tag, not a digest: {self.ref!r}")
            if tag is None:  # the tag the archive carries, if it carries only a tag
                own = (desc.get("annotations") or {}).get(ANNOTATION_REF_NAME, "")
                tag = own if _TAG.fullmatch(own) else "latest"
            return [(repository, tag, desc["digest"], media)]
        out, tags_only = [], []
        for desc, media in self.images:
            annotations = desc.get("annotations") or {}
            name = annotations.get(ANNOTATION_CONTAINERD_NAME) or annotations.get(ANNOTATION_REF_NAME)
            if not name:
                continue
            if _TAG.fullmatch(name):
                tags_only.append(name)
                continue
            repository, tag, digest = split_reference(name)
            if tag is None and digest is not None:
                continue  # named by digest only: reachable by digest, no tag to serve
            out.append((repository, tag or "latest", desc["digest"], media))
        if not out:
            raise ValueError(
                f"{self.path}: no image in index.json has a full name"
                + (f" (only tags {tags_only})" if tags_only else "")
                + "; pass ref= to name it"
            )
        return out


@dataclass(frozen=True)
class _Tagged:
    archive: _Archive
    digest: str
    media_type: str


@dataclass(frozen=True)
class _Content:
    """What one request serves: a byte range of an archive."""

    path: Path
    member: _Member
    digest: str
    media_type: str
    label: str  # for ImageRegistry.pulls


class _Error(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


# --- the registry ------------------------------------------------------------------------------


@dataclass(eq=False)
class ImageRegistry:
    """A read-only OCI distribution registry over plain HTTP, serving images from OCI archives.

    ``with ImageRegistry().start() as reg: reg.add(path)`` (or ``with ImageRegistry() as reg``,
    which starts it). ``add`` and ``remove`` may be called while serving. ``pulls`` is
    every manifest or blob request answered with content, as ``(method, what)``: ``what`` is the
    full reference (``repo:tag`` or ``repo@digest``) for manifests, the digest for blobs. It is
    appended to under a lock: copy it (``list(reg.pulls)``) when reading while serving.

    What it does: the read side of the OCI distribution API over HTTP (``/v2/``, manifests and
    blobs by tag or digest, ``HEAD`` and ``GET``, ``Range: bytes=N-[M]``, ``tags/list``), serving
    images straight out of OCI archives -- tar files of an OCI image layout (``oci-layout``,
    ``index.json``, ``blobs/<alg>/<hex>``) as written by ``buildah push IMG oci-archive:PATH:REF``
    or ``localcluster.ociimage``. Blobs are streamed from the tar at their member offsets;
    nothing is extracted to disk or held in memory. Manifests go out byte for byte as stored, so
    digests match. Images are named like Docker names them (``busybox:1`` is
    ``docker.io/library/busybox:1``). An archive rewritten in place of the one added is re-read on
    the next request that touches it, so a rebuilt image is served under the same tag.

    What it does not do: no push, delete or catalogue (every write answers 405 ``UNSUPPORTED``), no
    authentication, no TLS, no manifest conversion by ``Accept`` header (what the archive holds is
    what is served), no digest verification of archive contents (the archive's blob names are
    trusted), and only uncompressed tar archives (member offsets must be seekable). It listens on
    loopback by default: only processes on this machine (containerd runs in the host's network
    namespace) are meant to reach it.
    """

    host: str = "127.0.0.1"
    port: int = 0
    pulls: list[tuple[str, str]] = field(default_factory=list, init=False)
    _tags: dict[str, dict[str, _Tagged]] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False)
    _server: _Server | None = field(default=None, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    # -- lifecycle

    def start(self) -> ImageRegistry:
        """Listen (port 0: any free port) and serve from a daemon thread; no-op when serving."""
        with self._lock:
            if self._server is not None:
                return self
            server = _Server((self.host, self.port), _Handler)
            server.registry = self
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="image-registry",
                daemon=True,
            )
            thread.start()
            self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent). Images stay added."""
        with self._lock:
            server, thread = self._server, self._thread
            self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=10)

    def __enter__(self) -> ImageRegistry:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def address(self) -> str:
        """``host:port`` where it listens (only while started)."""
        server = self._server
        if server is None:
            raise RuntimeError("the image registry is not started")
        host, port = server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    # -- images

    def add(self, archive: Path, ref: str | None = None) -> list[str]:
        """Serve the images of an OCI archive; returns their full references (``repo:tag``).

        Without ``ref`` each image is named by its ``index.json`` annotation
        (``io.containerd.image.name``, else ``org.opencontainers.image.ref.name`` when that holds
        a full reference; an image annotated with only a tag needs ``ref``). ``ref`` names the
        archive's only image explicitly, normalised as Docker does (``busybox:1`` is
        ``docker.io/library/busybox:1``); a ``ref`` without a tag takes the archive's own tag
        annotation, else ``latest``. A tag already served is replaced. Raises ValueError for an
        archive that cannot be served, OSError when it cannot be read.
        """
        indexed = _Archive.read(Path(archive), ref)
        names = indexed.names()  # before changing anything: all or nothing
        with self._lock:
            for repository, tag, digest, media in names:
                self._tags.setdefault(repository, {})[tag] = _Tagged(indexed, digest, media)
        return [f"{repository}:{tag}" for repository, tag, _, _ in names]

    def remove(self, ref: str) -> None:
        """Stop serving the tag ``ref`` (normalised like ``add``); KeyError when not served."""
        repository, tag, _ = split_reference(ref)
        tag = tag or "latest"
        with self._lock:
            tags = self._tags.get(repository, {})
            if tag not in tags:
                raise KeyError(f"{repository}:{tag} is not served")
            del tags[tag]
            if not tags:
                del self._tags[repository]

    def refs(self) -> list[str]:
        """Every served reference, ``repository:tag``, sorted."""
        with self._lock:
            return sorted(f"{repo}:{tag}" for repo, tags in self._tags.items() for tag in tags)

    # -- containerd

    def write_hosts_config(self, directory: Path, hosts: Sequence[str] = DEFAULT_MIRRORED) -> Path:
        """Write ``directory/<host>/hosts.toml`` for each of ``hosts``, making this registry
        containerd's pull/resolve mirror for them (containerd's CRI ``registry.config_path`` =
        ``directory``). Needs the registry started (the files name its port). Returns
        ``directory``."""
        address = self.address
        directory = Path(directory)
        for host in hosts:
            server = DOCKER_HUB_SERVER if _canonical_domain(host) == DOCKER_HUB else f"https://{host}"
            target = directory / host / "hosts.toml"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(
                f"# Written by localcluster.registry: {host} is served by the local stand-in.\n"
                f"server = {json.dumps(server)}\n"
                "\n"
                f"[host.{json.dumps('http://' + address)}]\n"
                '  capabilities = ["pull", "resolve"]\n'
            )
        return directory

    # -- lookups for the handler

    def _record(self, method: str, what: str) -> None:
        with self._lock:
            self.pulls.append((method, what))

    def _repository(self, name: str, ns: str | None) -> str:
        """The stored repository a request's ``name`` (and ``ns`` query) means (lock held)."""
        if ns:
            repository = _join(ns, name)
            if repository in self._tags:
                return repository
            raise _Error(404, "NAME_UNKNOWN", f"repository {repository} is not served")
        candidates = [name]
        if self._server is not None:
            candidates.append(f"{self.address}/{name}")
        with contextlib.suppress(ValueError):
            candidates.append(split_reference(name)[0])
        for candidate in candidates:
            if candidate in self._tags:
                return candidate
        matches = [r for r in self._tags if r.split("/", 1)[1] == name]
        if len(matches) == 1:
            return matches[0]
        detail = f" (ambiguous: {sorted(matches)}; say which with ?ns=HOST)" if matches else ""
        raise _Error(404, "NAME_UNKNOWN", f"repository {name} is not served{detail}")

    def _fresh(self, archive: _Archive) -> _Archive:
        """``archive``, re-read first if its file changed since (lock held)."""
        if not archive.changed():
            return archive
        try:
            new = _Archive.read(archive.path, archive.ref)
            names = new.names()
        except (OSError, ValueError) as e:
            raise _Error(503, "UNAVAILABLE", f"archive {archive.path} changed and cannot be read: {e}") from e
        _log(f"{archive.path} changed: re-read")
        for repository in list(self._tags):
            tags = self._tags[repository]
            for tag in [t for t, tagged in tags.items() if tagged.archive is archive]:
                del tags[tag]
            if not tags:
                del self._tags[repository]
        for repository, tag, digest, media in names:
            self._tags.setdefault(repository, {})[tag] = _Tagged(new, digest, media)
        return new

    def _archives(self, repository: str) -> list[_Archive]:
        seen: dict[int, _Archive] = {}
        for tagged in list(self._tags.get(repository, {}).values()):
            seen.setdefault(id(tagged.archive), tagged.archive)
        return [self._fresh(a) for a in seen.values()]

    def _manifest(self, name: str, ns: str | None, reference: str) -> _Content:
        with self._lock:
            repository = self._repository(name, ns)
            if _DIGEST.fullmatch(reference):
                for archive in self._archives(repository):
                    if reference in archive.manifests:
                        return _Content(
                            archive.path,
                            archive.blobs[reference],
                            reference,
                            archive.manifests[reference],
                            f"{repository}@{reference}",
                        )
                raise _Error(404, "MANIFEST_UNKNOWN", f"manifest {repository}@{reference} is not served")
            tagged = self._tags[repository].get(reference)
            if tagged is not None:
                self._fresh(tagged.archive)
                tagged = self._tags.get(repository, {}).get(reference)
            if tagged is None:
                raise _Error(404, "MANIFEST_UNKNOWN", f"manifest {repository}:{reference} is not served")
            member = tagged.archive.blobs[tagged.digest]
            return _Content(
                tagged.archive.path, member, tagged.digest, tagged.media_type, f"{repository}:{reference}"
            )

    def _blob(self, name: str, ns: str | None, digest: str) -> _Content:
        with self._lock:
            repository = self._repository(name, ns)
            for archive in self._archives(repository):
                if digest in archive.blobs:
                    return _Content(
                        archive.path, archive.blobs[digest], digest, "application/octet-stream", digest
                    )
            raise _Error(404, "BLOB_UNKNOWN", f"blob {digest} is not in {repository}")

    def _tag_list(self, name: str, ns: str | None) -> list[str]:
        with self._lock:
            return sorted(self._tags[self._repository(name, ns)])


# --- HTTP --------------------------------------------------------------------------------------

_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: ImageRegistry

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, _DISCONNECTS | TimeoutError):
            return
        _log(f"error serving {client_address}:\n{traceback.format_exc()}")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "localcluster-registry"
    timeout = 300  # idle keep-alive connections

    @property
    def registry(self) -> ImageRegistry:
        return cast(_Server, self.server).registry

    def log_message(self, format: str, *args: Any) -> None:
        pass  # no line per request

    def log_error(self, format: str, *args: Any) -> None:
        if getattr(self, "raw_requestline", b"").startswith(b"\x16\x03"):
            return  # a TLS handshake: clients such as skopeo try https first, then fall back
        _log(f"{self.address_string()}: {format % args}")

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def __getattr__(self, name: str) -> Any:
        # Any other method (PUT, POST, PATCH, DELETE, ...) is a write: read-only registry.
        if name.startswith("do_"):
            return self._unsupported
        raise AttributeError(name)

    def _unsupported(self) -> None:
        self._error(
            _Error(405, "UNSUPPORTED", f"{self.command} is not supported: this registry is read-only")
        )

    def _serve(self, *, head: bool) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        ns = (parse_qs(url.query).get("ns") or [None])[0]
        try:
            if path in ("/v2", "/v2/"):
                self._send_json(200, {}, head=head)
            elif m := _ROUTE.fullmatch(path):
                name, kind, ref = m["name"], m["kind"], m["ref"]
                if kind == "manifests":
                    self._send_content(self.registry._manifest(name, ns, ref), head=head)
                elif not _DIGEST.fullmatch(ref):
                    raise _Error(400, "DIGEST_INVALID", f"not a digest: {ref}")
                else:
                    self._send_content(self.registry._blob(name, ns, ref), head=head)
            elif m := _TAGS_ROUTE.fullmatch(path):
                self._send_json(
                    200, {"name": m["name"], "tags": self.registry._tag_list(m["name"], ns)}, head=head
                )
            else:
                raise _Error(404, "UNSUPPORTED", f"no such endpoint: {path}")
        except _Error as e:
            self._error(e, head=head)
        except _DISCONNECTS:
            self.close_connection = True

    def _headers(
        self, status: int, content_type: str, length: int, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header(*API_VERSION_HEADER)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()

    def _send_json(
        self, status: int, doc: Any, *, head: bool = False, extra: dict[str, str] | None = None
    ) -> None:
        body = json.dumps(doc).encode()
        self._headers(status, "application/json", len(body), extra)
        if not head:
            self.wfile.write(body)

    def _error(self, e: _Error, *, head: bool = False) -> None:
        extra = {"Allow": "GET, HEAD"} if e.status == 405 else None
        try:
            self._send_json(
                e.status, {"errors": [{"code": e.code, "message": e.message}]}, head=head, extra=extra
            )
        except _DISCONNECTS:
            self.close_connection = True

    def _send_content(self, content: _Content, *, head: bool) -> None:
        size = content.member.size
        start, end, status = 0, size, 200
        extra = {"Docker-Content-Digest": content.digest, "Accept-Ranges": "bytes"}
        if content.media_type == "application/octet-stream" and (spec := self.headers.get("Range")):
            m = _RANGE.fullmatch(spec.strip())
            if m is None or int(m[1]) >= size or (m[2] and int(m[2]) < int(m[1])):
                raise _Error(416, "BLOB_UNKNOWN", f"unsatisfiable range {spec!r} of {size} bytes")
            start, end, status = int(m[1]), min(int(m[2]) + 1 if m[2] else size, size), 206
            extra["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        try:
            f = content.path.open("rb")
        except OSError as e:
            raise _Error(503, "UNAVAILABLE", f"cannot open {content.path}: {e}") from e
        with f:
            self.registry._record(self.command, content.label)
            self._headers(status, content.media_type, end - start, extra)
            if not head:
                for chunk in _read_range(f, content.member.offset + start, end - start):
                    self.wfile.write(chunk)


def _read_range(f: BinaryIO, offset: int, length: int) -> Iterator[bytes]:
    f.seek(offset)
    while length > 0:
        chunk = f.read(min(_CHUNK, length))
        if not chunk:
            raise OSError(f"{getattr(f, 'name', 'archive')}: truncated at offset {f.tell()}")
        length -= len(chunk)
        yield chunk


__all__ = ["ImageRegistry", "normalize_reference", "split_reference"]
