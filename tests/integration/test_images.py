"""The images ``make images`` builds, checked as a kubelet would run them (``localcluster/images.py``).

Built with buildah through ``localcluster.images.ensure_images`` (the first run on a machine takes
minutes: debootstrap, pip installs; later runs reuse what did not change), then opened with
``buildah mount``/``buildah run``: non-root numeric users, a passwd entry for the operators' UID
(kopf's ``getpass.getuser()``), imports as that user on a read-only root, no trace of the host's
pip configuration or proxy CA, labelled stand-ins, the catalog and bundle contents, and the web
image answering HTTP with its hostname. Needs root and buildah (CI has both); skipped otherwise.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from localcluster import images
from tools.generate.bundle import OPERATOR_UID, OPERATOR_USER

REPO = Path(__file__).resolve().parents[2]
OPERATORS = ("netperf", "tdset", "webserver")
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
PEM = re.compile(r"-----BEGIN CERTIFICATE-----\n(.*?)\n-----END CERTIFICATE-----", re.S)

NEEDS_BUILDAH = [
    pytest.mark.skipif(os.geteuid() != 0, reason="building and mounting images with buildah needs root"),
    pytest.mark.skipif(shutil.which("buildah") is None, reason="buildah is not installed (make system-deps)"),
    # A cold first build (debootstrap, three pip installs) on a busy 2-core machine.
    pytest.mark.timeout(1800),
]


@pytest.fixture(scope="module")
def built() -> dict[str, Path]:
    """Every image, built or reused: reference -> OCI archive."""
    return images.ensure_images(tool="buildah")


def ref(name: str) -> str:
    return images.BY_NAME[name].ref()


def info(name_or_ref: str) -> images.ImageInfo:
    reference = ref(name_or_ref) if name_or_ref in images.BY_NAME else name_or_ref
    found = images.inspect("buildah", reference)
    assert found is not None, f"{reference} is not in buildah's storage"
    return found


@contextmanager
def container(reference: str) -> Iterator[str]:
    name = subprocess.run(
        ["buildah", "from", "--quiet", "--pull=never", reference], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


@contextmanager
def rootfs(reference: str) -> Iterator[Path]:
    """The image's files, mounted (a throw-away container: nothing written reaches the image)."""
    with container(reference) as name:
        mount = subprocess.run(["buildah", "mount", name], capture_output=True, text=True, check=True)
        try:
            yield Path(mount.stdout.strip())
        finally:
            subprocess.run(["buildah", "umount", name], capture_output=True, check=False)


def run(reference: str, *cmd: str, user: str | None = None, extra: tuple[str, ...] = ()) -> str:
    """``cmd``'s output, run in the image with no network.

    Without ``--network none`` buildah would give the container a CNI bridge, with iptables chains
    (``CNI-*``) a real node started meanwhile on another worker takes for a dead node's leftovers.
    """
    with container(reference) as name:
        args = ["buildah", "run", "--network", "none", *(["--user", user] if user else []), *extra, name]
        args += ["--", *cmd]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)} in {reference} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def files(root: Path) -> Iterator[Path]:
    for dirpath, _, filenames in os.walk(root):
        for filename in filenames:
            path = Path(dirpath) / filename
            if path.is_file() and not path.is_symlink():
                yield path


