"""The serving certificate of the HTTPS ``/metrics`` endpoint, as controller-runtime picks it.

A certificate and key mounted in a directory (``--metrics-cert-dir``/``METRICS_CERT_DIR``,
files ``tls.crt`` and ``tls.key``: the keys of a ``kubernetes.io/tls`` Secret, as cert-manager
writes them) are used when both are there. Otherwise a self-signed certificate is made at start,
in memory, for ``localhost``, ``127.0.0.1`` and the host's name (controller-runtime, like
kube-controller-manager, does the same): scrapers then skip verification
(``insecureSkipVerify``) and rely on the bearer token for who they are, and on the network for
where they connect.

The files are read once at start: a renewed certificate is served after the pod restarts
(controller-runtime watches them; not done here). Only HTTP/1.1 is offered (ALPN), TLS 1.2 at
least: the scaffold turns HTTP/2 off since the Rapid Reset advisories, and aiohttp serves
HTTP/1.1 only anyway.
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
from pathlib import Path

CERT_NAME = "tls.crt"
KEY_NAME = "tls.key"
SELF_SIGNED_DAYS = 365
logger = logging.getLogger("shared.certs")


def server_context(cert_dir: str | os.PathLike[str] | None = None) -> ssl.SSLContext:
    """A TLS server context with the mounted certificate, or a self-signed one (module docstring)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])
    if cert_dir:
        cert, key = Path(cert_dir) / CERT_NAME, Path(cert_dir) / KEY_NAME
        if cert.is_file() and key.is_file():
            ctx.load_cert_chain(cert, key)
            logger.info(f"metrics: serving the certificate in {cert_dir}")
            return ctx
        logger.info(f"metrics: no {CERT_NAME} and {KEY_NAME} in {cert_dir}; using a self-signed certificate")
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
