"""``make images``: build every image of the project, with Docker or offline with buildah.

    python -m localcluster.images [--tool docker|buildah|podman] [--version 0.1.0]
                                  [--registry ghcr.io/k8s-operators-py] [--only NAME ...] [--no-archives]

Builds, from the Dockerfiles in the repository and unchanged, one image per registered operator
(``images/<op>-operator``), the images the operators' descriptions say their workloads run (the
netperf benchmark image, ``images/netperf``), the web image
(``images/web``: Debian's nginx as a non-root user on port 8080), the OLM bundle image
(``bundle/bundle.Dockerfile``) and the catalog image (``catalog.Dockerfile``), each tagged
``<registry>/<name>:<version>``.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import fnmatch
import functools
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import shared
from localcluster import sbom
from localcluster.binaries import file_lock
from operators import descriptions

REPO = Path(__file__).resolve().parents[1]
# The same as tools.generate.bundle.DEFAULT_REGISTRY (not imported: localcluster never imports tools).
DEFAULT_REGISTRY = "ghcr.io/k8s-operators-py"
Tool = Literal["docker", "buildah", "podman"]
TOOLS: tuple[Tool, ...] = ("docker", "buildah", "podman")

# Bumped when the build recipe (this module) changes in a way that must rebuild every image.
RECIPE = "1"
SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
DEBIAN_BASE = f"docker.io/library/debian:{SUITE}-slim"
# localcluster/go/opm/go.mod pins github.com/operator-framework/operator-registry at this version.
OPM_VERSION = "v1.55.0"
OPM_BASE = f"quay.io/operator-framework/opm:{OPM_VERSION}"
OPM_UID = 1001  # upstream's release/goreleaser.opm.Dockerfile: USER 1001
# localcluster/go/olm/go.mod pins github.com/operator-framework/operator-lifecycle-manager at this one.
OLM_VERSION = "v0.46.0"
OLM_IMAGE = f"quay.io/operator-framework/olm:{OLM_VERSION}"
OLM_UID = 1001  # upstream's Dockerfile: USER 1001
# localcluster/go/olmv1/go.mod pins github.com/operator-framework/operator-controller at this one;
# localcluster.gotools.GIT_SOURCES pins cert-manager's tag.
OLMV1_VERSION = "v1.11.0"
CERT_MANAGER_VERSION = "v1.18.2"
# image -> (tool, binary, path in the image, user), as upstream's images lay them out: catalogd and
# operator-controller are distroless static:nonroot (65532) with the binary at /, cert-manager's
# are distroless with /app/cmd/<name>/<name>, USER 1000.
OLMV1_IMAGES: dict[str, tuple[str, str, str, int]] = {
    f"quay.io/operator-framework/catalogd:{OLMV1_VERSION}": ("olmv1", "catalogd", "/catalogd", 65532),
    f"quay.io/operator-framework/operator-controller:{OLMV1_VERSION}": (
        "olmv1",
        "operator-controller",
        "/operator-controller",
        65532,
    ),
    **{
        f"quay.io/jetstack/cert-manager-{name}:{CERT_MANAGER_VERSION}": (
            "cert-manager",
            name,
            f"/app/cmd/{name}/{name}",
            1000,
        )
        for name in ("controller", "webhook", "cainjector")
    },
}

LABEL_PREFIX = "dev.k8s-operators-py"
STAND_IN_LABEL = f"{LABEL_PREFIX}.stand-in"
STAND_IN_FOR_LABEL = f"{LABEL_PREFIX}.stand-in.for"
STAND_IN_RECIPE_LABEL = f"{LABEL_PREFIX}.stand-in.recipe"

PULL_TIMEOUT = 30.0
HEARTBEAT = 15.0
# Registries that did not answer in this process: asked once, not again for every image or call.
_UNREACHABLE: set[str] = set()


@dataclass(frozen=True)
class ImageSpec:
    """One image of the project: where its Dockerfile and build context are."""

    name: str  # the last path element of the reference: <registry>/<name>:<version>
    dockerfile: Path
    context: Path
    description: str

    def ref(self, registry: str = DEFAULT_REGISTRY, version: str = shared.__version__) -> str:
        return f"{registry}/{self.name}:{version}"


def image_specs() -> tuple[ImageSpec, ...]:
    """Every image: each registered operator's, the operand images they declare, then the rest."""
    ops = descriptions()
    operator_images = [
        ImageSpec(
            op.deployment, REPO / "images" / op.deployment / "Dockerfile", REPO, f"the {op.name} operator"
        )
        for op in ops
    ]
    operands = [
        # Built from the repository root, like the operators: every image carries /licenses/LICENSE.
        ImageSpec(i.name, REPO / "images" / i.name / "Dockerfile", REPO, i.description)
        for op in ops
        for i in op.images
    ]
    return (
        *operator_images,
        *operands,
        # What the examples' WebServers and TDSets run (no operator needs it).
        ImageSpec("web", REPO / "images" / "web" / "Dockerfile", REPO, "nginx on port 8080"),
        ImageSpec(
            "k8s-operators-py-bundle",
            REPO / "bundle" / "bundle.Dockerfile",
            REPO / "bundle",
            "the OLM bundle",
        ),
        ImageSpec("k8s-operators-py-catalog", REPO / "catalog.Dockerfile", REPO, "the file-based catalog"),
    )


IMAGES: tuple[ImageSpec, ...] = image_specs()
BY_NAME = {spec.name: spec for spec in IMAGES}


