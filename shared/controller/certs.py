"""The serving certificate of the HTTPS ``/metrics`` endpoint, as controller-runtime picks it.

A certificate and key mounted in a directory (``--metrics-cert-dir``/``METRICS_CERT_DIR``,
files ``tls.crt`` and ``tls.key``: the keys of a ``kubernetes.io/tls`` Secret, as cert-manager
writes them) are used when both are there. Otherwise a self-signed certificate is made at start,
in memory, for ``localhost``, ``127.0.0.1`` and the host's name (controller-runtime, like
kube-controller-manager, does the same): scrapers then skip verification
(``insecureSkipVerify``) and rely on the bearer token for who they are, and on the network for
where they connect.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import shutil
import socket
import ssl
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CERT_NAME = "tls.crt"
KEY_NAME = "tls.key"
SELF_SIGNED_DAYS = 365
RECHECK_INTERVAL = 10.0  # seconds; controller-runtime's certwatcher polls as often
logger = logging.getLogger("shared.certs")

Stamp = tuple[tuple[int, int, int], ...]  # (inode, size, mtime) of the certificate and the key


class ServingContext(ssl.SSLContext):
    """A server ``SSLContext`` that loads the mounted certificate again when its files change
    (``server_context``'s docstring); made by ``server_context``."""

    cert_dir: Path | None
    clock: Callable[[], float]
    _stamp: Stamp | None
    _checked: float

    def refresh(self, *, force: bool = False) -> bool:
        """Load the directory's pair if it changed since the last look; True when it did."""
        if self.cert_dir is None:
            return False
        now = self.clock()
        if not force and now - self._checked < RECHECK_INTERVAL:
            return False
        self._checked = now
        stamp = _stamp(self.cert_dir)
        if stamp is None or stamp == self._stamp:
            return False
        self._stamp = stamp  # a pair that fails to load is reported once, not at every look
        try:
            # Tried on a scratch context first: OpenSSL takes the certificate before it finds
            # the key does not match, and this context would be left with a broken pair.
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
                self.cert_dir / CERT_NAME, self.cert_dir / KEY_NAME
            )
            self.load_cert_chain(self.cert_dir / CERT_NAME, self.cert_dir / KEY_NAME)
        except (OSError, ssl.SSLError) as exc:
            logger.warning(
                f"metrics: the certificate in {self.cert_dir} did not load ({exc}); keeping the old one"
            )
            return False
        logger.info(f"metrics: serving the certificate in {self.cert_dir}")
        return True

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        # asyncio (and uvloop) call this for every new TLS connection of the server.
        self.refresh()
        return super().wrap_bio(*args, **kwargs)


def _stamp(cert_dir: Path) -> Stamp | None:
    """What identifies the pair's current files (None: not both there). The kubelet swaps a
    Secret volume's files by renaming a symlink, so the inode changes with them."""
    try:
        stats = [os.stat(cert_dir / name) for name in (CERT_NAME, KEY_NAME)]
    except OSError:
        return None
    return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)


def server_context(
    cert_dir: str | os.PathLike[str] | None = None, *, clock: Callable[[], float] = time.monotonic
) -> ServingContext:
    """A TLS server context with the mounted certificate, or a self-signed one until one is
    mounted (below).

    The directory is watched as controller-runtime's ``certwatcher`` watches it (it polls every
    10 s besides fsnotify): a renewed certificate (cert-manager rotating the Secret, the kubelet
    swapping the mounted files), or one that appears in a directory that was empty at start (an
    optional Secret created later), is served from the next TLS connection on, without a restart.
    Here the check is made when a connection starts, at most every ``RECHECK_INTERVAL``
    seconds (a ``stat`` of two files): ``ServingContext`` is the server's ``SSLContext``,
    whose ``wrap_bio`` asyncio calls for each new connection. A pair that fails to load (a
    certificate without its new key) is logged and the previous one kept.

    Only HTTP/1.1 is offered (ALPN), TLS 1.2 at least: the scaffold turns HTTP/2 off since the
    Rapid Reset advisories, and aiohttp serves HTTP/1.1 only anyway.
    """
    ctx = ServingContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    ctx.cert_dir = Path(cert_dir) if cert_dir else None
    ctx.clock = clock
    ctx._stamp = None
    ctx._checked = clock()
    if ctx.refresh(force=True):
        return ctx
    if cert_dir:
        logger.info(
            f"metrics: no {CERT_NAME} and {KEY_NAME} in {cert_dir}; a self-signed certificate until there are"
        )
    cert_pem, key_pem = self_signed(names=("localhost", socket.gethostname()))
    _load_from_memory(ctx, cert_pem, key_pem)
    return ctx


def self_signed(
    names: tuple[str, ...] = ("localhost",),
    addresses: tuple[str, ...] = ("127.0.0.1", "::1"),
    days: int = SELF_SIGNED_DAYS,
) -> tuple[bytes, bytes]:
    """A self-signed certificate and its key (PEM), ECDSA P-256, for ``names`` and ``addresses``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{names[0]}@{int(_now().timestamp())}")])
    now = _now()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dict.fromkeys(names) if n]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))  # clock skew of the scraper
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _load_from_memory(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """``load_cert_chain`` reads files only: write them to a private directory, load, delete at
    once, so no key outlives the call on disk (the operators' /tmp is an emptyDir)."""
    workdir = tempfile.mkdtemp(prefix="metrics-cert-")
    try:
        cert, key = Path(workdir) / CERT_NAME, Path(workdir) / KEY_NAME
        for path, data in ((cert, cert_pem), (key, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        ctx.load_cert_chain(cert, key)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