def local_ca_markers() -> list[bytes]:
    """A line from each certificate the host trusts that no Debian package ships (a proxy's CA).

    Empty when the host has no such certificate or no Debian CA store to compare with.
    """
    debian_store = Path("/usr/share/ca-certificates")
    if not HOST_CA.exists() or not debian_store.is_dir():
        return []
    shipped = {body for crt in debian_store.rglob("*.crt") for body in PEM.findall(crt.read_text())}
    markers = []
    for body in PEM.findall(HOST_CA.read_text()):
        if body not in shipped:
            lines = body.splitlines()
            markers.append(lines[len(lines) // 2].encode())  # mid-certificate: key material
    return markers


# --- without buildah: what decides a rebuild ---------------------------------------------------


def test_dockerfile_parsing_finds_bases_stages_and_copy_sources() -> None:
    text = (REPO / "images" / "webserver-operator" / "Dockerfile").read_text()
    parsed = images.parse_dockerfile(text)
    assert parsed.external_bases == ["debian:bookworm-slim"]
    assert parsed.intermediate_targets == ["build"]
    assert set(parsed.sources) == {
        "pyproject.toml",
        "constraints.txt",
        "README.md",
        "LICENSE",
        "shared",
        "operators",
    }
    catalog = images.parse_dockerfile((REPO / "catalog.Dockerfile").read_text())
    assert catalog.external_bases == [images.OPM_BASE]
    assert catalog.sources == ["catalog"]


def test_stand_in_names_match_what_the_dockerfiles_and_tools_use() -> None:
    from tools.generate import bundle, catalog

    gomod = (REPO / "localcluster" / "go" / "opm" / "go.mod").read_text()
    assert f"github.com/operator-framework/operator-registry {images.OPM_VERSION}\n" in gomod
    assert catalog.OPM_IMAGE == images.OPM_BASE
    assert images.DEFAULT_REGISTRY == bundle.DEFAULT_REGISTRY
    for spec in images.IMAGES:
        for base in images.parse_dockerfile(spec.dockerfile.read_text()).external_bases:
            assert images.qualified(base) in images.STAND_INS, f"{spec.name}: no stand-in for {base}"


def test_input_digest_follows_copied_files_and_ignores_byte_code(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm-slim\nCOPY app /app\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "main.py").write_text("print('hello')\n")
    (tmp_path / "unrelated.txt").write_text("not copied\n")
    spec = images.ImageSpec("t", tmp_path / "Dockerfile", tmp_path, "test")
    first = images.input_digest(spec, "r/t:1", ["base-id"])

    (tmp_path / "unrelated.txt").write_text("changed, but not copied\n")
    (tmp_path / "app" / "__pycache__").mkdir()
    (tmp_path / "app" / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"\0")
    assert images.input_digest(spec, "r/t:1", ["base-id"]) == first

    assert images.input_digest(spec, "r/t:1", ["another-base-id"]) != first
    assert images.input_digest(spec, "r/t:2", ["base-id"]) != first
    (tmp_path / "app" / "main.py").write_text("print('changed')\n")
    assert images.input_digest(spec, "r/t:1", ["base-id"]) != first


# --- the built images -------------------------------------------------------------------------


def passwd_entry(root: Path, uid: int) -> list[str] | None:
    for line in (root / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) == 7 and fields[2] == str(uid):
            return fields
    return None


def run_read_only(root: Path, uid: int, env: list[str], argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` as ``uid`` on the image's files mounted read-only, /tmp a tmpfs (what the pods get).

    A private mount namespace holds the read-only bind mount, so nothing outlives the command.
    """
    script = textwrap.dedent(
        """\
        set -e
        root="$1"; shift
        mount --bind "$root" "$root"
        mount -o remount,bind,ro "$root"
        mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
        mount -t proc proc "$root/proc"
        exec "$@"
        """
    )
    chroot = ["chroot", f"--userspec={uid}:{uid}", str(root), "/usr/bin/env", "-i", *env, *argv]
    return subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--fork",
            "sh",
            "-c",
            script,
            "sh",
            str(root),
            *chroot,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


class TestBuiltImages:
    pytestmark = NEEDS_BUILDAH

    def test_archives_are_oci_archives_named_like_the_images(self, built: dict[str, Path]) -> None:
        assert set(built) == {spec.ref() for spec in images.IMAGES}
        for reference, archive in built.items():
            assert archive.parent == images.archive_dir()
            with tarfile.open(archive) as tar:
                index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
            names = [m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]]
            assert names == [reference]  # what `ctr images import` tags the image with

    def test_every_runnable_image_has_a_numeric_non_root_user(self, built: dict[str, Path]) -> None:
        for spec in images.IMAGES:
            config = info(spec.name)
            if spec.name == "k8s-operators-py-bundle":
                # Data for OLM, FROM scratch: never run, nothing to run.
                assert not config.user and not config.entrypoint and not config.cmd
                continue
            assert re.fullmatch(r"\d+(:\d+)?", config.user), f"{spec.name}: USER {config.user!r}"
            assert all(int(part) != 0 for part in config.user.split(":")), spec.name

    @pytest.mark.parametrize("operator", OPERATORS)
    def test_operator_user_has_a_passwd_entry_and_the_operator_imports(
        self, built: dict[str, Path], operator: str
    ) -> None:
        reference = ref(f"{operator}-operator")
        assert info(reference).user == f"{OPERATOR_UID}:{OPERATOR_UID}"
        code = (
            "import getpass, os, sys; "
            f"import operators.{operator}.reconciler, shared.controller.kopf_adapter; "
            "print(getpass.getuser(), os.getuid(), os.getgid(), os.path.isdir(os.path.expanduser('~')), "
            "sys.version_info[:2])"
        )
        out = run(reference, "python", "-c", code, user=f"{OPERATOR_UID}:{OPERATOR_UID}")
        assert out.strip().split(maxsplit=4) == [
            OPERATOR_USER,
            str(OPERATOR_UID),
            str(OPERATOR_UID),
            "True",
            "(3, 11)",
        ]
        # No pip and no build tools in the running image: only the interpreter and the venv.
        missing = run(
            reference,
            "python",
            "-c",
            "import importlib.util as u, shutil; "
            "print(u.find_spec('pip'), u.find_spec('setuptools'), shutil.which('gcc'), shutil.which('pip'))",
        )
        assert missing.split() == ["None", "None", "None", "None"]

    @pytest.mark.parametrize("operator", OPERATORS)
    def test_operator_starts_on_a_read_only_root_filesystem(
        self, built: dict[str, Path], operator: str
    ) -> None:
        reference = ref(f"{operator}-operator")
        config = info(reference)
        with rootfs(reference) as root:
            entry = passwd_entry(root, OPERATOR_UID)
            assert entry is not None, "no passwd entry for the operator's UID"
            home = entry[5]
            assert (root / home.lstrip("/")).is_dir()
            env = [*config.env, f"HOME={home}"]  # containerd sets HOME from the image's passwd
            probe = (
                "import getpass, tempfile; "
                f"import operators.{operator}.reconciler; "
                "tempfile.NamedTemporaryFile().close(); "  # /tmp (an emptyDir in the pods) is writable
                "print(getpass.getuser())"
            )
            out = run_read_only(root, OPERATOR_UID, env, ["python", "-c", probe])
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == OPERATOR_USER
            # The real entry point gets as far as parsing its options.
            help_run = run_read_only(root, OPERATOR_UID, env, [*config.entrypoint, "--help"])
            assert help_run.returncode == 0, help_run.stderr
            assert "--namespace" in help_run.stdout
            # Nothing outside /tmp is writable, so nothing (byte code, caches) can have been written.
            write = run_read_only(root, OPERATOR_UID, env, ["python", "-c", f"open('{home}/x', 'w')"])
            assert write.returncode != 0
            assert "Read-only file system" in write.stderr

    def test_no_image_holds_the_host_pip_config_or_proxy_ca(self, built: dict[str, Path]) -> None:
        host_ca = HOST_CA.read_bytes() if HOST_CA.exists() else b""
        host_ca_sha = hashlib.sha256(host_ca).hexdigest()
        markers = local_ca_markers()
        for spec in images.IMAGES:
            with rootfs(spec.ref()) as root:
                for rel in ("etc/pip.conf", "etc/xdg/pip", "root/.config/pip", "root/.pip"):
                    assert not (root / rel).exists(), f"{spec.name}: /{rel}"
                assert not (root / str(images.BUILD_CA_PATH.parent).lstrip("/")).exists(), spec.name
                for path in files(root):
                    size = path.stat().st_size
                    if host_ca and size == len(host_ca):
                        digest = hashlib.sha256(path.read_bytes()).hexdigest()
                        assert digest != host_ca_sha, (
                            f"{spec.name}: {path.relative_to(root)} is the host's CA"
                        )
                    if markers and size < 4_000_000:
                        data = path.read_bytes()
                        found = [m for m in markers if m in data]
                        assert not found, f"{spec.name}: {path.relative_to(root)} holds a host-only CA"

    def test_local_stand_ins_say_what_they_stand_in_for(self, built: dict[str, Path]) -> None:
        for base_ref in (images.DEBIAN_BASE, images.OPM_BASE):
            base = images.ensure_base("buildah", base_ref)
            assert base is not None
            labels = info(base_ref).labels
            if not base.stand_in:
                assert labels.get(images.STAND_IN_LABEL) != "true"
                continue  # a registry answered: the real image is used, nothing to check
            assert labels[images.STAND_IN_LABEL] == "true"
            assert labels[images.STAND_IN_FOR_LABEL] == base_ref
            assert "stand-in" in labels[f"{images.STAND_IN_LABEL}.description"].lower()
        # Images built on a stand-in inherit the labels: an image made offline says so.
        if images.ensure_base("buildah", images.DEBIAN_BASE).stand_in:  # type: ignore[union-attr]
            assert info("web").labels[images.STAND_IN_FOR_LABEL] == images.DEBIAN_BASE

    def test_opm_base_runs_opm_as_upstream_does(self, built: dict[str, Path]) -> None:
        config = info(images.OPM_BASE)
        assert config.entrypoint == ["/bin/opm"]
        assert config.user == str(images.OPM_UID)
        assert "opm" in run(images.OPM_BASE, "/bin/opm", "--help")

    def test_catalog_image_holds_and_validates_the_catalog(self, built: dict[str, Path]) -> None:
        reference = ref("k8s-operators-py-catalog")
        config = info(reference)
        assert config.labels["operators.operatorframework.io.index.configs.v1"] == "/configs"
        assert config.entrypoint == ["/bin/opm"]
        assert config.cmd == ["serve", "/configs", "--cache-dir=/tmp/cache"]
        with rootfs(reference) as root:
            ours = REPO / "catalog" / "k8s-operators-py" / "catalog.yaml"
            assert (root / "configs" / "k8s-operators-py" / "catalog.yaml").read_bytes() == ours.read_bytes()
            assert any((root / "tmp" / "cache").iterdir())  # pre-populated by the builder stage
        run(reference, "/bin/opm", "validate", "/configs")

    def test_bundle_image_holds_manifests_metadata_and_labels(self, built: dict[str, Path]) -> None:
        reference = ref("k8s-operators-py-bundle")
        annotations = yaml.safe_load((REPO / "bundle" / "metadata" / "annotations.yaml").read_text())
        labels = info(reference).labels
        for key, value in annotations["annotations"].items():
            assert labels[key] == value
        with rootfs(reference) as root:
            for folder in ("manifests", "metadata", "tests/scorecard"):
                ours = {
                    p.relative_to(REPO / "bundle"): p.read_bytes() for p in files(REPO / "bundle" / folder)
                }
                theirs = {p.relative_to(root): p.read_bytes() for p in files(root / folder)}
                assert theirs == ours, folder

    def test_web_image_answers_with_its_hostname_as_its_user(self, built: dict[str, Path]) -> None:
        reference = ref("web")
        config = info(reference)
        assert config.user == "101:101"
        # nginx as the image's user in a network namespace of its own; bash's /dev/tcp is the
        # client (the image has no other), so nothing listens on the host.
        script = (
            f"{shlex.join(config.cmd)} & "
            "for i in $(seq 100); do exec 3<>/dev/tcp/127.0.0.1/8080 && break; sleep 0.1; done; "
            'printf "GET / HTTP/1.0\\r\\nHost: web\\r\\n\\r\\n" >&3; cat <&3; kill %1'
        )
        out = run(
            reference,
            "bash",
            "-c",
            script,
            user=config.user,
            extra=("--hostname", "web-7f9c4"),
        )
        lines = out.splitlines()  # nginx's access log (stdout) and the response, interleaved
        assert "HTTP/1.1 200 OK" in lines, out
        assert "<body><h1>Hello from web-7f9c4</h1>" in lines
        assert any('"GET / HTTP/1.0" 200' in line for line in lines)  # the access log reaches stdout

    def test_a_second_run_rebuilds_nothing(self, built: dict[str, Path]) -> None:
        before = {spec.name: info(spec.name).id for spec in images.IMAGES}
        results = images.build_images(tool="buildah")
        assert {r.name: r.built for r in results} == dict.fromkeys(before, False)
        assert {r.name: r.id for r in results} == before
        assert {r.ref: r.archive for r in results} == built