def log(msg: str) -> None:
    print(f"[images] {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    env = os.environ.get("IMAGES_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "k8s-operators-py" / "images"


def archive_dir() -> Path:
    return cache_root() / "archives"


# --- running commands ---------------------------------------------------------------------------


def _capture(cmd: Sequence[str], *, timeout: float | None = 120, check: bool = True) -> str:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    return proc.stdout


def _run(cmd: Sequence[str], label: str, *, cwd: Path | None = None, verbose: bool = False) -> float:
    """Run a long step, its output in a log file, with a heartbeat; the seconds it took.

    Build output is long and mostly noise; it goes to ``<cache>/logs/`` (or the terminal with
    ``verbose``) and its tail is shown when the step fails.
    """
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    logfile = logs / (re.sub(r"[^\w.-]+", "_", label)[:100] + ".log")
    start = time.monotonic()
    done = threading.Event()
    last = [""]

    def heartbeat() -> None:
        while not done.wait(HEARTBEAT):
            log(f"  {label}: {time.monotonic() - start:.0f}s … {last[0][:100]}")

    beat = threading.Thread(target=heartbeat, daemon=True)
    beat.start()
    try:
        with logfile.open("w") as out:
            out.write("$ " + " ".join(cmd) + "\n")
            out.flush()
            proc = subprocess.Popen(
                list(cmd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                if verbose:
                    print(line, end="", file=sys.stderr, flush=True)
                if line.strip():
                    last[0] = line.strip()
            rc = proc.wait()
    finally:
        done.set()
    elapsed = time.monotonic() - start
    if rc != 0:
        tail = "".join(logfile.read_text().splitlines(keepends=True)[-40:])
        raise RuntimeError(f"{label} failed (exit {rc}, full log {logfile}):\n{tail}")
    return elapsed


def _locked() -> contextlib.AbstractContextManager[None]:
    """One build at a time per cache: parallel test sessions would fight over tags and archives."""
    return file_lock(cache_root() / ".lock")


# --- the tool -----------------------------------------------------------------------------------


def docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        proc = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0


def detect_tool() -> Tool:
    """Docker if a Docker engine answers (a client alone is not enough), else buildah, else podman."""
    if docker_engine_answers():
        return "docker"
    for tool in ("buildah", "podman"):
        if shutil.which(tool):
            return tool  # type: ignore[return-value]
    raise SystemExit(
        "no container tool: install Docker, buildah or podman (make system-deps installs buildah)"
    )


@dataclass(frozen=True)
class ImageInfo:
    """What the tests and the summary need from an image's configuration."""

    id: str
    user: str
    labels: dict[str, str]
    env: list[str]
    entrypoint: list[str]
    cmd: list[str]
    size: int  # bytes, uncompressed, as the tool reports it


def inspect(tool: Tool, ref: str) -> ImageInfo | None:
    """The image ``ref`` in the tool's local storage, or None."""
    if tool == "buildah":
        proc = subprocess.run(
            ["buildah", "inspect", "--type", "image", ref], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            return None
        data = json.loads(proc.stdout)
        config = (data.get("OCIv1") or {}).get("config") or {}
        image_id = data["FromImageID"]
        size = _buildah_size(image_id)
    else:
        proc = subprocess.run([tool, "image", "inspect", ref], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return None
        data = json.loads(proc.stdout)[0]
        config = data.get("Config") or {}
        image_id = data["Id"].removeprefix("sha256:")
        size = int(data.get("Size") or 0)
    return ImageInfo(
        id=image_id,
        user=config.get("User") or "",
        labels=config.get("Labels") or {},
        env=config.get("Env") or [],
        entrypoint=config.get("Entrypoint") or [],
        cmd=config.get("Cmd") or [],
        size=size,
    )


def _buildah_size(image_id: str) -> int:
    out = _capture(["buildah", "images", "--json", "--no-trunc", image_id], check=False)
    try:
        entries = json.loads(out or "[]")
    except json.JSONDecodeError:
        return 0
    for entry in entries:
        size = entry.get("size")
        if isinstance(size, int):
            return size
        if isinstance(size, str):  # buildah 1.28: "77.5 MB"
            return _parse_size(size)
    return 0


def _parse_size(text: str) -> int:
    match = re.match(r"([\d.]+)\s*([kKMGT]?B)", text.strip())
    if not match:
        return 0
    scale = {"B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
    return int(float(match.group(1)) * scale.get(match.group(2), 1))


# --- Dockerfiles --------------------------------------------------------------------------------


@dataclass
class Dockerfile:
    """What the build depends on, read from a Dockerfile: stages, their bases, COPY sources."""

    stages: list[tuple[str, str | None]] = field(default_factory=list)  # (base, alias)
    sources: list[str] = field(default_factory=list)  # COPY/ADD sources from the build context

    @property
    def external_bases(self) -> list[str]:
        """Bases that are neither ``scratch`` nor an earlier stage, in order, without repeats."""
        aliases = {alias for _, alias in self.stages if alias}
        out: list[str] = []
        for base, _ in self.stages:
            if base != "scratch" and base not in aliases and base not in out:
                out.append(base)
        return out

    @property
    def intermediate_targets(self) -> list[str]:
        """The named stages before the last one (the only ones the host's pip config reaches)."""
        return [alias for _, alias in self.stages[:-1] if alias]


def _instructions(text: str) -> Iterator[tuple[str, str]]:
    buf = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or (not buf and not stripped):
            continue  # comments, also inside a continued instruction, as Docker reads them
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        buf = ""
        if word:
            yield word.upper(), rest.strip()
    if buf.strip():
        word, _, rest = buf.strip().partition(" ")
        yield word.upper(), rest.strip()


def parse_dockerfile(text: str) -> Dockerfile:
    parsed = Dockerfile()
    for word, rest in _instructions(text):
        if word == "FROM":
            args = [a for a in rest.split() if not a.startswith("--")]
            alias = args[2] if len(args) >= 3 and args[1].lower() == "as" else None
            parsed.stages.append((args[0], alias))
        elif word in ("COPY", "ADD"):
            args = json.loads(rest) if rest.startswith("[") else rest.split()
            if any(a.startswith("--from") for a in args):
                continue
            paths = [a for a in args if not a.startswith("--")]
            parsed.sources += paths[:-1]
    return parsed


# Never part of what an image is built from: byte code and caches that tests leave behind
# (the repository's .dockerignore excludes the same).
IGNORED_NAMES = ("__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache", ".hypothesis")


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in IGNORED_NAMES)


def _hash_tree(digest: Any, root: Path, rel: str) -> None:
    """Paths, executable bits and contents below ``root/rel``, in a stable order."""
    matches = sorted(root.glob(rel)) if any(c in rel for c in "*?[") else [root / rel]
    for path in matches:
        if not path.exists() and not path.is_symlink():
            digest.update(f"missing {rel}\n".encode())
            continue
        walk = [path] if not path.is_dir() else sorted(_walk(path))
        for item in walk:
            name = item.relative_to(root).as_posix()
            if item.is_symlink():
                digest.update(f"link {name} {os.readlink(item)}\n".encode())
            elif item.is_file():
                mode = "x" if os.access(item, os.X_OK) else "-"
                digest.update(f"file {name} {mode} {item.stat().st_size}\n".encode())
                digest.update(hashlib.sha256(item.read_bytes()).digest())


def _walk(top: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not _ignored(d))
        for name in sorted(filenames):
            if not _ignored(name):
                yield Path(dirpath) / name


def input_digest(spec: ImageSpec, ref: str, base_ids: Sequence[str]) -> str:
    """A hash of everything that decides the image: recipe, name, Dockerfile, COPY sources, bases."""
    text = spec.dockerfile.read_text()
    digest = hashlib.sha256()
    digest.update(f"recipe {RECIPE}\nref {ref}\n".encode())
    digest.update(text.encode())
    for ignore in (".dockerignore", ".containerignore"):
        if (spec.context / ignore).exists():
            digest.update((spec.context / ignore).read_bytes())
    for source in sorted(set(parse_dockerfile(text).sources)):
        _hash_tree(digest, spec.context, source.lstrip("/"))
    for base_id in base_ids:
        digest.update(f"base {base_id}\n".encode())
    return digest.hexdigest()


# --- base images and stand-ins ------------------------------------------------------------------


@dataclass(frozen=True)
class Base:
    """A base image as a build will use it: its fully qualified name, ID, and whether it is ours."""

    ref: str
    id: str
    stand_in: bool


def qualified(ref: str) -> str:
    """``debian:bookworm-slim`` -> ``docker.io/library/debian:bookworm-slim`` (Docker's rules)."""
    first, _, rest = ref.partition("/")
    if not rest:
        return f"docker.io/library/{ref}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{ref}"
    return ref


def _try_pull(tool: Tool, ref: str) -> bool:
    if ref in _UNREACHABLE:
        return False
    log(f"pulling {ref} …")
    # "always": ask the registry even when a stand-in of that name is local.
    cmd = (
        [tool, "pull", ref]
        if tool == "podman"
        else ["buildah", "pull", "--policy", "always", "--retry", "0", ref]
    )
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PULL_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        log(f"  no answer from the registry of {ref} within {PULL_TIMEOUT:.0f}s")
        _UNREACHABLE.add(ref)
        return False
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["?"])[-1]
        log(f"  cannot pull {ref}: {reason[:200]}")
        _UNREACHABLE.add(ref)
        return False
    return True


def ensure_base(
    tool: Tool, ref: str, *, pull: bool = True, resolved: dict[str, Base | None] | None = None
) -> Base | None:
    """The base image ``ref`` for a build: a real one if it is local or can be pulled, else a stand-in.

    With Docker, only what is local (else None): ``docker build`` pulls what it needs, as it does
    for users. ``resolved`` remembers the answers during one run.
    """
    ref = qualified(ref)
    if tool == "docker":
        local = inspect(tool, ref)
        return Base(ref, local.id, stand_in=False) if local else None
    if resolved is not None and ref in resolved:
        return resolved[ref]
    base = _resolve_base(tool, ref, pull=pull, resolved={} if resolved is None else resolved)
    if resolved is not None:
        resolved[ref] = base
    return base


def _resolve_base(tool: Tool, ref: str, *, pull: bool, resolved: dict[str, Base | None]) -> Base:
    info = inspect(tool, ref)
    if info is not None and info.labels.get(STAND_IN_LABEL) != "true":
        return Base(ref, info.id, stand_in=False)  # the real image, pulled earlier
    # Absent or a stand-in: the real one wins whenever the registry answers.
    if pull and _try_pull(tool, ref):
        pulled = inspect(tool, ref)
        if pulled is not None and pulled.labels.get(STAND_IN_LABEL) != "true":
            return Base(ref, pulled.id, stand_in=False)
    maker = STAND_INS.get(ref)
    if maker is None:
        raise RuntimeError(
            f"{ref} is neither local nor pullable, and there is no local stand-in recipe for it"
        )
    return maker(tool, info, pull=pull, resolved=resolved)


def _arch() -> str:
    return _capture(["dpkg", "--print-architecture"]).strip()


SLIM_EXCLUDES = (
    "/usr/share/doc/*",
    "/usr/share/groff/*",
    "/usr/share/info/*",
    "/usr/share/linda/*",
    "/usr/share/lintian/overrides/*",
    "/usr/share/locale/*",
    "/usr/share/man/*",
)
SLIM_INCLUDES = ("/usr/share/doc/*/copyright", "/usr/share/locale/locale.alias")

# The settings the official Debian images ship (debuerreotype's minimizing config and slimify),
# so that a `RUN apt-get install` on the stand-in behaves as on the real image.
APT_CONFIG = {
    "etc/apt/apt.conf.d/docker-autoremove-suggests": 'Apt::AutoRemove::SuggestsImportant "false";\n',
    "etc/apt/apt.conf.d/docker-clean": (
        'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb'
        ' /var/cache/apt/*.bin || true"; };\n'
        'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb'
        ' /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };\n'
        'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n'
    ),
    "etc/apt/apt.conf.d/docker-gzip-indexes": 'Acquire::GzipIndexes "true";\n',
    "etc/apt/apt.conf.d/docker-no-languages": 'Acquire::Languages "none";\n',
    "etc/dpkg/dpkg.cfg.d/docker-apt-speedup": "force-unsafe-io\n",
    "etc/dpkg/dpkg.cfg.d/docker": (
        '# The "slim" variant: files normally unneeded in containers are excluded.\n'
        + "".join(f"path-exclude {p}\n" for p in SLIM_EXCLUDES)
        + "".join(f"path-include {p}\n" for p in SLIM_INCLUDES)
    ),
    # Services must not start during `apt-get install` in a build (nginx's postinst would).
    "usr/sbin/policy-rc.d": "#!/bin/sh\nexit 101\n",
    "etc/apt/sources.list.d/debian.sources": (
        f"Types: deb\nURIs: {DEBIAN_MIRROR}\nSuites: {SUITE} {SUITE}-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        f"Types: deb\nURIs: {DEBIAN_SECURITY_MIRROR}\nSuites: {SUITE}-security\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    ),
}
# Left behind by debootstrap or copied from the host; a container runtime provides its own.
ROOTFS_JUNK = (
    "etc/apt/sources.list",
    "etc/hostname",
    "etc/resolv.conf",
    "etc/machine-id",
    "var/cache/ldconfig/aux-cache",
    "var/log/dpkg.log",
    "var/log/bootstrap.log",
    "var/log/alternatives.log",
    "var/log/apt",
    "var/lib/apt/lists",
    "var/cache/apt",
    "var/cache/debconf/config.dat-old",
    "var/cache/debconf/templates.dat-old",
    "var/lib/dpkg/status-old",
    "var/lib/dpkg/diversions-old",
    "run/mount",
)


def _slimify(root: Path) -> None:
    """Remove what the slim variant excludes (keeping the includes), then dead links and empty dirs."""

    def included(path: Path) -> bool:
        rel = "/" + path.relative_to(root).as_posix()
        return any(fnmatch.fnmatch(rel, pattern) for pattern in SLIM_INCLUDES)

    for pattern in SLIM_EXCLUDES:
        top = root / pattern.strip("/").removesuffix("/*")
        if not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            for name in [*filenames, *dirnames]:
                path = Path(dirpath) / name
                if not path.is_symlink() and path.is_file() and not included(path):
                    path.unlink()
        # Links may point at what was just removed, and directories may now be empty.
        changed = True
        while changed:
            changed = False
            for dirpath, dirnames, filenames in os.walk(top, topdown=False):
                for name in [*filenames, *dirnames]:
                    path = Path(dirpath) / name
                    if path.is_symlink() and not path.exists():
                        path.unlink()
                        changed = True
                    elif path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
                        path.rmdir()
                        changed = True


def _write_config(root: Path) -> None:
    for rel, text in APT_CONFIG.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755 if rel.startswith("usr/sbin/") else 0o644)


def _remove_junk(root: Path) -> None:
    for rel in ROOTFS_JUNK:
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
    for rel in ("var/lib/apt/lists/partial", "var/cache/apt/archives/partial"):
        (root / rel).mkdir(parents=True, exist_ok=True)
    for rel in ("dev", "tmp", "run"):
        for child in (root / rel).iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()


def _upgrade(root: Path) -> float:
    """Apply bookworm-updates and -security, as the official images do, inside the new tree."""
    shutil.copy("/etc/resolv.conf", root / "etc" / "resolv.conf")  # removed again with the junk
    proc = root / "proc"
    subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
    try:
        env = "DEBIAN_FRONTEND=noninteractive"
        script = f"{env} apt-get update -qq && {env} apt-get -y -qq -o Dpkg::Use-Pty=0 dist-upgrade"
        return _run(["chroot", str(root), "sh", "-c", script], f"apt-get dist-upgrade ({SUITE})")
    finally:
        subprocess.run(["umount", "-l", str(proc)], check=False)


def debian_rootfs(suite: str = SUITE) -> Path:
    """A trimmed ``debootstrap --variant=minbase`` tree of ``suite`` as a tarball, made once and cached."""
    arch = _arch()
    tarball = cache_root() / f"debian-{suite}-{arch}-minbase.tar"
    if tarball.exists():
        return tarball
    if shutil.which("debootstrap") is None:
        raise SystemExit("debootstrap is missing (make system-deps installs it)")
    work = cache_root() / f"debian-{suite}-{arch}.partial"
    if work.exists():
        subprocess.run(["umount", "-l", str(work / "rootfs" / "proc")], check=False, capture_output=True)
        shutil.rmtree(work)
    root = work / "rootfs"
    root.mkdir(parents=True)
    log(f"debootstrap --variant=minbase {suite} ({arch}) from {DEBIAN_MIRROR} (first time only, ~1-2 min)")
    seconds = _run(
        ["debootstrap", "--variant=minbase", f"--arch={arch}", suite, str(root), DEBIAN_MIRROR],
        f"debootstrap {suite}",
    )
    log(f"  debootstrap: {seconds:.0f}s")
    _write_config(root)
    (root / "etc" / "apt" / "sources.list").unlink(missing_ok=True)
    log(f"  upgrade from {suite}-updates and {suite}-security: {_upgrade(root):.0f}s")
    _slimify(root)
    _remove_junk(root)
    partial = tarball.with_suffix(".tar.partial")
    _capture(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(partial), "."], timeout=600)
    partial.rename(tarball)
    shutil.rmtree(work)
    log(f"  {tarball} ({tarball.stat().st_size / 1e6:.0f} MB)")
    return tarball


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _commit_stand_in(
    tool: Tool, ref: str, container: str, *, recipe: str, description: str, config: Sequence[str]
) -> Base:
    labels = {
        STAND_IN_LABEL: "true",
        STAND_IN_FOR_LABEL: ref,
        STAND_IN_RECIPE_LABEL: recipe,
        f"{STAND_IN_LABEL}.description": description,
    }
    args = [a for k, v in labels.items() for a in ("--label", f"{k}={v}")]
    _capture(["buildah", "config", *args, *config, container])
    _capture(["buildah", "commit", "--quiet", "--rm", container, ref], timeout=600)
    info = inspect(tool, ref)
    assert info is not None
    return Base(ref, info.id, stand_in=True)


def _buildah_for_stand_ins(tool: Tool) -> None:
    # podman has no `from scratch`/`commit` of its own; buildah shares its storage.
    if shutil.which("buildah") is None:
        raise SystemExit(f"making local stand-ins for {tool} needs buildah (same storage)")


def debian_stand_in(
    tool: Tool,
    current: ImageInfo | None,
    *,
    pull: bool = True,
    resolved: dict[str, Base | None] | None = None,
) -> Base:
    """``docker.io/library/debian:bookworm-slim`` made here: debootstrap tree + buildah commit."""
    _buildah_for_stand_ins(tool)
    tarball = debian_rootfs(SUITE)
    recipe = hashlib.sha256(f"{RECIPE} {_sha256_file(tarball)}".encode()).hexdigest()[:16]
    if current is not None and current.labels.get(STAND_IN_RECIPE_LABEL) == recipe:
        return Base(DEBIAN_BASE, current.id, stand_in=True)
    log(f"making the local stand-in {DEBIAN_BASE} from {tarball.name}")
    start = time.monotonic()
    container = _capture(["buildah", "from", "--quiet", "scratch"]).strip()
    _capture(["buildah", "add", "--quiet", container, str(tarball), "/"], timeout=600)
    base = _commit_stand_in(
        tool,
        DEBIAN_BASE,
        container,
        recipe=recipe,
        description=f"Local stand-in for {DEBIAN_BASE} (not the Docker Official Image): "
        f"debootstrap --variant=minbase {SUITE}, upgraded, trimmed like the slim variant",
        config=[
            "--env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--cmd",
            '["bash"]',
            "--os",
            "linux",
            "--arch",
            _arch(),
        ],
    )
    log(f"  {DEBIAN_BASE} (stand-in) committed in {time.monotonic() - start:.0f}s")
    return base


def _binaries_stand_in(
    tool: Tool,
    current: ImageInfo | None,
    ref: str,
    binaries: dict[str, Path],
    *,
    what: str,
    config: Sequence[str],
    pull: bool,
    resolved: dict[str, Base | None] | None,
) -> Base:
    """``ref`` made here: the Debian stand-in plus ``binaries`` (path in the image -> file)."""
    _buildah_for_stand_ins(tool)
    debian = ensure_base(tool, DEBIAN_BASE, pull=pull, resolved=resolved)
    assert debian is not None
    hashes = " ".join(f"{dest}={_sha256_file(src)}" for dest, src in sorted(binaries.items()))
    recipe = hashlib.sha256(f"{RECIPE} {debian.id} {hashes} {config}".encode()).hexdigest()[:16]
    if current is not None and current.labels.get(STAND_IN_RECIPE_LABEL) == recipe:
        return Base(ref, current.id, stand_in=True)
    log(f"making the local stand-in {ref} ({debian.ref} + {', '.join(binaries)})")
    start = time.monotonic()
    container = _capture(["buildah", "from", "--quiet", "--pull=never", debian.ref]).strip()
    for dest, src in binaries.items():
        _capture(["buildah", "copy", "--quiet", "--chmod", "0755", container, str(src), dest], timeout=300)
    base = _commit_stand_in(
        tool,
        ref,
        container,
        recipe=recipe,
        description=f"Local stand-in for {ref}: {debian.ref} plus {what}",
        config=config,
    )
    log(f"  {ref} (stand-in) committed in {time.monotonic() - start:.0f}s")
    return base


def opm_stand_in(
    tool: Tool,
    current: ImageInfo | None,
    *,
    pull: bool = True,
    resolved: dict[str, Base | None] | None = None,
) -> Base:
    """``quay.io/operator-framework/opm``: the Debian base, the opm we build, grpc_health_probe.

    Upstream's image carries ``/bin/grpc_health_probe`` because OLM's catalog registry pods
    probe with it (exec ``grpc_health_probe -addr=:50051``); so does this one.
    """
    from localcluster import gotools  # builds Go code: only when this stand-in is needed

    return _binaries_stand_in(
        tool,
        current,
        OPM_BASE,
        {"/bin/opm": gotools.ensure("opm"), "/bin/grpc_health_probe": gotools.ensure("grpc-health-probe")},
        what=f"/bin/opm from github.com/operator-framework/operator-registry {OPM_VERSION} "
        "(localcluster/go/opm) and /bin/grpc_health_probe (localcluster/go/grpc-health-probe)",
        config=["--user", str(OPM_UID), "--entrypoint", '["/bin/opm"]', "--cmd", "[]"],
        pull=pull,
        resolved=resolved,
    )


def olm_stand_in(
    tool: Tool,
    current: ImageInfo | None,
    *,
    pull: bool = True,
    resolved: dict[str, Base | None] | None = None,
) -> Base:
    """``quay.io/operator-framework/olm``: the Debian base plus OLM's ``olm``, ``catalog``, ``cpb``.

    OLM's bundle-unpack Jobs use this image (catalog-operator's ``-util-image``) only to copy
    ``/bin/cpb`` out with ``/bin/cp``; upstream's image is distroless with busybox's cp, USER 1001.
    """
    from localcluster import gotools

    olm = gotools.ensure("olm").parent
    return _binaries_stand_in(
        tool,
        current,
        OLM_IMAGE,
        {f"/bin/{name}": olm / name for name in ("olm", "catalog", "cpb")},
        what=f"/bin/olm, /bin/catalog and /bin/cpb from operator-lifecycle-manager {OLM_VERSION} "
        "(localcluster/go/olm)",
        config=["--user", str(OLM_UID), "--entrypoint", '["/bin/olm"]', "--cmd", "[]"],
        pull=pull,
        resolved=resolved,
    )


def olmv1_stand_in(
    tool: Tool,
    current: ImageInfo | None,
    *,
    ref: str,
    pull: bool = True,
    resolved: dict[str, Base | None] | None = None,
) -> Base:
    """An OLM v1 or cert-manager image (``OLMV1_IMAGES``): the Debian base plus the binary we build.

    Built from the same version's sources (``localcluster.gotools``, tools ``olmv1`` and
    ``cert-manager``), entrypoint and user as upstream's image has them.
    """
    from localcluster import gotools

    go_tool, binary, path, uid = OLMV1_IMAGES[ref]
    return _binaries_stand_in(
        tool,
        current,
        ref,
        {path: gotools.ensure(go_tool).parent / binary},
        what=f"{path} built from {go_tool} (localcluster/go/{go_tool})",
        config=["--user", str(uid), "--workingdir", "/", "--entrypoint", json.dumps([path]), "--cmd", "[]"],
        pull=pull,
        resolved=resolved,
    )


STAND_INS: dict[str, Callable[..., Base]] = {
    DEBIAN_BASE: debian_stand_in,
    OPM_BASE: opm_stand_in,
    OLM_IMAGE: olm_stand_in,
    **{ref: functools.partial(olmv1_stand_in, ref=ref) for ref in OLMV1_IMAGES},
}


def third_party_archives(refs: Iterable[str], *, tool: Tool | None = None) -> dict[str, Path]:
    """Public images the tests run but do not build (opm, OLM): pulled, or made as stand-ins.

    Returns reference -> OCI archive (``<cache>/archives/third-party/``), rewritten only when the
    image changed, for a node's containerd or the local registry to serve.
    """
    tool = tool or detect_tool()
    out: dict[str, Path] = {}
    resolved: dict[str, Base | None] = {}
    with _locked():
        for ref in refs:
            base = ensure_base(tool, ref, pull=True, resolved=resolved)
            if base is None:
                raise SystemExit(f"{ref} is not in {tool}'s storage: pull it first")
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", ref)
            result = Result(name, ref, base.id, False, 0.0, 0, stand_in_bases=[ref] if base.stand_in else [])
            out[ref] = save_archive(tool, result, "third-party")
    return out


# --- building -----------------------------------------------------------------------------------


HOST_PIP_CONF = Path("/etc/pip.conf")
# Where the host's CA bundle appears in a build step: a path no Debian package writes to. At the
# host's own path (/etc/ssl/certs/ca-certificates.crt) the bind mount would break the
# ca-certificates package, which python3-venv pulls in (update-ca-certificates cannot replace a
# mount point).
BUILD_CA_PATH = Path("/etc/k8s-operators-py-build/ca-certificates.crt")


def host_build_mounts() -> list[tuple[Path, Path]]:
    """(host, container) files that let pip in a build step trust this machine's HTTPS proxy.

    When the host has an ``/etc/pip.conf``: a copy of it whose ``cert`` points at
    ``BUILD_CA_PATH``, and the CA bundle the host's ``cert`` names. Both are mounted read-only
    into intermediate stages only; nothing of them is copied into an image.
    """
    if not HOST_PIP_CONF.is_file():
        return []
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(HOST_PIP_CONF)
    except configparser.Error as exc:
        log(f"ignoring {HOST_PIP_CONF} (unreadable: {exc})")
        return []
    mounts: list[tuple[Path, Path]] = []
    for section in parser.sections():
        cert = parser.get(section, "cert", fallback="")
        if cert and Path(cert).is_file():
            mounts = [(Path(cert), BUILD_CA_PATH)]
            parser.set(section, "cert", str(BUILD_CA_PATH))
    conf = cache_root() / "build-mounts" / "pip.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    with conf.open("w") as out:
        parser.write(out)
    conf.chmod(0o644)  # read by pip as root in the build; the host's copy is world-readable too
    return [(conf, HOST_PIP_CONF), *mounts]


@dataclass
class Result:
    """One image: where it is, whether it was built now, and how long that took."""

    name: str
    ref: str
    id: str
    built: bool
    seconds: float
    size: int
    archive: Path | None = None
    archive_seconds: float = 0.0
    sbom: Path | None = None
    stand_in_bases: list[str] = field(default_factory=list)
    inputs: str = ""  # input_digest: what the archive's name is keyed by


def _state_file(tool: Tool, ref: str) -> Path:
    safe = re.sub(r"[^\w.-]+", "_", ref)
    return cache_root() / "state" / tool / f"{safe}.json"


def _read_state(tool: Tool, ref: str) -> dict[str, Any]:
    path = _state_file(tool, ref)
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        return {}


def _write_state(tool: Tool, ref: str, state: dict[str, Any]) -> None:
    path = _state_file(tool, ref)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2, sort_keys=True))


def _build_cmd(
    tool: Tool, spec: ImageSpec, ref: str, target: str | None, mounts: Sequence[tuple[Path, Path]]
) -> list[str]:
    if tool == "docker":
        return ["docker", "build", "-f", str(spec.dockerfile), "-t", ref, str(spec.context)]
    cmd = [
        tool,
        "bud" if tool == "buildah" else "build",
        "--layers",
        # A failed step must not leave its working container behind.
        "--force-rm",
        # Bases were resolved (pulled or made) before: never reach for a registry in the build.
        "--pull=never",
        # Build steps share the host's network: no bridge, no iptables rules, no address range
        # that could collide with a local cluster's pod network.
        "--network=host",
        "-f",
        str(spec.dockerfile),
    ]
    for host, inside in mounts:
        cmd += ["-v", f"{host}:{inside}:ro"]
    cmd += ["--target", target] if target else ["-t", ref]
    return [*cmd, str(spec.context)]


def build_image(
    tool: Tool,
    spec: ImageSpec,
    registry: str,
    version: str,
    *,
    force: bool = False,
    verbose: bool = False,
    pull: bool = True,
    resolved: dict[str, Base | None] | None = None,
    archives: bool = False,
) -> Result:
    """Build one image unless its inputs are unchanged since the last build of the same tag.

    ``resolved`` remembers the bases already looked up (pulled or made) during one run. With
    ``archives``, an archive already saved from the same inputs is the result, whatever the tag
    now names (another work tree may have built the same tag from other sources since).
    """
    ref = spec.ref(registry, version)
    parsed = parse_dockerfile(spec.dockerfile.read_text())
    resolved = {} if resolved is None else resolved

    def bases_and_digest() -> tuple[list[Base], str]:
        found = [ensure_base(tool, r, pull=pull, resolved=resolved) for r in parsed.external_bases]
        bases = [b for b in found if b is not None]
        return bases, input_digest(spec, ref, [b.id for b in bases])

    bases, digest = bases_and_digest()
    stand_ins = [b.ref for b in bases if b.stand_in]
    kept = _saved_archive(spec.name, version, digest) if archives and not force else None
    if kept is not None and _tagged(tool, ref, kept[1]["id"]):
        path, meta = kept
        return Result(
            spec.name,
            ref,
            meta["id"],
            False,
            0.0,
            meta["size"],
            archive=path,
            stand_in_bases=stand_ins,
            inputs=digest,
        )
    state = _read_state(tool, ref)
    current = inspect(tool, ref)
    if not force and current is not None and state.get("inputs") == digest and state.get("id") == current.id:
        return Result(
            spec.name, ref, current.id, False, 0.0, current.size, stand_in_bases=stand_ins, inputs=digest
        )
    log(
        f"building {ref} ({spec.description}) with {tool}"
        + (f" on stand-ins {stand_ins}" if stand_ins else "")
    )
    seconds = 0.0
    mounts = host_build_mounts() if tool != "docker" else []
    if mounts:
        # Pass 1: the intermediate stages, which may need the host's pip config and CA for HTTPS.
        for target in parsed.intermediate_targets:
            label = f"{spec.name} stage {target}"
            seconds += _run(_build_cmd(tool, spec, ref, target, mounts), label, verbose=verbose)
    # Pass 2: the final image; intermediate stages come from the layer cache, and the final stage
    # never sees the mounts (with buildah 1.28 a bind-mount target stays behind as an empty file).
    seconds += _run(_build_cmd(tool, spec, ref, None, []), spec.name, verbose=verbose)
    info = inspect(tool, ref)
    if info is None:
        raise RuntimeError(f"{ref} was built but is not in {tool}'s storage")
    if tool == "docker":
        # docker build may have pulled a base just now: its ID belongs in what was built from.
        _, digest = bases_and_digest()
    _write_state(tool, ref, {"inputs": digest, "id": info.id, "ref": ref})
    log(f"  {ref}: {seconds:.0f}s, {human(info.size)}")
    return Result(spec.name, ref, info.id, True, seconds, info.size, stand_in_bases=stand_ins, inputs=digest)


# Archives kept per image name and version: the newest few, so that work trees building the same
# tag from different sources each find their own, and an archive a running test imports is not
# deleted under it.
ARCHIVES_KEPT = 4


def _archive_path(name: str, version: str, inputs: str) -> Path:
    return archive_dir() / f"{name}-{version}-{inputs[:16]}.tar"


def _saved_archive(name: str, version: str, inputs: str) -> tuple[Path, dict[str, Any]] | None:
    """The archive saved from exactly these inputs and what it holds, if there is one."""
    path = _archive_path(name, version, inputs)
    try:
        meta = dict(json.loads(path.with_name(path.name + ".json").read_text()))
    except (OSError, ValueError):
        return None
    if not path.exists() or meta.get("inputs") != inputs:
        return None
    path.touch()  # recently used: kept by the pruning below
    return path, meta


def _prune_archives(name: str, version: str) -> None:
    named = re.compile(rf"{re.escape(name)}-{re.escape(version)}-[0-9a-f]{{16}}\.tar")
    mine = sorted(
        (p for p in archive_dir().glob("*.tar") if named.fullmatch(p.name)),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in mine[ARCHIVES_KEPT:]:
        for path in (old, *old.parent.glob(glob.escape(old.name) + ".*")):
            path.unlink(missing_ok=True)


def _link_latest(archive: Path, name: str, version: str) -> None:
    """``<name>-<version>.tar`` (what people type, as the release docs do) -> the archive just used."""
    link = archive_dir() / f"{name}-{version}.tar"
    temporary = link.with_name(f".{link.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(archive.name)
    os.replace(temporary, link)


def _tagged(tool: Tool, ref: str, image_id: str) -> bool:
    """Whether ``ref`` names ``image_id`` in the tool's storage, tagging it so if it is still there."""
    current = inspect(tool, ref)
    if current is not None and current.id == image_id:
        return True
    return subprocess.run([tool, "tag", image_id, ref], capture_output=True, check=False).returncode == 0


def save_archive(tool: Tool, result: Result, version: str) -> Path:
    """The image as an archive for ``ctr images import``, named by its inputs and never rewritten."""
    if result.archive is not None:
        return result.archive
    out = _archive_path(result.name, version, result.inputs)
    meta_file = out.with_name(out.name + ".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.unlink(missing_ok=True)
    start = time.monotonic()
    if tool == "docker":
        _capture(["docker", "save", "-o", str(partial), result.ref], timeout=900)
    else:
        # The reference inside the archive is the image's name: `ctr images import` tags it so.
        _capture([tool, "push", "--quiet", result.ref, f"oci-archive:{partial}:{result.ref}"], timeout=900)
    meta_file.write_text(
        json.dumps({"id": result.id, "size": result.size, "ref": result.ref, "inputs": result.inputs})
    )
    partial.rename(out)
    _prune_archives(result.name, version)
    result.archive_seconds = time.monotonic() - start
    log(f"  saved {out.name} ({human(out.stat().st_size)}) in {result.archive_seconds:.0f}s")
    return out


def _select(names: Iterable[str] | None) -> list[ImageSpec]:
    if names is None:
        return list(IMAGES)
    wanted = list(names)
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown images {unknown}; known: {sorted(BY_NAME)}")
    return [spec for spec in IMAGES if spec.name in wanted]


def build_images(
    names: Iterable[str] | Sequence[ImageSpec] | None = None,
    version: str = shared.__version__,
    registry: str = DEFAULT_REGISTRY,
    *,
    tool: Tool | None = None,
    archives: bool = True,
    force: bool = False,
    verbose: bool = False,
    pull: bool = True,
) -> list[Result]:
    """Build (or reuse) the images ``names`` (all by default); save archives unless told not to.

    Instead of names, ``ImageSpec`` s elsewhere than ``IMAGES`` may be given (a release
    rendered into a temporary directory, as the OLM upgrade test does).
    """
    tool = tool or detect_tool()
    given = list(names) if names is not None else None
    if given is not None and all(isinstance(n, ImageSpec) for n in given):
        specs = [n for n in given if isinstance(n, ImageSpec)]
    else:
        specs = _select([n for n in given if isinstance(n, str)] if given is not None else None)
    results = []
    resolved: dict[str, Base | None] = {}
    with _locked():
        for spec in specs:
            result = build_image(
                tool,
                spec,
                registry,
                version,
                force=force,
                verbose=verbose,
                pull=pull,
                resolved=resolved,
                archives=archives,
            )
            if archives:
                result.archive = save_archive(tool, result, version)
                _link_latest(result.archive, result.name, version)
                result.sbom = sbom.ensure_sbom(result.archive, result.ref)
            results.append(result)
    return results


def ensure_images(
    names: Iterable[str] | Sequence[ImageSpec] | None = None,
    version: str = shared.__version__,
    registry: str = DEFAULT_REGISTRY,
    *,
    tool: Tool | None = None,
) -> dict[str, Path]:
    """Image reference -> archive path for ``ctr images import``; builds only what changed.

    ``names`` are image names as in ``IMAGES`` (``webserver-operator``, ``web``, …; all when
    None). The tool defaults to ``detect_tool`` (buildah on a machine without a Docker engine).
    """
    results = build_images(names, version, registry, tool=tool, archives=True)
    return {r.ref: r.archive for r in results if r.archive is not None}


def human(size: int) -> str:
    """``290 MB``, ``3.1 MB``, ``24 kB``: decimal units, as the container tools print them."""
    if size >= 10e6:
        return f"{size / 1e6:.0f} MB"
    if size >= 1e6:
        return f"{size / 1e6:.1f} MB"
    return f"{size / 1e3:.0f} kB"


def _summary(results: Sequence[Result], total: float) -> str:
    lines = [f"{'image':<58} {'status':<7} {'build':>6} {'size':>8} {'archive':>8}"]
    for r in results:
        archive = human(r.archive.stat().st_size) if r.archive and r.archive.exists() else "-"
        status = "built" if r.built else "cached"
        lines.append(f"{r.ref:<58} {status:<7} {r.seconds:>5.0f}s {human(r.size):>8} {archive:>8}")
    stand_ins = sorted({b for r in results for b in r.stand_in_bases})
    if stand_ins:
        lines.append(f"built on local stand-ins (label {STAND_IN_LABEL}=true): {', '.join(stand_ins)}")
    lines.append(f"total {total:.0f}s; archives and their SPDX SBOMs (*{sbom.SUFFIX}) in {archive_dir()}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The tool is Docker when a Docker engine answers, else buildah (``--tool`` or ``CONTAINER_TOOL``
    in the Makefile choose). With buildah or podman and no reachable registry, the public base images
    the Dockerfiles start from are replaced by *local stand-ins of the same name*:

    - ``docker.io/library/debian:bookworm-slim``: ``debootstrap --variant=minbase bookworm``, trimmed
      and configured like the official slim image (dpkg excludes for docs/man/locales, apt settings,
      ``debian.sources`` with bookworm, -updates and -security), upgraded, committed with buildah.
    - ``quay.io/operator-framework/opm:v1.55.0``: that Debian base plus ``/bin/opm`` built from the
      pinned Go module (``python -m localcluster.gotools``, the same version), USER 1001 like upstream.

    Stand-ins carry ``LABEL dev.k8s-operators-py.stand-in="true"`` (and ``…stand-in.for``); images
    built on them inherit the labels, so an image made offline says so. With a registry the real
    bases are pulled and nothing is made up.

    HTTPS from a build step (pip) may need this machine's CA bundle (a proxy's CA): a copy of the
    host's ``/etc/pip.conf`` (its ``cert`` pointing at ``BUILD_CA_PATH``) and the CA file it names
    are bind-mounted, read-only, into the *intermediate* stages only: a first pass builds them with
    ``--target``, a second pass builds the final stage, reusing their cached layers, without the
    mounts. So neither file, nor the empty mount point buildah 1.28 leaves behind, can end up in an
    image. Docker builds get no mounts: they are exactly what a user runs.

    After building, each image is saved as an OCI archive under
    ``~/.cache/k8s-operators-py/images/archives/<name>-<version>-<inputs>.tar`` for ``ctr images
    import`` (``$IMAGES_CACHE`` moves the cache). ``ensure_images`` rebuilds only images whose
    inputs changed: the Dockerfile, the files its ``COPY`` instructions read and the IDs of its
    bases are hashed (``<inputs>``), and buildah's ``--layers`` cache covers partial changes. An
    archive is never rewritten: work trees that build the same tag from different sources each
    get their own, and the newest few per image are kept; ``<name>-<version>.tar`` links to the
    one used last.

    This lives with the local cluster because the cluster runs what it builds: ``python -m
    localcluster run`` imports every image into its real node, and the OLM tests serve the images
    and the opm and OLM stand-ins from ``localcluster.registry``. Which images there are comes
    from the operators' descriptions (``operators.descriptions()``).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", choices=TOOLS, help="default: docker if an engine answers, else buildah")
    parser.add_argument("--version", default=shared.__version__)
    parser.add_argument("--registry", default=DEFAULT_REGISTRY)
    parser.add_argument(
        "--only", nargs="+", choices=sorted(BY_NAME), metavar="NAME", help="these images only"
    )
    parser.add_argument("--no-archives", action="store_true", help="do not save archives for ctr import")
    parser.add_argument("--force", action="store_true", help="rebuild even when the inputs are unchanged")
    parser.add_argument("--no-pull", action="store_true", help="do not try registries for missing bases")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the build output")
    args = parser.parse_args(argv)
    tool: Tool = args.tool or detect_tool()
    log(f"tool: {tool}; images: {', '.join(args.only or BY_NAME)}")
    start = time.monotonic()
    results = build_images(
        args.only,
        args.version,
        args.registry,
        tool=tool,
        archives=not args.no_archives,
        force=args.force,
        verbose=args.verbose,
        pull=not args.no_pull,
    )
    print(_summary(results, time.monotonic() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
